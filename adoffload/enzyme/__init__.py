"""IR-level automatic differentiation, Enzyme-style: activity, rules as data, forward and reverse modes.

``autodiff(Forward | Reverse, fn, Active(x) | Const(x) | Duplicated(x, dx), ...)`` differentiates any
function (our kernels' bodies or foreign LLVM IR); ``forward`` / ``reverse`` build derivative
functions in a Module; ``derive_kernel`` builds derived kernel bodies for the launcher.
"""
from __future__ import annotations

from ..errors import DifferentiationError
from .activity import Activity, ActivityInfo
from .soundness import analyze
from . import elementary_rules as _elementary_rules  # noqa: F401  (registers the rules of arithmetic and libm)
from . import blocks as _blocks  # noqa: F401  (registers the rules of block kernels' cooperative operations)
from . import special as _special  # noqa: F401  (registers the rules of libm's special functions)
from . import vectors as _vectors  # noqa: F401  (registers the rules of vector reductions)
from .api import Active, Const, Duplicated, Forward, Reverse, autodiff
from .forward import forward
from .kernels import DerivedKernel, derive_kernel
from .rules import RULES, Rule, RuleContext, register, rule_for


def reverse(*args, **kwargs):
    """Reverse mode (combined adjoint); see ``adoffload.enzyme.reverse.reverse``."""
    from .reverse import reverse as _reverse     # imported lazily: the reverse engine is the heavier module
    return _reverse(*args, **kwargs)


__all__ = ["Forward", "Reverse", "Active", "Const", "Duplicated", "autodiff", "forward", "reverse",
           "derive_kernel", "DerivedKernel", "Activity", "ActivityInfo", "analyze", "RULES", "Rule",
           "RuleContext", "register", "rule_for", "DifferentiationError"]
