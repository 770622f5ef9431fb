#!/usr/bin/env bash
# One device call: the sweep cases $CASES ("14:2 15:17", seed:case) each
# timed once with $ENV_A and once with $ENV_B set (e.g.
# ENV_A="TILEFUSE_GPU_RUNS=0" ENV_B="TILEFUSE_GPU_RUNS=1"), one process
# per case and setting, the sweep's table row of each printed.
set -u
B=${B:-.gpu}
for c in ${CASES:-}; do
  s=${c%%:*}; k=${c##*:}
  for e in "${ENV_A:-}" "${ENV_B:-}"; do
    row=$(env $e timeout ${CASE_LIMIT:-60} $B/example-sweep --seed $s --start $k --cases 1 --reps ${SWEEP_REPS:-30} 2>&1 | grep -E "^\| s[0-9]" | cut -d"|" -f2,7,9,10,12)
    echo "$e |$row"
  done
done
