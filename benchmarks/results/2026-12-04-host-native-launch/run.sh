#!/bin/bash
# How launch_timing.jsonl was made (from the hostlaunch worktree's root): three rounds, each timing in
# turn main's package (/work/main at the commit recorded; this branch's launch_timing.py copied and run
# as a script, so main is timed with the jvp entry too), this branch, and this branch with
# ADOFFLOAD_NATIVE_LAUNCH=0. One process per line.
out=${1:-tmp_probe/bench.jsonl}
PY=/work/main/.venv/bin/python
mkdir -p tmp_probe && cp adoffload/testing/launch_timing.py tmp_probe/launch_timing_main.py
for round in 1 2 3; do
  for variant in main native off; do
    case $variant in
      main) line=$(cd /tmp && PYTHONPATH=/work/main $PY /work/wt/hostlaunch/tmp_probe/launch_timing_main.py --device cpu --rounds 9 2>/dev/null | tail -1);;
      native) line=$(PYTHONPATH=. $PY -m adoffload.testing.launch_timing --device cpu --rounds 9 2>/dev/null | tail -1);;
      off) line=$(ADOFFLOAD_NATIVE_LAUNCH=0 PYTHONPATH=. $PY -m adoffload.testing.launch_timing --device cpu --rounds 9 2>/dev/null | tail -1);;
    esac
    commit=$(git -C $([ $variant = main ] && echo /work/main || echo .) rev-parse --short HEAD)
    echo "{\"variant\": \"$variant\", \"commit\": \"$commit\", \"round\": $round, \"result\": $line}" >> $out
    echo "$variant $round $(echo $line | cut -c1-200)"
  done
done
