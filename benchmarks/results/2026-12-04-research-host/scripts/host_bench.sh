#!/bin/bash
# interleaved before (main) / after (this branch) runs of the example's default host preset, cold compile cache
cd /work/wt/research
for rep in 1 2 3; do
  for side in before after; do
    root=$([ $side = before ] && echo /tmp/rs_main || echo /work/wt/research)
    cache=$(mktemp -d)
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    out=$(cd $root && ADOFFLOAD_CACHE_DIR=$cache PYTHONPATH=.:/tmp/site /work/main/.venv/bin/python examples/research/learned_pair_potential.py --out /tmp/rs_out_$side 2>&1)
    echo "rep $rep $side load [$load]"
    echo "$out" | grep -E "^(adoffload kernel|plain JAX) |plain JAX step|^loss"
    rm -rf $cache
  done
done
