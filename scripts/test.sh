#!/usr/bin/env bash
# Runs every test: lint, the engine's unit/property/vector tests, the emulator's loopback tests,
# and the component build gate (imports nothing, under 150 KiB).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

echo "== format and lint"
cargo fmt --all --check
cargo clippy --workspace --all-targets --quiet -- -D warnings

echo "== component: build, check imports and size"
cargo xtask component

echo "== tests (engine, golden vectors, properties; the .wasm in wasmtime; emulator; end to end)"
cargo test --workspace --quiet
