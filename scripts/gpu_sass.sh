#!/usr/bin/env bash
# SASS instruction mix of PTX files: ptxas for sm_90, then cuobjdump.
for f in "$@"; do
  ptxas -arch=sm_90 -v "$f" -o /tmp/k.cubin 2>&1 | grep -E "registers|spill" | head -2
  cuobjdump -sass /tmp/k.cubin > $OUT/$(basename $f .ptx).sass
  echo "== $(basename $f): $(grep -cE '^\s+/\*[0-9a-f]{4}\*/' $OUT/$(basename $f .ptx).sass) SASS instructions"
  grep -oE '^\s+/\*[0-9a-f]{4}\*/\s+(@!?U?P[0-9T] )?[A-Z0-9_.]+' $OUT/$(basename $f .ptx).sass | awk '{print $NF}' | sed 's/\..*//' | sort | uniq -c | sort -rn | head -18 | tr '\n' ' '; echo
done
