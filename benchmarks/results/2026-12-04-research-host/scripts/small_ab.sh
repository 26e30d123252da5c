#!/bin/bash
# interleaved: the branch without (/tmp/rs_prev, HEAD~1) and with the serial build, at a grid too small
# to split (C configs x A atoms < 512 threads); median and min of 200 steps, 2 rounds per process
for rep in 1 2 3; do
  for side in prev serial; do
    root=$([ $side = prev ] && echo /tmp/rs_prev || echo /work/wt/research)
    echo "rep $rep $side C=${C:-16} A=${A:-24} load [$(cut -d' ' -f1-3 /proc/loadavg)]"
    (cd $root && C=${C:-16} A=${A:-24} R=2 PYTHONPATH=.:/tmp/site /work/main/.venv/bin/python /work/wt/research/tmp_probe/prof.py 2>&1 | grep "step ms")
  done
done
