#!/usr/bin/env bash
# One device call for the toolkit's figures beside PyTorch: cross-entropy of
# [16384, 32768] f32 logits with integer labels, then $CASES (default 40)
# cases of the extra sweep classes (cat + elementwise, scans, sorts and
# topk, scatters) of seed $SEED (default 21), each timed by the sweep and
# then by PyTorch eager and torch.compile; tables and JSON under $OUT.
set -u
B=${B:-.gpu}
timeout ${SWEEP_LIMIT:-120} $B/example-sweep --seed ${SEED:-21} --only index --cases 1 --dims 16384,32768 --dtype f32 \
  --reps ${SWEEP_REPS:-30} --json $OUT/ce.json > $OUT/ce.txt 2>&1
echo "cross-entropy rc=$?"; grep -E "^\| s" $OUT/ce.txt | cut -d'|' -f2,5,7,9,10,12
timeout ${SWEEP_LIMIT:-240} $B/example-sweep --seed ${SEED:-21} --only join,scan,order,scatter --cases ${CASES:-40} \
  --reps ${SWEEP_REPS:-30} --json $OUT/extra.json > $OUT/extra.txt 2>&1
echo "extras rc=$?"; tail -4 $OUT/extra.txt
[ -n "${NO_TORCH:-}" ] && exit 0
for f in ce extra; do
  PYTHONUNBUFFERED=1 timeout ${TORCH_LIMIT:-200} python3 benches/compare_torch.py --sweep $OUT/$f.json \
    --json $OUT/t_$f.json --reps ${TORCH_REPS:-50} > $OUT/t_$f.txt 2>&1
  echo "torch $f rc=$?"; tail -14 $OUT/t_$f.txt
done
