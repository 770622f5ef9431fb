#!/usr/bin/env bash
# compute-sanitizer over the GPU test targets, target by target: TOOL
# (memcheck or racecheck), TARGETS, and SKIP_<target> / FILTER_<target>
# for the tests too slow under the tool. API errors are not counted
# (`--report-api-errors no`): tests provoke some on purpose (invalid PTX,
# out of memory) and check the errors tilefuse returns. A summary line per
# target; logs under $OUT.
set -u
B=${B:-.gpu}
TOOL=${TOOL:-memcheck}
export TILEFUSE_GPU_FUZZ_SECONDS=${FUZZ:-5}
for t in ${TARGETS:-gpu_scalars gpu_half_precision gpu_kernels gpu_runtime gpu_pipelines host_memory_limit tilefuse}; do
  skip_var="SKIP_$t"; filter_var="FILTER_$t"
  skips=""; for s in ${!skip_var:-}; do skips="$skips --skip $s"; done
  timeout ${LIMIT:-150} compute-sanitizer --tool $TOOL --report-api-errors no --error-exitcode 99 $B/test-$t --include-ignored --test-threads=1 ${!filter_var:-} $skips > $OUT/${TOOL}_$t.txt 2>&1
  echo "$TOOL $t rc=$? $(grep -E '^test result' $OUT/${TOOL}_$t.txt | tail -1) | $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/${TOOL}_$t.txt | tail -1)"
  grep -E "FAILED|panicked|Invalid|Hazard" $OUT/${TOOL}_$t.txt | head -3
done
