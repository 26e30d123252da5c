#!/bin/bash
# How alternating.jsonl was made (from the nativechain worktree's root): three rounds, each timing in
# turn main (/work/main, its commit recorded) and this branch, one process a line.
out=${1:-tmp_probe/alternating.jsonl}
PY=/work/main/.venv/bin/python
SCRIPT=$PWD/benchmarks/results/2026-12-04-nativechain/alternating.py
mkdir -p tmp_probe
for round in 1 2 3; do
  for variant in main chain; do
    case $variant in
      main) line=$(cd /tmp && PYTHONPATH=/work/main $PY $SCRIPT --rounds 9 2>/dev/null | tail -1);;
      chain) line=$(PYTHONPATH=. $PY $SCRIPT --rounds 9 2>/dev/null | tail -1);;
    esac
    commit=$(git -C $([ $variant = main ] && echo /work/main || echo .) rev-parse --short HEAD)
    echo "{\"variant\": \"$variant\", \"commit\": \"$commit\", \"round\": $round, \"result\": $line}" >> $out
    echo "$variant $round $line"
  done
done
