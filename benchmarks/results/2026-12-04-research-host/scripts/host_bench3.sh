#!/bin/bash
# interleaved before (main, /tmp/rs_main) / after (this branch): the example's host preset (3 reps) and
# 64 clusters x 64 atoms, 100 steps (2 reps); each run a fresh process with an empty compile cache
run() {  # side, options...
  local side=$1; shift
  local root=$([ $side = before ] && echo /tmp/rs_main || echo /work/wt/research)
  local cache=$(mktemp -d)
  echo "$side $* load [$(cut -d' ' -f1-3 /proc/loadavg)]"
  (cd $root && ADOFFLOAD_CACHE_DIR=$cache PYTHONPATH=.:/tmp/site /work/main/.venv/bin/python examples/research/learned_pair_potential.py --out /tmp/rs_out_$side "$@" 2>&1) \
    | grep -E "^(adoffload kernel|plain JAX) |plain JAX step"
  rm -rf $cache
}
for rep in 1 2 3; do run before; run after; done
for rep in 1 2; do run before --atoms 64 --steps 100; run after --atoms 64 --steps 100; done
