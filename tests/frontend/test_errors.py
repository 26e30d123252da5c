"""Every front-end error names file, line and column and shows the line with a caret."""
import pytest

import adoffload.language.builtins as ado
from adoffload.errors import (KernelTypeError, SourceError, UndefinedNameError,
                              UnsupportedConstructError)
from adoffload.frontend import compile_kernel
from adoffload.language.types import In, InOut, Out, f32, f64, i32


def not_a_helper(v):
    return v


class Exploding:
    @property
    def value(self):
        raise RuntimeError("boom")


EXPLODING = Exploding()


def k_list_comprehension(x: In[f64], out: Out[f64]):
    i = ado.tid()
    t = [x[j] for j in range(3)]


def k_with(x: In[f64], out: Out[f64]):
    i = ado.tid()
    with open("f"):
        out[i] = x[i]


def k_try(x: In[f64], out: Out[f64]):
    i = ado.tid()
    try:
        out[i] = x[i]
    except Exception:
        pass


def k_lambda(x: In[f64], out: Out[f64]):
    i = ado.tid()
    f = lambda v: v
    out[i] = x[i]


def k_string(x: In[f64], out: Out[f64]):
    i = ado.tid()
    s = "text"
    out[i] = x[i]


def k_unknown_call(x: In[f64], out: Out[f64]):
    i = ado.tid()
    out[i] = not_a_helper(x[i])


def k_slice(x: In[f64], out: Out[f64]):
    i = ado.tid()
    out[i] = x[1:3]


def k_float_index(x: In[f64], out: Out[f64]):
    i = ado.tid()
    out[i] = x[i * 0.5]


def k_write_input(x: In[f64], out: Out[f64]):
    i = ado.tid()
    x[i] = 1.0


def k_array_as_scalar(x: In[f64], out: Out[f64]):
    i = ado.tid()
    out[i] = x + 1.0


def k_type_change(x: In[f64], out: Out[f64]):
    i = ado.tid()
    n = i32(3)
    n = x[i]
    out[i] = 0.0


def k_narrowing_store(x: In[f64], out: Out[f32]):
    i = ado.tid()
    out[i] = x[i]


def k_undefined(x: In[f64], out: Out[f64]):
    i = ado.tid()
    out[i] = x[i] * undefined_thing


def k_foreign_exception(x: In[f64], out: Out[f64]):
    i = ado.tid()
    out[i] = EXPLODING.value


def k_missing_annotation(x, out: Out[f64]):
    i = ado.tid()


def k_return_value(x: In[f64], out: Out[f64]):
    i = ado.tid()
    return x[i]


def k_wrong_ndim(x: In[f64, 2], out: Out[f64]):
    i = ado.tid()
    out[i] = x[i]


CASES = [
    (k_list_comprehension, UnsupportedConstructError, "list comprehensions are not supported",
     "[x[j] for"),
    (k_with, UnsupportedConstructError, "'with' statements are not supported", "with open"),
    (k_try, UnsupportedConstructError, "'try' statements are not supported", "try:"),
    (k_lambda, UnsupportedConstructError, "lambda is not supported", "lambda v"),
    (k_string, UnsupportedConstructError, "str constants are not supported", '"text"'),
    (k_unknown_call, UnsupportedConstructError, "cannot call Python function 'not_a_helper'",
     "not_a_helper(x[i])"),
    (k_slice, UnsupportedConstructError, "slices are not supported", "x[1:3]"),
    (k_float_index, KernelTypeError, "array index must be an integer", "x[i * 0.5]"),
    (k_write_input, KernelTypeError, "array 'x' is an input", "x[i] = 1.0"),
    (k_array_as_scalar, KernelTypeError, "array 'x' (ado.In[ado.f64, 1]) used as a scalar", "x + 1.0"),
    (k_type_change, KernelTypeError, "cannot store a ado.f64 value into variable 'n' of type ado.i32",
     "n = x[i]"),
    (k_narrowing_store, KernelTypeError, "cannot store a ado.f64 value into an element of 'out'",
     "out[i] = x[i]"),
    (k_undefined, UndefinedNameError, "name 'undefined_thing' is not defined", "undefined_thing"),
    (k_foreign_exception, SourceError, "RuntimeError: boom", "EXPLODING.value"),
    (k_missing_annotation, KernelTypeError, "kernel parameter 'x' needs a type annotation", "x, out"),
    (k_return_value, KernelTypeError, "kernels return nothing", "return x[i]"),
    (k_wrong_ndim, KernelTypeError, "has 2 dimension(s) but was indexed with 1", "x[i]"),
]


@pytest.mark.parametrize("kernel,error,message,caret_at", CASES, ids=[c[0].__name__ for c in CASES])
def test_error_has_location_source_line_and_caret(kernel, error, message, caret_at):
    with pytest.raises(error) as info:
        compile_kernel(kernel)
    exc = info.value
    text = str(exc)
    assert message in text
    assert exc.filename == __file__
    assert f"{__file__}:{exc.line}:{exc.col + 1}: " in text
    assert f"(in kernel '{kernel.__name__}')" in text
    # the caret sits under the offending construct in the shown source line
    lines = text.splitlines()
    source_line, caret_line = lines[-2], lines[-1]
    assert caret_line.strip() == "^"
    column = caret_line.index("^")
    assert source_line[column:].startswith(caret_at), (source_line, caret_line)
    with open(__file__) as f:
        assert f.read().splitlines()[exc.line - 1].strip() == source_line.strip()


def k_python_builtin(x: In[f64], out: Out[f64]):
    i = ado.tid()
    out[i] = sum(x[i], 1.0)


def test_unsupported_python_builtin():
    with pytest.raises(UnsupportedConstructError, match="the Python builtin 'sum' is not supported"):
        compile_kernel(k_python_builtin)


def test_error_classes_are_builtin_compatible():
    with pytest.raises(TypeError):
        compile_kernel(k_float_index)
    with pytest.raises(NameError):
        compile_kernel(k_undefined)
    with pytest.raises(NotImplementedError):
        compile_kernel(k_with)


def test_errors_inside_helpers_point_into_the_helper():
    @ado.func
    def bad_helper(v):
        return v[0]

    def k(a: f64, out: Out[f64]):
        i = ado.tid()
        out[i] = bad_helper(a)

    with pytest.raises(KernelTypeError) as info:
        compile_kernel(k)
    assert "cannot be indexed" in str(info.value) and "return v[0]" in str(info.value)


def test_tid_outside_a_kernel_raises_a_clear_error():
    from adoffload.errors import Error
    with pytest.raises(Error, match="only has a meaning inside a kernel"):
        ado.tid()


def test_tid_in_a_helper_is_rejected():
    @ado.func
    def where():
        return ado.tid()

    def k(out: Out[f64]):
        i = ado.tid()
        out[i] = float(where())

    with pytest.raises(UnsupportedConstructError, match="tid\\(\\) can only be used in the kernel"):
        compile_kernel(k)


def test_recursion_is_rejected():
    @ado.func
    def fact(n):
        return 1 if n <= 1 else n * fact(n - 1)

    def k(out: InOut[f64]):
        i = ado.tid()
        out[i] = float(fact(i))

    with pytest.raises(UnsupportedConstructError, match="recursion"):
        compile_kernel(k)
