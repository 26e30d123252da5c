"""Reading one function's parameters and definitions from LLVM text, without parsing the module.

For cheap textual tests ahead of (or instead of) an analysis that would import the whole module
(~50 ms on the host): codegen/gpu/reductions.py's prefilter, codegen/host/serial.py's update roots.
"""
from __future__ import annotations

import re

NAME = r'%(?:"[^"]*"|[-\w.$]+)'
_DEF = re.compile(r"^\s*(" + NAME + r")\s*=\s*(?:(?:tail|musttail|notail)\s+)?(\w+)(.*)$")


def function_text(text: str, name: str):
    """(parameter names, {value name: (opcode, rest of the line)}, the body's lines) of function
    ``name`` in ``text``, names as the text spells them (quotes kept); None when it is not defined."""
    match = re.search(r"^define [^@]*@\"?" + re.escape(name) + r"\"?\((.*?)\).*?^}", text, re.M | re.S)
    if match is None:
        return None
    lines = match.group(0).splitlines()[1:]
    defs = {}
    for line in lines:
        found = _DEF.match(line)
        if found:
            defs[found.group(1)] = (found.group(2), found.group(3))
    return re.findall(NAME, match.group(1)), defs, lines
