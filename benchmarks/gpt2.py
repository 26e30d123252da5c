"""llm.c-style GPT-2 (benchmarks/kernels/gpt2.c): its forward + loss reversed by ``ez.autodiff``
against its hand-written forward + backward (issue 31's last row).

Both sides come from the same C file and the same clang (the ziglang wheel's) at -O2:

* ours: the C compiled to LLVM IR, loaded with ``ado.from_llvm``, and ``gpt2_forward`` reversed
  by ``ez.autodiff(ez.Reverse, ...)`` with the parameters and the activation block ``Duplicated``
  (the gradient of the mean loss wrt every parameter). One timed call zeroes both shadows, as a
  training step must, and makes the whole ``autodiff`` call: argument checks, the pass that sizes
  the tape, the augmented forward and the reverse sweep (all JIT-compiled for this CPU by our
  host path, LLVM O2);
* hand-written: the same C compiled natively (clang -O2, a shared library called through ctypes):
  ``gpt2_forward``, then the gradients and the activation gradients zeroed (numpy, as for ours),
  then ``gpt2_backward``.

Both are timed in one process by benchmarks/timing.py (batch 1); the gradient of ours is checked
against the hand backward's (max |ours - hand| / max |hand|, float). Also printed: the forward
alone on each side, the tape-sizing pass alone and the tape's size. Host only.

Run: ``PYTHONPATH=. python -m benchmarks.gpt2 [--reps N] [--small]``; the ``user_kernels`` suite
prints the same rows.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import tempfile
from pathlib import Path

import numpy as np

from .timing import time_calls

SOURCE = Path(__file__).with_name("kernels") / "gpt2.c"
# vocabulary 200, context 64, width 64, 2 layers of 4 heads: 116,992 parameters; batch 4 x 64 tokens
CONFIG = {"B": 4, "T": 64, "V": 200, "maxT": 64, "C": 64, "L": 2, "NH": 4}
SMALL = {"B": 2, "T": 5, "V": 11, "maxT": 6, "C": 8, "L": 2, "NH": 2}     # the tests' size
OPT = 2
ORDER = ("B", "T", "V", "maxT", "C", "L", "NH")
OURS = "ours: ez.autodiff reverse of gpt2_forward (tape sizing included)"
HAND = "hand-written gpt2_forward + gpt2_backward (clang -O2, ctypes)"


def clang_available() -> bool:
    from adoffload.testing.clang import clang_available as available
    return available()


class GPT2:
    """Both sides of one configuration: the native library, the reversible IR function, parameters
    (GPT-2's initialisation scale: N(0, 0.02), layernorm weights 1), tokens and targets."""

    def __init__(self, config: dict | None = None, seed: int = 0):
        import adoffload as ado
        from adoffload.testing import clang
        self.config = dict(config or CONFIG)
        self.cfg = tuple(self.config[k] for k in ORDER)
        source = SOURCE.read_text()
        self._folder = tempfile.TemporaryDirectory(prefix="adoffload-gpt2-")
        lib = self.lib = clang.compile_native(source, OPT, Path(self._folder.name))
        lib.gpt2_num_parameters.restype = lib.gpt2_num_activations.restype = ctypes.c_size_t
        lib.gpt2_forward.restype = ctypes.c_float
        B, T, V, maxT, C, L, NH = self.cfg
        self.n_params = int(lib.gpt2_num_parameters(V, maxT, C, L))
        self.n_acts = int(lib.gpt2_num_activations(B, T, V, C, L, NH))
        self.fn = ado.from_llvm(clang.compile_c(source, OPT))["gpt2_forward"]
        rng = np.random.default_rng(seed)
        self.params = (0.02 * rng.standard_normal(self.n_params)).astype(np.float32)
        for name in ("ln1w", "ln2w", "lnfw"):
            start, size = self.tensor(name)
            self.params[start:start + size] = 1.0
        self.inputs = rng.integers(0, V, B * T).astype(np.int32)
        self.targets = rng.integers(0, V, B * T).astype(np.int32)
        self.acts = np.zeros(self.n_acts, np.float32)
        self.grads = np.zeros(self.n_params, np.float32)
        self.grads_acts = np.zeros(self.n_acts, np.float32)
        self.our_acts = np.zeros(self.n_acts, np.float32)
        self.our_grads = np.zeros(self.n_params, np.float32)
        self.d_acts = np.zeros(self.n_acts, np.float32)

    def tensor(self, name: str) -> tuple[int, int]:
        """(offset, size) of a parameter tensor in the parameter block (gpt2.c's Params order)."""
        B, T, V, maxT, C, L, NH = self.cfg
        sizes = [("wte", V * C), ("wpe", maxT * C), ("ln1w", L * C), ("ln1b", L * C), ("qkvw", L * 3 * C * C),
                 ("qkvb", L * 3 * C), ("attprojw", L * C * C), ("attprojb", L * C), ("ln2w", L * C),
                 ("ln2b", L * C), ("fcw", L * 4 * C * C), ("fcb", L * 4 * C), ("fcprojw", L * 4 * C * C),
                 ("fcprojb", L * C), ("lnfw", C), ("lnfb", C)]
        offset = 0
        for key, size in sizes:
            if key == name:
                return offset, size
            offset += size
        raise KeyError(name)

    @staticmethod
    def _p(array: np.ndarray):
        return array.ctypes.data_as(ctypes.c_void_p)

    def loss(self, params: np.ndarray | None = None) -> float:
        """The native forward's mean loss at ``params`` (default: the model's)."""
        params = self.params if params is None else np.ascontiguousarray(params, np.float32)
        return float(self.lib.gpt2_forward(self._p(params), self._p(self.acts), self._p(self.inputs),
                                           self._p(self.targets), *self.cfg))

    def hand_step(self) -> None:
        """llm.c's training step without the update: forward, zero the gradients, backward."""
        p = self._p
        self.lib.gpt2_forward(p(self.params), p(self.acts), p(self.inputs), p(self.targets), *self.cfg)
        self.grads.fill(0.0)
        self.grads_acts.fill(0.0)
        self.lib.gpt2_backward(p(self.params), p(self.grads), p(self.acts), p(self.grads_acts), p(self.inputs),
                               p(self.targets), *self.cfg)

    def our_step(self) -> None:
        """The same gradient from ``ez.autodiff``: zero the shadows, reverse the forward."""
        from adoffload import enzyme as ez
        self.our_grads.fill(0.0)
        self.d_acts.fill(0.0)
        ez.autodiff(ez.Reverse, self.fn, ez.Duplicated(self.params, self.our_grads),
                    ez.Duplicated(self.our_acts, self.d_acts), ez.Const(self.inputs), ez.Const(self.targets),
                    *self.cfg)

    def hand_forward(self) -> None:
        self.loss()

    def our_forward(self) -> None:
        """The same IR through our host path without AD (the primal the reverse runs first)."""
        self.fn(self.params, self.our_acts, self.inputs, self.targets, *self.cfg)

    def gradient_error(self) -> float:
        """max |ours - hand| / max |hand| after one step of each."""
        self.hand_step()
        self.our_step()
        return float(np.abs(self.our_grads - self.grads).max() / np.abs(self.grads).max())

    def tape(self):
        """(the counting function, the tape's bytes) of the derivative ``our_step`` built, or None."""
        from adoffload.enzyme import api
        entries = [v for k, v in api._CACHE.items() if k[1] == "gpt2_forward" and k[0] == id(self.fn.module.ir)]
        if not entries or entries[-1][2] is None:
            return None
        count = entries[-1][2]
        nbytes = np.zeros(1, np.int64)
        args = [self.params, self.our_acts, self.inputs, self.targets, *self.cfg]
        count(*args, nbytes)
        return (lambda: count(*args, nbytes)), int(nbytes[0])


def measure(config: dict | None = None, reps: int = 10) -> list[dict]:
    """The rows: ours and hand-written (ratio ``vs_hand``), then the forwards and the sizing pass."""
    model = GPT2(config)
    error = model.gradient_error()              # also the first call of each side (compiles ours)
    size = {"size": model.n_params, "size_unit": "parameters",
            "config": ", ".join(f"{k}={v}" for k, v in model.config.items())}
    wait = lambda _: None
    timings = {OURS: time_calls(model.our_step, wait, reps=reps, batch=1, warmup=2),
               HAND: time_calls(model.hand_step, wait, reps=reps, batch=1, warmup=2)}
    rows = []
    for side, timing in timings.items():
        rows.append({"measure": MEASURE, "side": side, **size, **timing.fields(), "batch": 1,
                     "vs_hand": timing.median_ms / timings[HAND].median_ms, "grad_rel_err": error})
    parts = [("forward only: ours (our host path, the same IR, no AD)", model.our_forward),
             ("forward only: hand-written (native)", model.hand_forward)]
    tape = model.tape()
    if tape is not None:
        parts.append((f"ours: the tape-sizing pass alone ({tape[1]} tape bytes)", tape[0]))
    for side, call in parts:
        timing = time_calls(call, wait, reps=reps, batch=1, warmup=2)
        rows.append({"measure": MEASURE + ", parts", "side": side, **size, **timing.fields(), "batch": 1,
                     "vs_hand": timing.median_ms / timings[HAND].median_ms})
    return rows


MEASURE = "llm.c-style GPT-2 (benchmarks/kernels/gpt2.c, clang -O2): gradient of the loss"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--small", action="store_true", help="the tests' tiny configuration")
    args = parser.parse_args(argv)
    if not clang_available():
        print("skipped: needs clang from the ziglang wheel (pip install ziglang)")
        return
    print(f"load average {os.getloadavg()}, {os.cpu_count()} cores")
    rows = measure(SMALL if args.small else CONFIG, args.reps)
    print(f"config: {rows[0]['config']}; {rows[0]['size']} parameters; "
          f"max |ours - hand| / max |hand| = {rows[0]['grad_rel_err']:.2e}")
    print("| side | median ms | IQR ms | min ms | max ms | / hand-written |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['side']} | {r['median_ms']:.2f} | {r['iqr_ms']:.2f} | {r['min_ms']:.2f} | {r['max_ms']:.2f} | "
              f"{r['vs_hand']:.2f}x |", flush=True)
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
