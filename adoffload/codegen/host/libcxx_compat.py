"""What code compiled against libc++ (the ziglang wheel's clang++) needs from a C++ runtime and the
system's libstdc++ does not define, on its throw paths.

Both follow the Itanium ABI and name the standard exception classes alike (``std::domain_error``
is ``St12domain_error`` in both), so libstdc++ serves operator new, ``__cxa_throw`` and those
classes. Two gaps stop whole functions from running on the host, though only a throw reaches them:

* ``std::bad_array_new_length``'s constructor, inline in libstdc++'s header (so not exported) and
  out of line in libc++'s: every ``std::vector`` that grows (``push_back``, ``reserve``, ``resize``)
  calls it on its "too large" path. Defined here as libstdc++'s inline one: the object is its
  vtable pointer.
* ``std::__1::bad_function_call`` (what an empty ``std::function`` throws), a libc++ class: its
  type_info, vtable, destructors and ``what()`` are defined here as libc++ defines them (a
  ``std::exception`` with its own ``what()``), so a ``catch (const std::exception&)`` still works.
"""
from __future__ import annotations

import llvmlite.binding as llvm

_BAD_ARRAY_NEW_LENGTH = """
@_ZTVSt20bad_array_new_length = external constant ptr
define linkonce_odr void @_ZNSt20bad_array_new_lengthC2Ev(ptr %this) {
  store ptr getelementptr inbounds (i8, ptr @_ZTVSt20bad_array_new_length, i64 16), ptr %this
  ret void
}
define linkonce_odr void @_ZNSt20bad_array_new_lengthC1Ev(ptr %this) {
  store ptr getelementptr inbounds (i8, ptr @_ZTVSt20bad_array_new_length, i64 16), ptr %this
  ret void
}
"""

_BAD_FUNCTION_CALL = """
@_ZTVN10__cxxabiv120__si_class_type_infoE = external global ptr
@_ZTISt9exception = external constant ptr
@_ZTSNSt3__117bad_function_callE = linkonce_odr constant [28 x i8] c"NSt3__117bad_function_callE\\00"
@_ZTINSt3__117bad_function_callE = linkonce_odr constant { ptr, ptr, ptr } { ptr getelementptr inbounds (i8, ptr @_ZTVN10__cxxabiv120__si_class_type_infoE, i64 16), ptr @_ZTSNSt3__117bad_function_callE, ptr @_ZTISt9exception }
@_ZTVNSt3__117bad_function_callE = linkonce_odr unnamed_addr constant { [5 x ptr] } { [5 x ptr] [ptr null, ptr @_ZTINSt3__117bad_function_callE, ptr @_ZNSt3__117bad_function_callD1Ev, ptr @_ZNSt3__117bad_function_callD0Ev, ptr @_ZNKSt3__117bad_function_call4whatEv] }
@.bad_function_call.what = private constant [23 x i8] c"std::bad_function_call\\00"
declare void @_ZNSt9exceptionD2Ev(ptr)
declare void @_ZdlPv(ptr)
define linkonce_odr void @_ZNSt3__117bad_function_callD2Ev(ptr %this) {
  call void @_ZNSt9exceptionD2Ev(ptr %this)
  ret void
}
define linkonce_odr void @_ZNSt3__117bad_function_callD1Ev(ptr %this) {
  call void @_ZNSt9exceptionD2Ev(ptr %this)
  ret void
}
define linkonce_odr void @_ZNSt3__117bad_function_callD0Ev(ptr %this) {
  call void @_ZNSt9exceptionD2Ev(ptr %this)
  call void @_ZdlPv(ptr %this)
  ret void
}
define linkonce_odr ptr @_ZNKSt3__117bad_function_call4whatEv(ptr %this) {
  ret ptr @.bad_function_call.what
}
"""

# (a symbol the module may lack, the definitions that provide it)
_DEFINITIONS = [
    ("_ZNSt20bad_array_new_lengthC1Ev", _BAD_ARRAY_NEW_LENGTH),
    ("_ZNSt20bad_array_new_lengthC2Ev", _BAD_ARRAY_NEW_LENGTH),
    ("_ZNSt3__117bad_function_callD1Ev", _BAD_FUNCTION_CALL),
    ("_ZNSt3__117bad_function_callD2Ev", _BAD_FUNCTION_CALL),
    ("_ZTINSt3__117bad_function_callE", _BAD_FUNCTION_CALL),
    ("_ZTVNSt3__117bad_function_callE", _BAD_FUNCTION_CALL),
]


def define_libcxx_gaps(module: llvm.ModuleRef, missing: set[str]) -> list[str]:
    """Link into ``module`` the definitions above for the symbols of ``missing`` (functions or
    globals the module declares and no loaded library defines) they provide; returns the symbols
    so defined. Call with libstdc++ loaded (the definitions use its vtables and type_info)."""
    texts = []
    for name, text in _DEFINITIONS:
        if name in missing and text not in texts:
            texts.append(text)
    defined = []
    for text in texts:
        lib = llvm.parse_assembly(text)
        names = {f.name for f in lib.functions if not f.is_declaration}
        names |= {g.name for g in lib.global_variables if not g.is_declaration}
        lib.triple, lib.data_layout = module.triple, module.data_layout
        module.link_in(lib)
        defined += sorted(names & missing)
    return defined
