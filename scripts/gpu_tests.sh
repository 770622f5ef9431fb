#!/usr/bin/env bash
# One device call: every test target with GPU tests, with --include-ignored,
# target by target; a summary line per target, full logs under $OUT.
set -u
B=${B:-.gpu}
export TILEFUSE_GPU_FUZZ_SECONDS=${FUZZ:-30}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in ${TARGETS:-tilefuse gpu_kernels gpu_pipelines gpu_runtime gpu_scalars gpu_half_precision host_memory_limit}; do
  timeout ${LIMIT:-240} $B/test-$t --include-ignored --test-threads=${THREADS:-1} > $OUT/$t.txt 2>&1
  echo "$t rc=$? $(grep -E '^test result' $OUT/$t.txt | tail -1)"
  grep -E "FAILED|panicked" $OUT/$t.txt | head -5
done
