#!/bin/sh
# Cross-build the static guest agent of `tlblab validate --guest --arch ...`
# (crates/bench/src/bin/tlblab-guest.rs) for riscv64 and/or arm64, with the
# cheap `guest` profile; the linkers come from .cargo/config.toml
# (scripts/install-guest-cross.sh installs them). Output:
# target/<triple>/guest/tlblab-guest, where `tlblab validate` looks for it.
#   usage: build-guest-agent.sh [riscv64|arm64]...   (default: both)
set -eu
cd "$(dirname "$0")/.."
targets=""
for a in ${*:-riscv64 arm64}; do
    case $a in
    riscv64) t=riscv64gc-unknown-linux-gnu ;;
    arm64) t=aarch64-unknown-linux-gnu ;;
    *) echo "unknown architecture $a (riscv64 or arm64)" >&2; exit 2 ;;
    esac
    targets="$targets --target $t"
done
# One cargo for all targets: their builds overlap on the cores.
nice -n 10 cargo build -q -p bench --bin tlblab-guest --profile guest $targets
for t in $targets; do
    [ "$t" = --target ] || echo "${CARGO_TARGET_DIR:-target}/$t/guest/tlblab-guest"
done
