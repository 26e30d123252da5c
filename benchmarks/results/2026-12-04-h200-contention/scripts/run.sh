set -u
pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl > /dev/null 2>&1
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONPATH=.:/tmp/site
R=$OUT/d; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; lscpu | grep "Model name"; nproc; uptime; git log --oneline -1; } > $R/environment.txt 2>&1
export ADOFFLOAD_CACHE_DIR=/tmp/adocache
C=512 A=64 timeout 120 python tmp_probe/p1/research_trace.py > $R/research_32k.txt 2>&1; echo "rc $?" >> $R/research_32k.txt
C=2048 A=64 timeout 120 python tmp_probe/p1/research_trace.py > $R/research_preset.txt 2>&1; echo "rc $?" >> $R/research_preset.txt
head -80 $R/research_32k.txt
# ncu of the research second-order kernel (after warm-up) and the fits kernel
export ADOFFLOAD_PTXAS_TIERED=0
SEC="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis"
C=512 A=64 timeout 150 ncu --clock-control none --kernel-name regex:vjp --launch-skip 0 --launch-count 3 $SEC python tmp_probe/p1/research_trace.py > $R/ncu_research.txt 2>&1; echo "rc $?" >> $R/ncu_research.txt
N=1000000 REPS=3 timeout 60 python tmp_probe/p1/fits_once.py > $R/fits_1M.txt 2>&1
cat $R/fits_1M.txt
N=100000 REPS=1 timeout 120 ncu --clock-control none --kernel-name regex:least_squares --launch-count 1 $SEC python tmp_probe/p1/fits_once.py > $R/ncu_fits.txt 2>&1; echo "rc $?" >> $R/ncu_fits.txt
for f in $(find /tmp/adocache -name "*.cubin" | head -40); do echo "== $f"; cuobjdump -res-usage $f 2>&1 | grep -E "Function|REG" ; done > $R/res_usage.txt 2>&1
tail -30 $R/res_usage.txt
cd /tmp && tar czf adocache.tgz adocache 2>/dev/null; cp /tmp/adocache.tgz $R/ 2>/dev/null
cd $OUT && tar czf d.tgz d && rm -rf d
