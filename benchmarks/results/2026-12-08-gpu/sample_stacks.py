"""Where a script's wall time goes, thread by thread: run it with a sampler that reads every
thread's Python stack each 10 ms (``sys._current_frames``), then print, per thread, the time spent
under each of the functions that matter here (imports, JAX's start-up and compiles, our kernel
builds, ptxas, launches) and a timeline in 0.5 s steps.

    python sample_stacks.py OUT.txt -- script.py [its arguments]

A sample inside native code (LLVM, ptxas, XLA) is charged to the Python frame that called it,
which is what we want: which of our steps waits. The sampler holds the GIL only to copy frames."""
import collections
import os
import runpy
import sys
import threading
import time

INTERVAL = 0.01
STARTED = time.perf_counter()

# (label, predicate on "file:function") — the first that matches a frame, outermost first, names it
MARKS = [
    ("import", lambda f: f.endswith(":<module>") and "lj_clusters" not in f and "sample_stacks" not in f),
    ("jax backend start-up", lambda f: "xla_bridge" in f and ("backends" in f or "_init_backend" in f)),
    ("ptxas", lambda f: "cubin.py" in f and ("_start" in f or "_run" in f or "wait" in f or "result" in f)),
    ("LLVM to PTX", lambda f: "nvptx.py" in f and ("compile_ptx" in f or "prepare_nvptx" in f)),
    ("LLVM host build", lambda f: "codegen/host" in f),
    ("AD (enzyme/)", lambda f: "adoffload/enzyme/" in f),
    ("kernel generation (optimize/)", lambda f: "adoffload/optimize/generate" in f or "adoffload/optimize/ahead" in f),
    ("frontend", lambda f: "adoffload/frontend/" in f),
    ("XLA compile", lambda f: ("jax/_src/compiler.py" in f and "compile" in f) or f.endswith(":compile_or_get_cached")),
    ("jax trace/lower", lambda f: "jax/_src/interpreters/pxla.py" in f and "lower" in f),
    ("module load", lambda f: "cubin.py" in f and "load" in f),
    ("block_until_ready / host transfer", lambda f: "array.py" in f and ("_value" in f or "block_until_ready" in f or "__float__" in f)),
    ("lattice search", lambda f: "lattice" in f),
    ("basin-hopping loop", lambda f: "lj_clusters.py:main" in f),
]


def frames_of(frame):
    out = []
    while frame is not None:
        out.append(f"{frame.f_code.co_filename}:{frame.f_code.co_name}")
        frame = frame.f_back
    return out[::-1]           # outermost first


def label(stack):
    for mark, test in MARKS:
        for f in stack:
            if test(f):
                return mark
    return "other: " + (stack[-1].rsplit("/", 1)[-1] if stack else "?")


def sample(log, stop):
    names = {}
    while not stop.is_set():
        now = time.perf_counter() - STARTED
        for tid, frame in sys._current_frames().items():
            if tid == threading.get_ident():
                continue
            if tid not in names:
                names[tid] = next((t.name for t in threading.enumerate() if t.ident == tid), str(tid))
            log.append((now, names[tid], label(frames_of(frame))))
        time.sleep(INTERVAL)


def report(log, total, path):
    lines = [f"total {total:.2f} s (process start to script end, {INTERVAL * 1000:.0f} ms samples)"]
    by_thread = collections.defaultdict(collections.Counter)
    for _, thread, mark in log:
        by_thread[thread][mark] += 1
    for thread, counts in by_thread.items():
        lines.append(f"\n[{thread}]")
        for mark, k in counts.most_common(25):
            lines.append(f"  {k * INTERVAL:7.2f} s  {mark}")
    lines.append("\ntimeline (0.5 s steps; each thread's most frequent mark)")
    steps = collections.defaultdict(lambda: collections.defaultdict(collections.Counter))
    for t, thread, mark in log:
        steps[int(t / 0.5)][thread][mark] += 1
    for step in sorted(steps):
        row = "; ".join(f"{th}: {c.most_common(1)[0][0]}" for th, c in steps[step].items())
        lines.append(f"  {step * 0.5:5.1f}s  {row}")
    text = "\n".join(lines)
    with open(path, "w") as f:
        f.write(text + "\n")
    print(text)


def main():
    out, sep, script, *argv = sys.argv[1:]
    assert sep == "--", "usage: sample_stacks.py OUT.txt -- script.py [arguments]"
    log, stop = [], threading.Event()
    sampler = threading.Thread(target=sample, args=(log, stop), daemon=True, name="sampler")
    sampler.start()
    sys.argv = [script, *argv]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))   # as `python script.py` does
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit:
        pass
    finally:
        stop.set()
        sampler.join()
        report(log, time.perf_counter() - STARTED, out)


if __name__ == "__main__":
    main()
