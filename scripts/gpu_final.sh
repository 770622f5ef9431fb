#!/usr/bin/env bash
# The closing device call: GPU tests, the throughput report, PyTorch side by
# side, the quickstart, a second process's first calls (driver JIT cache
# warm), and tuning variants. Full logs in $OUT/logs.tgz.
set -u
FUZZ=${FUZZ:-40} REPS=${REPS:-100} scripts/gpu_diag.sh
timeout 300 python3 benches/compare_torch.py --tilefuse $OUT/tilefuse.json --json $OUT/torch.json --reps 50 > $OUT/torch.txt 2>&1
echo "compare_torch rc=$?"; tail -14 $OUT/torch.txt
timeout 60 .gpu/example-quickstart > $OUT/quickstart.txt 2>&1; echo "quickstart rc=$?"; grep -iE "device|kernel|cuda" $OUT/quickstart.txt | head -4
timeout 120 .gpu/example-throughput --reps 10 --only chain,bias_gelu,softmax,sum > $OUT/warm.txt 2>&1; echo "second process rc=$?"; grep "first call queued" $OUT/warm.txt | cut -c1-120
[ -n "${VARIANTS:-}" ] && scripts/gpu_variants.sh
cd $OUT && tar czf logs.tgz *.txt && rm -f *.txt
