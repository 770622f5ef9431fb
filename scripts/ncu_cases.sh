#!/usr/bin/env bash
# Nsight Compute on chosen sweep cases, tuned kernels only, on the device
# machine: `CASES="1:13:1 1:52:3" bash scripts/ncu_cases.sh > ncu.txt`, each
# entry seed:case:kernels. The first `kernels` launches named tf_k* may be a
# quick tier's, so those are skipped and the next `kernels` profiled.
set -u
B=${B:-.gpu}
for c in $CASES; do
  IFS=: read -r seed case kernels <<< "$c"
  echo "=== seed $seed case $case ($kernels kernels)"
  timeout ${LIMIT:-60} ncu --clock-control none -k regex:'^tf_k' --launch-skip "$kernels" --launch-count "$kernels" \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
    $B/example-sweep --seed "$seed" --start "$case" --cases 1 --reps 1 2>&1 \
    | grep -v -E '^==PROF==|^\s*$|^ *-{5,}' | grep -E '===|tf_k|Throughput|Duration|Occupancy|Registers|Block Size|Grid Size|Waves|Busy|Hit Rate|Bandwidth|Elapsed|Shared Memory|Limit|case|s[0-9]-' | head -120
done
