declare void @adoffload.sync_threads()
define void @k(i64 %tid0, ptr %x, i64 %x.shape0, ptr %status) {
entry:
  %p = getelementptr double, ptr %x, i64 %tid0
  %odd = and i64 %tid0, 1
  %c = icmp eq i64 %odd, 0
  br i1 %c, label %a, label %b
a:
  call void @adoffload.sync_threads()
  store double 1.0, ptr %p
  br label %end
b:
  store double 2.0, ptr %p
  call void @adoffload.sync_threads()
  store double 3.0, ptr %p
  br label %end
end:
  ret void
}
