"""Source locations of code clang inlined from adoffload's CUDA header, moved to the user's call.

With ``options=["-gline-tables-only"]`` an instruction from ``atomicCAS`` or ``atomicExch`` carries
a ``!DILocation`` in ``ado_cuda.h`` (``inlinedAt`` the user's line). A refusal naming
``ado_cuda.h:182`` tells the user nothing about their kernel, so each such location becomes the
location of its call site (followed out of the header through ``inlinedAt``), which keeps the
rest of the inlining chain, so the IR stays valid."""
from __future__ import annotations

import re

HEADER_NAME = "ado_cuda.h"
_DI_FILE = re.compile(r'^!(\d+) = (?:distinct )?!DIFile\(filename: "((?:[^"\\]|\\.)*)"', re.M)
_DI_SCOPE = re.compile(
    r'^!(\d+) = (?:distinct )?!DI(?:Subprogram|LexicalBlock|LexicalBlockFile)\([^\n]*?\bfile: !(\d+)', re.M)
_DI_LOCATION = re.compile(r'^!(\d+) = (distinct )?!DILocation\(([^\n]*)\)$', re.M)
_SCOPE = re.compile(r'\bscope: !(\d+)')
_INLINED_AT = re.compile(r'\binlinedAt: !(\d+)')


def call_site_locations(text: str) -> str:
    """``text`` with every ``DILocation`` inside the header replaced by its call site's fields."""
    header_files = {n for n, name in _DI_FILE.findall(text) if name.endswith(HEADER_NAME)}
    if not header_files:
        return text
    in_header = {n for n, f in _DI_SCOPE.findall(text) if f in header_files}
    fields = {n: body for n, _, body in _DI_LOCATION.findall(text)}

    def resolved(n: str, depth: int = 0) -> str:
        body = fields[n]
        scope, caller = _SCOPE.search(body), _INLINED_AT.search(body)
        if scope is None or scope.group(1) not in in_header or caller is None or caller.group(1) not in fields \
                or depth > 64:
            return body
        return resolved(caller.group(1), depth + 1)

    def rewrite(match: re.Match) -> str:
        n, distinct = match.group(1), match.group(2) or ""
        return f"!{n} = {distinct}!DILocation({resolved(n)})"
    return _DI_LOCATION.sub(rewrite, text)
