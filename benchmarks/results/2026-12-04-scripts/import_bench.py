import time, sys
from adoffload import ir
text = open("/tmp/lbfgs_body.ll").read()
ir.import_module(text)
best = 9
for _ in range(5):
    t = time.perf_counter(); ir.import_module(text); best = min(best, time.perf_counter() - t)
print(f"import_module(lbfgs body, {text.count(chr(10))} lines): best of 5 {best*1000:.0f} ms")
