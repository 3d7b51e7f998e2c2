#!/bin/sh
# Install what `tlblab validate --guest --arch riscv64|arm64` needs: QEMU for
# the architecture, a gcc cross linker with a static glibc, the Rust target,
# device-tree-compiler (the RISC-V AIA device-tree workaround) and Debian's
# 6.12 kernel of the architecture, downloaded and unpacked into the cache
# directory, not installed:
#   arm64:   bookworm's linux-image-6.12.*+deb12-arm64 (foreign architecture)
#   riscv64: trixie's linux-image-6.12.*+deb13-riscv64 (bookworm has no
#            riscv64 port: a temporary sources entry limited to riscv64)
# The foreign architecture and the temporary sources entry are removed again.
# Idempotent, and quick when everything is there; run as root.
#   usage: install-guest-cross.sh [riscv64|arm64]...   (default: both)
# Prints, per architecture, the kernel it will use.
set -eu
cache=${TLBLAB_GUEST_CACHE:-/var/cache/tlblab-guest}
archs=${*:-riscv64 arm64}
export DEBIAN_FRONTEND=noninteractive
updated=""
apt_update() {
    [ -n "$updated" ] || { apt-get update -qq; updated=1; }
}

need=""
command -v dtc >/dev/null 2>&1 || need="$need device-tree-compiler"
for a in $archs; do
    case $a in
    riscv64)
        command -v qemu-system-riscv64 >/dev/null 2>&1 || need="$need qemu-system-misc"
        command -v riscv64-linux-gnu-gcc >/dev/null 2>&1 || need="$need gcc-riscv64-linux-gnu"
        [ -e /usr/riscv64-linux-gnu/lib/libc.a ] || need="$need libc6-dev-riscv64-cross"
        ;;
    arm64)
        command -v qemu-system-aarch64 >/dev/null 2>&1 || need="$need qemu-system-arm"
        command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || need="$need gcc-aarch64-linux-gnu"
        [ -e /usr/aarch64-linux-gnu/lib/libc.a ] || need="$need libc6-dev-arm64-cross"
        ;;
    *)
        echo "unknown architecture $a (riscv64 or arm64)" >&2
        exit 2
        ;;
    esac
done
if [ -n "$need" ]; then
    apt_update
    apt-get install -y -qq --no-install-recommends $need >/dev/null
fi

# Rust targets (rustup of whoever runs the build; skipped without rustup).
if command -v rustup >/dev/null 2>&1; then
    installed=$(rustup target list --installed)
    for a in $archs; do
        t=$([ "$a" = riscv64 ] && echo riscv64gc-unknown-linux-gnu || echo aarch64-unknown-linux-gnu)
        echo "$installed" | grep -qx "$t" || rustup target add "$t" >/dev/null 2>&1
    done
fi

# Download the newest 6.12 kernel package of the (foreign) architecture
# $1 from the suite(s) apt knows and unpack its /boot into $cache/$1.
fetch_kernel() {
    a=$1 flavour=$2
    dir="$cache/$a"
    if ls "$dir"/boot/vmlinu* >/dev/null 2>&1; then
        return
    fi
    pkg=$(apt-cache search --names-only "^linux-image-6\.12\.[0-9]*\+deb[0-9]*-$flavour\$" 2>/dev/null |
        awk '{print $1}' | sort -V | tail -n 1)
    if [ -z "$pkg" ]; then
        echo "no 6.12 $a kernel package found" >&2
        return 1
    fi
    mkdir -p "$dir"
    tmp=$(mktemp -d)
    chmod 755 "$tmp" # apt's download user writes there
    (cd "$tmp" && apt-get download -qq "$pkg:$a" >/dev/null)
    dpkg-deb --fsys-tarfile "$tmp"/*.deb | tar -x -C "$dir" ./boot
    echo "$pkg" >"$dir/package"
    rm -rf "$tmp"
}

for a in $archs; do
    [ "$a" = arm64 ] || continue
    ls "$cache/arm64"/boot/vmlinu* >/dev/null 2>&1 && continue
    added=""
    dpkg --print-foreign-architectures | grep -qx arm64 || { dpkg --add-architecture arm64; added=1; }
    apt-get update -qq
    fetch_kernel arm64 arm64 || status=$?
    [ -z "$added" ] || dpkg --remove-architecture arm64
    [ -z "${status:-}" ] || exit "$status"
done

for a in $archs; do
    [ "$a" = riscv64 ] || continue
    ls "$cache/riscv64"/boot/vmlinu* >/dev/null 2>&1 && continue
    src=/etc/apt/sources.list.d/tlblab-trixie-riscv64.sources
    uri=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
    cat >"$src" <<EOF
Types: deb
URIs: ${uri:-http://deb.debian.org/debian}
Suites: trixie
Components: main
Architectures: riscv64
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    added=""
    dpkg --print-foreign-architectures | grep -qx riscv64 || { dpkg --add-architecture riscv64; added=1; }
    apt-get update -qq
    fetch_kernel riscv64 riscv64 || status=$?
    rm -f "$src"
    [ -z "$added" ] || dpkg --remove-architecture riscv64
    # Drop trixie's riscv64 lists again.
    apt-get update -qq
    [ -z "${status:-}" ] || exit "$status"
done

for a in $archs; do
    ls "$cache/$a"/boot/vmlinu* | grep -v '\.sig$' | tail -n 1
done
