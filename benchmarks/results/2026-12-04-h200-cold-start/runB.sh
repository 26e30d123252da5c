set -u
export PYTHONPATH=. XLA_PYTHON_CLIENT_PREALLOCATE=false CUDA_CACHE_DISABLE=1
mkdir -p $OUT/r
for lvl in 3 2 1; do
  ADOFFLOAD_PTXAS_OPT=$lvl ADOFFLOAD_CACHE_DIR=$(mktemp -d) timeout 60 python tmp_probe/ptxas_levels.py 2>&1 | grep '^{' | tee -a $OUT/r/ptxas_levels.jsonl
done
for spec in "fire 0" "fire 1" "fire 2" "fire 3" "lbfgs 0"; do
  set -- $spec
  ADOFFLOAD_CACHE_DIR=$(mktemp -d) timeout 60 python examples/chemistry/lj_clusters.py --device cuda --atoms 38 --until-reached --time-limit 40 --minimizer $1 --seed $2 --out /tmp/o > $OUT/r/lj38_$1_seed$2.txt 2>&1
  echo "$spec: $(grep -E 'reached the published' $OUT/r/lj38_$1_seed$2.txt)"
done
cd $OUT && tar czf r.tgz r && rm -rf r
