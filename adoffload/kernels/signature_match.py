"""A launch plan's quick check: does this launch have exactly the signature the plan was built for?

``matcher(...)`` writes a small Python function for one plan: it compares the grid (an int), the
device, how many arguments came by position and which by keyword, and per argument its type (for a
numpy array also its dtype object, shape and the flags the checks read: C-contiguous, aligned,
writeable), and returns the visible values in parameter order, or None. Generated code because it
runs on every launch: straight-line attribute loads and compares cost a third of a loop over a
table of checks. No name or value from the caller goes into the code: dtypes, shapes, types and the
keyword names are constants of the function's namespace.
"""
from __future__ import annotations

import numpy as np

KEY_FLAGS = 0x1 | 0x100 | 0x400      # numpy's C_CONTIGUOUS | ALIGNED | WRITEABLE (ndarray.flags.num)


def matcher(params: list[str], raw: tuple, positional: int, keywords: tuple[str, ...], grid: int, device):
    """The check of a launch like the one that passed ``raw`` (``positional`` values by position, then
    ``keywords`` by name, in their order) for the visible ``params`` (names, in order), ``grid`` and
    ``device``: ``check(args, kwargs, grid, device) -> list | None``."""
    namespace = {"ndarray": np.ndarray, "DEVICE": device, "GRID": grid}
    lines = ["def check(args, kwargs, grid, device):",
             f"    if type(grid) is not int or grid != GRID or len(args) != {positional}:",
             "        return None",
             "    if device is not DEVICE and device != DEVICE:",
             "        return None"]
    by_param = {}
    if positional:
        lines.append(f"    {', '.join(f'a{k}' for k in range(positional))}, = args")
    for k in range(positional):
        by_param[k] = f"a{k}"
    lines.append(f"    if len(kwargs) != {len(keywords)}:")
    lines.append("        return None")
    if keywords:
        lines.append("    try:")
        for j, name in enumerate(keywords):
            namespace[f"K{j}"] = name
            lines.append(f"        k{j} = kwargs[K{j}]")
            by_param[params.index(name)] = f"k{j}"
        lines.append("    except KeyError:")
        lines.append("        return None")
    for position, value in enumerate(raw):
        name = f"a{position}" if position < positional else f"k{position - positional}"
        if type(value) is np.ndarray:
            namespace[f"D{position}"], namespace[f"S{position}"] = value.dtype, value.shape
            lines.append(f"    if type({name}) is not ndarray or {name}.dtype is not D{position} or "
                         f"{name}.shape != S{position} or {name}.flags.num & {KEY_FLAGS} != "
                         f"{value.flags.num & KEY_FLAGS}:")
        else:
            namespace[f"T{position}"] = type(value)
            lines.append(f"    if type({name}) is not T{position}:")
        lines.append("        return None")
    lines.append(f"    return [{', '.join(by_param[k] for k in range(len(params)))}]")
    exec(compile("\n".join(lines), f"<launch check of {len(params)} params>", "exec"), namespace)
    return namespace["check"]
