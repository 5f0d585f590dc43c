#!/usr/bin/env bash
# Installs what the build needs and is not in Cargo.lock: the wasm32 targets and binaryen's
# wasm-opt (used by `cargo xtask component`), and defines `build_all`. Idempotent; sourced by
# run.sh and test.sh.
set -euo pipefail

for target in wasm32-unknown-unknown wasm32-wasip2; do
  rustup target add "$target" >/dev/null 2>&1 || rustup target add "$target"
done

if ! command -v wasm-opt >/dev/null 2>&1 && [ ! -x node_modules/.bin/wasm-opt ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "setup: installing binaryen (wasm-opt) with apt-get" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q binaryen >/dev/null 2>&1 \
      || { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q binaryen >/dev/null; }
  fi
  if ! command -v wasm-opt >/dev/null 2>&1; then
    echo "setup: installing binaryen (wasm-opt) from npm into ./node_modules" >&2
    npm install --no-save --no-audit --no-fund --silent binaryen@130 >/dev/null
  fi
fi

# Builds every artifact: the engine component (with its import and size gate), the Spin edge
# app composed with that engine component (target/edge/captchaai_edge.wasm), and the
# hello-world component the serve tests and benchmarks use.
build_all() {
  cargo xtask component
  cargo xtask edge
  cargo build --quiet --manifest-path host-tests/edge-hello/Cargo.toml --target wasm32-wasip2 --release
}
