#!/bin/sh
# CPU seconds (user+sys of /usr/bin/time) of `tlblab run ARGS...` for two or
# more binaries, run in turn ROUNDS times (default 7), so that this shared
# machine's load drifts over all of them alike; prints each binary's minimum
# and median and the minimum's ratio to the first binary's. Differences
# under ~2% are within the noise here.
# Usage: scripts/ab-time.sh BIN1,BIN2[,...] SCENARIO [--set ...]
set -u
[ $# -ge 2 ] || { echo "usage: scripts/ab-time.sh BIN1,BIN2[,...] SCENARIO [ARGS...]" >&2; exit 2; }
command -v /usr/bin/time >/dev/null || { echo "ab-time: /usr/bin/time not installed (apt-get install time)" >&2; exit 2; }
bins=$(echo "$1" | tr ',' ' '); shift
rounds=${ROUNDS:-7}
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
for b in $bins; do
    [ -x "$b" ] || { echo "ab-time: $b is not an executable" >&2; exit 2; }
done
r=0
while [ $r -lt "$rounds" ]; do
    i=0
    for b in $bins; do
        /usr/bin/time -f '%U %S' -o "$out/t" "$b" run "$@" >/dev/null 2>&1 || { echo "ab-time: $b run $* failed" >&2; exit 1; }
        awk '{ printf "%.3f\n", $1 + $2 }' "$out/t" >> "$out/$i"
        i=$((i + 1))
    done
    r=$((r + 1))
done
i=0; base=
for b in $bins; do
    min=$(sort -n "$out/$i" | head -1)
    med=$(sort -n "$out/$i" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
    [ -n "$base" ] || base=$min
    printf '%-40s min %s s  median %s s  min/first %s\n' "$b" "$min" "$med" "$(awk -v a="$min" -v b="$base" 'BEGIN { printf "%.3f", a / b }')"
    i=$((i + 1))
done
