export PYTHONPATH=.
S="--section SpeedOfLight --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats"
timeout 120 ncu --kernel-name regex:least_squares --launch-count 1 $S python tmp_probe/ncu_target.py fits > $OUT/ncu_fits.txt 2>&1; echo ncu fits rc=$?
timeout 120 ncu --kernel-name regex:minimize --launch-count 1 $S python tmp_probe/ncu_target.py fire > $OUT/ncu_fire.txt 2>&1; echo ncu fire rc=$?
for spec in "fire 16384 0" "lbfgs 16384 0" "fire 16384 1" "lbfgs 16384 1" "fire 32768 0"; do
  set -- $spec
  export ADOFFLOAD_CACHE_DIR=$(mktemp -d)
  echo "== $spec"
  timeout 60 python examples/chemistry/lj_clusters.py --device cuda --atoms 38 --minimizer $1 --clusters $2 --seed $3 --until-reached --time-limit 30 --out /tmp/ljout 2>&1 | grep -v -i "warn\|basin hopping" | tail -9
done > $OUT/lj_walkers.txt 2>&1
cat $OUT/lj_walkers.txt
grep -E "Duration|Registers|Achieved Occupancy|Theoretical Occupancy|Local|Memory Throughput|Compute \(SM\)|Block Size|Grid Size|Stall|Eligible|Issued" $OUT/ncu_fits.txt $OUT/ncu_fire.txt | head -60
