"""Helpers (``@ado.func``): specialised per argument types, emitted as internal functions."""
from __future__ import annotations

from ..errors import UnsupportedConstructError


class HelperCalls:
    """Mixin of FunctionLowering for calls of ``@ado.func`` helpers."""

    def call_helper(self, helper, node):
        raise UnsupportedConstructError("helpers are not supported yet")
