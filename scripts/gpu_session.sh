#!/usr/bin/env bash
# One device call: the GPU tests (scripts/gpu_tests.sh), the throughput
# report, and the sweep of each of $SEEDS with $CASES cases
# (default 70) each, then the same cases with $B/base-sweep (an earlier
# commit's sweep, when carried) and beside PyTorch (unless $NO_TORCH), JSON
# and tables under $OUT; if $BEFORE names cases of seed 13 ("6 13 65"),
# those alone first, one process each.
set -u
B=${B:-.gpu}
[ -z "${SKIP_TESTS:-}" ] && scripts/gpu_tests.sh
if [ -z "${SKIP_SUITE:-}" ]; then
  timeout 200 $B/example-throughput --reps ${REPS:-50} --json $OUT/tilefuse.json > $OUT/throughput.txt 2>&1
  echo "throughput rc=$?"; grep -E "copy bandwidth" $OUT/throughput.txt | cut -c1-200
  grep -E "^\| " $OUT/throughput.txt | cut -d'|' -f2,8,9,10
fi
for k in ${BEFORE:-}; do
  timeout 60 $B/example-sweep --seed 13 --start $k --cases 1 2>&1 | grep -E "^\| s13" | cut -d'|' -f2,5,9,10,11
done
# Each seed: the sweep, the base sweep, then PyTorch eager and torch.compile.
for s in ${SEEDS:-}; do
  timeout ${SWEEP_LIMIT:-300} $B/example-sweep --seed $s --cases ${CASES:-70} --reps ${SWEEP_REPS:-50} --json $OUT/s$s.json > $OUT/s$s.txt 2>&1
  echo "sweep $s rc=$?"; tail -4 $OUT/s$s.txt
  if [ -x "$B/base-sweep" ]; then
    timeout ${SWEEP_LIMIT:-300} $B/base-sweep --seed $s --cases ${CASES:-70} --reps ${SWEEP_REPS:-50} --json $OUT/b$s.json > $OUT/b$s.txt 2>&1
    echo "base sweep $s rc=$?"; tail -4 $OUT/b$s.txt
  fi
  [ -n "${NO_TORCH:-}" ] && continue
  PYTHONUNBUFFERED=1 timeout ${TORCH_LIMIT:-280} python3 benches/compare_torch.py --sweep $OUT/s$s.json --json $OUT/t$s.json --reps ${TORCH_REPS:-50} > $OUT/t$s.txt 2>&1
  echo "torch $s rc=$?"; tail -16 $OUT/t$s.txt
done
