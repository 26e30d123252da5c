#!/usr/bin/env bash
# Alternating before/after runs of the research example and of phases.py, each in a fresh process
# with an empty ADOFFLOAD_CACHE_DIR, the load average before and after every run.
#   BEFORE=/tmp/base AFTER=$PWD ROUNDS=3 PY=.venv/bin/python bash ab.sh > out.txt
set -u
BEFORE=${BEFORE:-/tmp/base}; AFTER=${AFTER:-$PWD}; ROUNDS=${ROUNDS:-3}; PY=${PY:-.venv/bin/python}; PY=$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")     # absolute, the venv link kept
PHASES=$(realpath "$(dirname "$0")/phases.py")
for round in $(seq 1 "$ROUNDS"); do
  for side in before after; do
    tree=$BEFORE; [ "$side" = after ] && tree=$AFTER
    echo "=== round $round $side ($tree) example  load $(cut -d' ' -f1-3 /proc/loadavg)"
    (cd "$tree" && ADOFFLOAD_CACHE_DIR=$(mktemp -d) PYTHONPATH=. MPLBACKEND=Agg "$PY" examples/research/learned_pair_potential.py --out /tmp/lpp_out 2>&1 \
      | grep -E "first step|adoffload kernel |plain JAX |loss .* ->|relative difference")
    echo "    load after $(cut -d' ' -f1-3 /proc/loadavg)"
  done
  for side in before after; do
    tree=$BEFORE; [ "$side" = after ] && tree=$AFTER
    echo "=== round $round $side ($tree) phases (plain JAX first)  load $(cut -d' ' -f1-3 /proc/loadavg)"
    (cd "$tree" && ADOFFLOAD_CACHE_DIR=$(mktemp -d) PYTHONPATH=. "$PY" "$PHASES" 2>&1)
    echo "    load after $(cut -d' ' -f1-3 /proc/loadavg)"
  done
done
