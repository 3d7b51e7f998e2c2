#!/bin/sh
# Install what `tlblab validate --guest` needs: QEMU and a Debian kernel
# (bookworm's linux-image-amd64, 6.1: MADV_COLLAPSE, KVM paravirt flush),
# then what the riscv64 and arm64 guests need (scripts/install-guest-cross.sh).
# Idempotent; run as root. Prints the x86 kernel it will use.
set -eu
need=""
command -v qemu-system-x86_64 >/dev/null 2>&1 || need="$need qemu-system-x86"
ls /boot/vmlinuz-* >/dev/null 2>&1 || need="$need linux-image-amd64"
if [ -n "$need" ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # The kernel's postinst would build an initramfs for this machine; the guest
    # uses its own, so initramfs-tools is not pulled in.
    apt-get install -y -qq --no-install-recommends $need >/dev/null
fi
# The riscv64 and arm64 guests (`validate --guest --arch ...`): their own
# script; the x86 guest does not depend on it.
"$(dirname "$0")/install-guest-cross.sh" >&2 \
    || echo "note: the riscv64/arm64 guest packages did not install" >&2
ls /boot/vmlinuz-* | tail -n 1
