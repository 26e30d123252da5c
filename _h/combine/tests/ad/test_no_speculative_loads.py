"""The reverse sweep must not load through an index that the forward sweep's branches ruled
out. Neighbor lists are padded with -1; the LJ kernel reads ``pos[j]`` only under
``if j >= 0``. Its adjoints (first and second order) run here with ``pos`` at the very start
of a page whose preceding page is unreadable, so a speculative ``pos[-1]`` load faults. That
would kill the process, so the launch runs in a subprocess."""
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import ctypes, mmap
    import numpy as np
    import adoffload as ado
    from adoffload.chemistry import kernels

    page = mmap.PAGESIZE
    region = mmap.mmap(-1, 3 * page)
    libc = ctypes.CDLL(None)
    base = ctypes.addressof(ctypes.c_char.from_buffer(region))
    assert libc.mprotect(ctypes.c_void_p(base), ctypes.c_size_t(page), 0) == 0       # PROT_NONE

    n = 4
    pos = np.frombuffer(region, dtype=np.float64, count=3 * n, offset=page).reshape(n, 3)
    pos[:] = np.arange(3 * n).reshape(n, 3) * 0.4
    neighbors = np.array([[j for j in range(n) if j != i] + [-1, -1] for i in range(n)], dtype=np.int64)
    box, common = np.full(3, 20.0), dict(sigma=1.0, epsilon=1.0, cutoff=2.5)

    first = ado.vjp(kernels.lj_energy, ["pos", "sigma", "epsilon"])
    d_pos, d_sigma, d_epsilon = np.zeros((n, 3)), np.zeros(1), np.zeros(1)
    first(pos, box, neighbors, 1.0, 1.0, 2.5, np.zeros(n), d_pos, d_sigma, d_epsilon, np.ones(n), grid=n)

    second = ado.vjp(first, ["pos", "sigma", "epsilon"])
    values = dict(pos=pos, box=box, neighbors=neighbors, sigma=1.0, epsilon=1.0, cutoff=2.5, e=np.zeros(n))
    args = []
    for p in second.signature.visible_params:
        if p.name in values:
            args.append(values[p.name])
        elif p.name.endswith("pos"):
            args.append(np.full((n, 3), 0.5))
        else:
            args.append(np.full(n if p.name.endswith("_e") else 1, 0.5))
    second(*args, grid=n)
    print("OK", float(d_sigma[0]))
""")


def test_adjoints_never_load_a_ruled_out_neighbor():
    run = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and "OK" in run.stdout, (run.returncode, run.stdout[-2000:], run.stderr[-3000:])
