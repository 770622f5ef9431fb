#!/usr/bin/env bash
# Throughput variants in one device call: each line of $VARIANTS is
# "name ENV=VALUE ...", run as the throughput report with those variables.
# The driver's JIT cache is off, so every variant's first calls JIT anew.
set -u
export CUDA_CACHE_DISABLE=1
B=${B:-.gpu}
while read -r name envs; do
  [ -z "$name" ] && continue
  env $envs timeout 200 $B/example-throughput --reps ${REPS:-30} ${ONLY:+--only $ONLY} > $OUT/var_$name.txt 2>&1
  echo "== $name ($envs) rc=$?"
  grep -E "^\| [a-z]" $OUT/var_$name.txt | cut -d'|' -f2,8,10,11,12 | tr '\n' ';'; echo
  grep -E "host overhead|phases" $OUT/var_$name.txt
done <<< "$VARIANTS"
