#!/bin/sh
# Byte-identity check for speed work: `save DIR` records `tlblab run S --json`
# for every bundled scenario and `tlblab check --all`; `compare DIR` reruns
# them and diffs (the check table without its timing columns) against the saved copies (exit 1 on any difference).
# Usage: scripts/same-output.sh save|compare DIR [TLBLAB]
set -u
mode=$1; dir=$2; bin=${3:-target/release/tlblab}
mkdir -p "$dir"
out=$dir; [ "$mode" = compare ] && out=$(mktemp -d)
for f in scenarios/*.toml; do
    name=$(basename "$f" .toml)
    "$bin" run "$f" --json >"$out/run-$name.json" 2>/dev/null
    echo "$?" >"$out/run-$name.rc"
done
# the table's seconds and states/s columns are wall-clock: blanked
"$bin" check --all >"$out/check-all.raw" 2>/dev/null
echo "$?" >"$out/check-all.rc"
awk '$2 ~ /^(safe|unsafe|expected)$/ { $7 = "-"; $8 = "-" } { print }' "$out/check-all.raw" >"$out/check-all.txt"
rm "$out/check-all.raw"
"$bin" check x86_madvise_race_4cpu --symmetry off 2>/dev/null | sed 's/, [0-9.]* s, [0-9]* states\/s//' >"$out/check-4cpu-nosym.txt"
[ "$mode" = save ] && exit 0
status=0
for f in "$dir"/*; do
    b=$(basename "$f")
    if ! cmp -s "$f" "$out/$b"; then echo "DIFFERS: $b"; status=1; fi
done
[ $status = 0 ] && echo "identical: $(ls "$dir" | wc -l) files"
rm -rf "$out"
exit $status
