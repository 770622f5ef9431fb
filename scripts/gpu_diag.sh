#!/usr/bin/env bash
# One device call: the GPU tests, the throughput report, the JIT probe and
# ncu sections of three kernels. Logs go under $OUT; a summary is printed.
set -u
B=${B:-.gpu}
export TILEFUSE_GPU_FUZZ_SECONDS=${FUZZ:-20}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
for t in gpu_kernels gpu_pipelines gpu_runtime; do
  timeout 240 $B/test-$t --include-ignored --test-threads=1 > $OUT/$t.txt 2>&1
  echo "$t rc=$? $(grep -E '^test result' $OUT/$t.txt | tail -1)"
  grep -E "FAILED|panicked" $OUT/$t.txt | head -5
done
timeout 200 $B/example-throughput --reps ${REPS:-50} --json $OUT/tilefuse.json > $OUT/throughput.txt 2>&1
echo "throughput rc=$?"
grep -E "first call queued|phases|copy bandwidth" $OUT/throughput.txt | cut -c1-220
grep -E "^\| |host overhead" $OUT/throughput.txt | cut -d'|' -f2,8,9,10 
if [ -n "${JIT:-}" ]; then timeout 120 python3 benches/jit_probe.py $JIT > $OUT/jit.txt 2>&1; echo "jit rc=$?"; cat $OUT/jit.txt; fi
for p in ${NCU:-}; do
  timeout 90 ncu --clock-control none -k regex:tf_k0 --launch-skip 3 --launch-count 1 --section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis $B/example-throughput --only $p --reps 5 > $OUT/ncu_$p.txt 2>&1
  echo "ncu $p rc=$?"; grep -E "Memory Throughput|DRAM Throughput|Duration|Achieved Occupancy|Registers Per|Compute \(SM\)|Issue Slot|Stall" $OUT/ncu_$p.txt | head -12
done
