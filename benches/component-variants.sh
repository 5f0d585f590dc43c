#!/usr/bin/env bash
# Builds the engine component in several optimisation variants (rustc opt-level x wasm-opt level)
# and measures each: size, and a full canned solve through wasmtime (µs, best of 3 runs of
# 20,000 solves; instructions per solve with callgrind where valgrind exists: the canned solve
# alone, without the model solves, observes and checkpoints driver-bench also times). Writes a Markdown
# table to stdout. Leaves the chosen build (the xtask defaults) in target/component at the end.
# Usage: benches/component-variants.sh [VARIANT ...]   (from the repository root; takes ~10 minutes)
# A VARIANT is "LEVEL PASS" (one argument, e.g. "s -O3"); without any, the list below.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
cargo build --release --quiet -p captchaai-benches --bin driver-bench
out=target/variants
mkdir -p "$out"
variants=("z -Oz" "z -O3" "s -Oz" "s -Os" "s -O3" "2 -Oz" "2 -Os" "3 -Oz" "3 -O3")
if [ $# -gt 0 ]; then variants=("$@"); fi
echo "| rustc opt-level | wasm-opt | size (bytes) | canned solve (µs, best of 3) | instructions per solve |"
echo "|---|---|---|---|---|"
for v in "${variants[@]}"; do
  read -r level pass <<<"$v"
  # A variant over the size budget is still measured (xtask writes the component, then fails
  # the budget check); any other failure stops the script.
  if ! log=$(CARGO_PROFILE_WASM_OPT_LEVEL="$level" ENGINE_WASM_OPT="$pass" cargo xtask component 2>&1); then
    grep -q 'KiB budget' <<<"$log" || { echo "$log" >&2; exit 1; }
  fi
  wasm="$out/engine-$level$pass.wasm"
  cp target/component/captchaai_engine.wasm "$wasm"
  size=$(stat -c %s "$wasm")
  best=""
  for _ in 1 2 3; do
    us=$(CAPTCHAAI_ENGINE_WASM="$wasm" target/release/driver-bench --canned 20000 | sed -n 's/^full solve.*: \([0-9.]*\) µs.*/\1/p')
    if [ -z "$best" ] || awk "BEGIN{exit !($us < $best)}"; then best=$us; fi
  done
  instr="-"
  if command -v valgrind >/dev/null 2>&1; then
    count() {
      CAPTCHAAI_ENGINE_WASM="$wasm" valgrind --tool=callgrind --smc-check=all-non-file \
        --callgrind-out-file=/dev/null target/release/driver-bench --canned "$1" --canned-snapshots 0 \
        --canned-with-model 0 --canned-observes 0 2>&1 \
        | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
    }
    a=$(count 200); b=$(count 1200)
    instr=$(( (b - a) / 1000 ))
  fi
  echo "| $level | $pass | $size | $best | $instr |"
done
cargo xtask component >/dev/null
