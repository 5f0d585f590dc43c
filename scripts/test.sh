#!/usr/bin/env bash
# Runs every test: format and lint (workspace, edge app, hello component), the builds (the engine
# component must import nothing and fit 150 KiB), then the engine's unit/property/vector tests,
# the .wasm in wasmtime, the emulator, end-to-end solves, the Spin host and the edge API.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

echo "== format and lint"
cargo fmt --all --check
cargo fmt --manifest-path edge/Cargo.toml --check
cargo fmt --manifest-path edge-hello/Cargo.toml --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
cargo clippy --manifest-path edge/Cargo.toml --target wasm32-wasip2 --quiet -- -D warnings

echo "== build: engine component (imports, size), edge app, hello component"
build_all

echo "== tests"
cargo test --workspace --quiet
