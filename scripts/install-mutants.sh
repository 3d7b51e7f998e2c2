#!/bin/sh
# Install cargo-mutants (mutation testing, docs/mutants.md) from crates.io.
# Idempotent: skips the build when a cargo-mutants binary is already on PATH.
# Pinned so the mutant list (and so docs/mutants.md's counts) is reproducible.
set -eu
VERSION="${CARGO_MUTANTS_VERSION:-27.1.0}"
if command -v cargo-mutants >/dev/null 2>&1; then
    cargo mutants --version
    exit 0
fi
# nice: on a shared 2-core machine the install must not starve other builds.
nice -n 15 cargo install --locked cargo-mutants --version "$VERSION"
cargo mutants --version
