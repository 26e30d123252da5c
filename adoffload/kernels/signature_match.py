"""A launch plan's quick check: does this launch have exactly the signature the plan was built for?

``matcher(...)`` writes a small Python function for one plan: it compares the grid (an int), the
device, how many arguments came by position and which by keyword, and per argument its type (for a
numpy array also its dtype object, shape and the flags the checks read: C-contiguous, aligned,
writeable), and returns the visible values in parameter order, or None. Generated code because it
runs on every launch: straight-line attribute loads and compares cost a third of a loop over a
table of checks. No name or value from the caller goes into the code: dtypes, shapes, types and the
keyword names are constants of the function's namespace. ``in_place_matcher`` writes the same check
for plans whose arrays are on the GPU (DeviceArrays, CuPy arrays read through their attributes) and
returns the launch's slot sources.
"""
from __future__ import annotations

import numpy as np

KEY_FLAGS = 0x1 | 0x100 | 0x400      # numpy's C_CONTIGUOUS | ALIGNED | WRITEABLE (ndarray.flags.num)


def matcher(params: list[str], raw: tuple, positional: int, keywords: tuple[str, ...], grid: int, device):
    """The check of a launch like the one that passed ``raw`` (``positional`` values by position, then
    ``keywords`` by name, in their order) for the visible ``params`` (names, in order), ``grid`` and
    ``device``: ``check(args, kwargs, grid, device) -> list | None``."""
    namespace = {"ndarray": np.ndarray}
    lines, names, by_param = _header(namespace, params, positional, keywords, grid, device)
    for position, value in enumerate(raw):
        name = names[position]
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
    return _compiled(lines, namespace, len(params))


def in_place_matcher(params: list[str], raw: tuple, positional: int, keywords: tuple[str, ...], grid: int, device,
                     scalar_types):
    """The check of a launch like ``matcher``'s for a plan whose arrays are all on the GPU, given as
    our DeviceArrays or CuPy arrays (any other argument: None, no such check). It returns the slot
    sources in parameter order (scalars as given, each array's data address), or None; a CuPy array
    also needs CuPy on its null stream (the launch is then ordered after CuPy's work and need not
    wait, launch_run.py) and C-contiguous, on the device it was on."""
    from ..runtime.dlpack import DeviceArray
    namespace: dict = {}
    lines, names, by_param = _header(namespace, params, positional, keywords, grid, device)
    sources = dict(by_param)
    stream_checked = False
    for position, value in enumerate(raw):
        name, kind = names[position], type(value)
        param = next(k for k, n in by_param.items() if n == name)
        namespace[f"T{position}"] = kind
        if kind in scalar_types:
            lines += [f"    if type({name}) is not T{position}:", "        return None"]
            continue
        namespace[f"D{position}"], namespace[f"S{position}"] = value.dtype, tuple(value.shape)
        same_layout = (f"type({name}) is not T{position} or ({name}.dtype is not D{position} and "
                       f"{name}.dtype != D{position}) or {name}.shape != S{position}")
        if kind is DeviceArray:
            namespace[f"B{position}"] = value.buffer.device
            lines += [f"    if {same_layout} or {name}.buffer.device is not B{position}:", "        return None"]
            sources[param] = f"{name}.buffer.ptr"
        elif kind.__name__ == "ndarray" and kind.__module__.startswith("cupy"):
            if not stream_checked:
                import cupy
                namespace["current_stream"] = cupy.cuda.get_current_stream
                lines += ["    if current_stream().ptr != 0:", "        return None"]
                stream_checked = True
            contiguous = "_c_contiguous" if hasattr(value, "_c_contiguous") else "flags.c_contiguous"
            namespace[f"I{position}"] = value.data.device_id
            lines += [f"    if {same_layout} or not {name}.{contiguous}:", "        return None",
                      f"    m{position} = {name}.data",
                      f"    if m{position}.device_id != I{position}:", "        return None"]
            sources[param] = f"m{position}.ptr"
        else:
            return None
    lines.append(f"    return [{', '.join(sources[k] for k in range(len(params)))}]")
    return _compiled(lines, namespace, len(params))


def _header(namespace: dict, params: list[str], positional: int, keywords: tuple[str, ...], grid: int, device):
    """The check's first lines (grid, device, how the arguments came), the local name of each raw
    argument, and the local name by parameter."""
    namespace.update({"DEVICE": device, "GRID": grid})
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
    names = [f"a{k}" for k in range(positional)] + [f"k{j}" for j in range(len(keywords))]
    return lines, names, by_param


def _compiled(lines: list[str], namespace: dict, params: int):
    exec(compile("\n".join(lines), f"<launch check of {params} params>", "exec"), namespace)
    return namespace["check"]
