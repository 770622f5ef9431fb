#!/usr/bin/env bash
# One device call: each sweep case of $CASES ("18:0 16:53", seed:case)
# timed once per setting of $VARIANTS (";"-separated, each a list of
# VAR=value, "-" for the defaults, "base" for $B/base-sweep, an earlier
# commit's sweep, "bin:NAME" for $B/NAME, both with the defaults), one
# process per case and setting,
# the sweep's table row of each printed (id, % of copy, ms).
set -u
B=${B:-.gpu}
IFS=';' read -ra vs <<< "${VARIANTS:--}"
for c in ${CASES:-}; do
  s=${c%%:*}; k=${c##*:}
  for v in "${vs[@]}"; do
    e=$v; bin=$B/example-sweep
    [ "$v" = "-" ] && e=
    [ "$v" = "base" ] && e= && bin=$B/base-sweep
    case $v in bin:*) e= ; bin=$B/${v#bin:} ;; esac
    row=$(env $e timeout ${CASE_LIMIT:-60} $bin --seed $s --start $k --cases 1 --reps ${SWEEP_REPS:-30} 2>&1 | grep -E "^\| s[0-9]" | cut -d"|" -f2,7,9,10,12)
    printf '%-44s|%s\n' "$v" "$row"
  done
done
