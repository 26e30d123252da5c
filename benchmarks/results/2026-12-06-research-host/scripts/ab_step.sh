#!/bin/bash
# Alternating A/B of the training step: "before" = /tmp/rs_base (git archive of the branch point f39f719),
# "after" = this worktree; each a fresh process with an empty compile cache; timeline.py's median of N steps
# and its per-call means. Usage: ab_step.sh ROUNDS [A]
R=${1:-3}; A=${2:-24}
S=$(cd "$(dirname "$0")" && pwd)
for r in $(seq 1 $R); do
  for side in before after; do
    dir=$([ $side = before ] && echo /tmp/rs_base || echo /work/wt/research)
    echo "== round $r $side A=$A load: $(cut -d' ' -f1-3 /proc/loadavg)"
    (cd $dir && ADOFFLOAD_CACHE_DIR=$(mktemp -d) A=$A PYTHONPATH=. /work/main/.venv/bin/python $S/timeline.py 2>&1 \
      | grep -E "^step ms|^per step")
  done
done
