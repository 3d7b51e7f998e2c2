#!/bin/sh
# Issue 19's "nothing else gets slower" figures for two binaries, measured
# in turn in the same session (this machine's load moves absolute times
# between sessions; compare only columns of one run). CPU seconds are
# user+sys of `/usr/bin/time`, RSS its maximum resident set.
# Usage: scripts/perf-compare.sh OLD_TLBLAB NEW_TLBLAB [--big]
#   --big also runs the 10 M-state check (about a minute per binary).
set -u
old=$1; new=$2; big=${3:-}
[ -x "$old" ] && [ -x "$new" ] || { echo "perf-compare: need two executable tlblab binaries" >&2; exit 2; }
command -v /usr/bin/time >/dev/null || { echo "perf-compare: /usr/bin/time not installed (apt-get install time)" >&2; exit 2; }
tmp=$(mktemp); out=$(mktemp -d)
trap 'rm -rf "$tmp" "$out"' EXIT
# one measurement: prints "cpu_s rss_mb" for BIN ARGS...
measure() {
    /usr/bin/time -f '%U %S %M' -o "$tmp" "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; echo "- -"; return; }
    awk '{ printf "%.2f %.0f\n", $1 + $2, $3 / 1024 }' "$tmp"
}
row() {
    label=$1; shift
    a=$(measure "$old" "$@"); b=$(measure "$new" "$@")
    printf '%-46s %8s s %6s MB   %8s s %6s MB\n' "$label" ${a% *} ${a#* } ${b% *} ${b#* }
}
printf '%-46s %19s   %19s\n' "" "old: CPU, max RSS" "new: CPU, max RSS"
row "demo" demo --out "$out"
row "check --all --threads 1" check --all --threads 1
row "check x86_madvise_race_4cpu --symmetry off -t1" check x86_madvise_race_4cpu --symmetry off --threads 1
row "run usemem-fork-exec (128 CPUs)" run usemem-fork-exec
row "run skip-sync-collapse, 1024 CPUs" run skip-sync-collapse --set machine.cpus=1024
if [ "$big" = --big ]; then
    row "check ..._4cpu_3rounds, 10 M states" check x86_madvise_race_4cpu_3rounds --symmetry off --max-states 10000000
fi
