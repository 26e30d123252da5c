#!/bin/bash
# Alternating before/after runs of the fits benchmark on the host (same machine, back to back).
for i in 1 2; do
  for tree in before after; do
    if [ $tree = before ]; then cd /tmp/lsfast_base; else cd /work/wt/lsfast; fi
    echo "== $tree run $i $(date -u +%H:%M:%S) $(uptime)"
    PYTHONPATH=. timeout 900 /work/main/.venv/bin/python -m benchmarks optimize --cases fits --device cpu --fit-reps 5 --out /tmp/lsfast_ab3/$tree$i 2>&1 | grep -v '^{' 
    echo "   end $(uptime)"
  done
done
