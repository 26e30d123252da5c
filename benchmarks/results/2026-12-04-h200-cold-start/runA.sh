set -u
pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl > /dev/null 2>&1
export XLA_PYTHON_CLIENT_PREALLOCATE=false
ROOT_OUT=$OUT
export PYTHONPATH=.
mkdir -p $ROOT_OUT/coldcompile $ROOT_OUT/fitsbench $ROOT_OUT/seeds
OUT=$ROOT_OUT/coldcompile timeout 170 bash tmp_probe/gpu_coldcompile.sh > $ROOT_OUT/coldcompile.log 2>&1
echo "coldcompile rc=$?"
tail -45 $ROOT_OUT/coldcompile/summary.txt
for seed in 1 2 3; do
  ADOFFLOAD_CACHE_DIR=$(mktemp -d) CUDA_CACHE_DISABLE=1 timeout 60 python examples/chemistry/lj_clusters.py --device cuda --atoms 38 --until-reached --time-limit 40 --seed $seed --out /tmp/o > $ROOT_OUT/seeds/fire_seed$seed.txt 2>&1
  echo "seed $seed: $(grep -E 'reached the published|clusters x' $ROOT_OUT/seeds/fire_seed$seed.txt | tr '\n' ' ')"
done
OUT=$ROOT_OUT/fitsbench PYTHONPATH=.:/tmp/site timeout 160 bash tmp_probe/gpu_fitsbench.sh > $ROOT_OUT/fitsbench.log 2>&1
echo "fitsbench rc=$?"
tail -40 $ROOT_OUT/fitsbench.log
