#!/usr/bin/env bash
# One run, one table: CPU per full canned solve (submit, three not-ready polls, the answer) for
# this engine natively (criterion), through the component in wasmtime (the same .wasm every host
# runs), and the official CaptchaAI Python SDK's own sans-IO engine on the same work, without and
# with reply parsing / request encoding. Installs the SDK into a virtual environment under target/.
# Usage: benches/engine-vs-sdk.sh   (from anywhere; ~3 minutes after the builds)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
cargo xtask component >/dev/null
cargo build --release --quiet -p captchaai-benches --bin driver-bench
venv=target/bench-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check captchaai==1.0.1

native=$(cargo bench --quiet --bench solve -- --noplot "full solve \(validated" 2>/dev/null \
  | sed -n 's/.*time: *\[[^ ]* [^ ]* \([0-9.]*\) \([nµm]s\).*/\1 \2/p' | head -n 1)
component=$(target/release/driver-bench --canned 20000)
solve_us=$(sed -n 's/^full solve.*: \([0-9.]*\) µs (\([0-9]*\) calls).*/\1 µs (\2 calls)/p' <<<"$component")
snapshot_us=$(sed -n 's/^checkpoint (snapshot-state) through the component (\([0-9]*\) bytes): \([0-9.]*\) µs/\2 µs (\1 bytes)/p' <<<"$component")
sdk=$("$venv/bin/python" benches/python/sdk_engine.py)

echo "| engine, full canned solve | CPU per solve |"
echo "|---|---|"
echo "| this engine, native (criterion median) | $native |"
echo "| this engine through the component in wasmtime | $solve_us |"
echo "| a checkpoint (snapshot-state) through the component | $snapshot_us |"
grep -E '^\| engine, no parsing|^\| engine \+ urlencode' <<<"$sdk" | sed 's/^| /| official SDK (captchaai 1.0.1), /'
echo
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
