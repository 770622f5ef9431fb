#!/usr/bin/env bash
# Alternating processes of throughput variants (and torch.compile), for A/B
# comparisons that outlast the process-to-process spread. Each line of
# $VARIANTS is "name ENV=VALUE ..."; every round runs each variant once
# (plus torch.compile when TORCH=1), so the variants interleave. Prints one
# line per process: the pipelines' times in µs and the run's copy bandwidth.
set -u
B=${B:-.gpu}
ONLY=${ONLY:-softmax,rmsnorm,layernorm}
for round in $(seq ${ROUNDS:-2}); do
  while read -r name envs; do
    [ -z "$name" ] && continue
    if ! env $envs timeout 200 $B/example-throughput --reps ${REPS:-50} --only $ONLY --json $OUT/ab_${name}_$round.json > $OUT/ab_${name}_$round.txt 2>&1; then
      echo "$name: the throughput report failed (rc $?); last lines:"; tail -3 $OUT/ab_${name}_$round.txt; continue
    fi
    python3 - "$OUT/ab_${name}_$round.json" "$name" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]:>16} copy {d['copy_gbps']:.0f} " + " ".join(f"{p['pipeline']} {p['time_ms']*1e3:.1f}" for p in d['pipelines']))
PY
  done <<< "$VARIANTS"
  if [ -n "${TORCH:-}" ]; then
    if ! timeout 300 python3 benches/compare_torch.py --only ${ONLY//,/ } --reps ${REPS:-50} --json $OUT/ab_torch_$round.json > $OUT/ab_torch_$round.txt 2>&1; then
      echo "torch.compile: compare_torch.py failed; last lines:"; tail -3 $OUT/ab_torch_$round.txt; continue
    fi
    python3 - "$OUT/ab_torch_$round.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"{'torch.compile':>16} copy {d['copy_gbps']:.0f} " + " ".join(f"{p['pipeline']} {p['compile_ms']*1e3:.1f}" for p in d['pipelines']))
PY
  fi
done
