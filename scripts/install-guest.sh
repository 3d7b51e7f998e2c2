#!/bin/sh
# Install what `tlblab validate --guest` needs: QEMU and a Debian kernel
# (bookworm's linux-image-amd64, 6.1: MADV_COLLAPSE, KVM paravirt flush).
# Idempotent; run as root. Prints the kernel it will use.
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
ls /boot/vmlinuz-* | tail -n 1
