export PYTHONPATH=.
for c in "32 -" "32 1024" "32 512" "64 512" "128 512" "128 1024"; do
  set -- $c
  export ADOFFLOAD_CACHE_DIR=$(mktemp -d)
  if [ "$2" = "-" ]; then unset ADOFFLOAD_EXP_RESIDENT; else export ADOFFLOAD_EXP_RESIDENT=$2; fi
  export ADOFFLOAD_EXP_BLOCK=$1
  timeout 80 python tmp_probe/occ.py 2>&1 | grep '^{' 
done
