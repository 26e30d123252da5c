#!/bin/bash
# interleaved before (main at /tmp/rs_main) / after per-custom-call times (jax.profiler trace, 50 steps)
for rep in 1 2 3; do
  for side in before after; do
    root=$([ $side = before ] && echo /tmp/rs_main || echo /work/wt/research)
    echo "rep $rep $side load [$(cut -d' ' -f1-3 /proc/loadavg)]"
    (cd $root && PYTHONPATH=.:/tmp/site /work/main/.venv/bin/python /work/wt/research/tmp_probe/trace.py 2>&1 | grep "custom calls")
  done
done
