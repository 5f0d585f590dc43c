#!/usr/bin/env bash
# Prints the path of the CaptchaAI emulator the scripts run: $CAPTCHAAI_EMULATOR (a built binary)
# if set, else the release build, built (incrementally) first. scripts/test.sh sets the variable
# to the workspace's dev build, so CI makes no release build of the emulator.
set -euo pipefail
if [ -n "${CAPTCHAAI_EMULATOR:-}" ]; then
  echo "$CAPTCHAAI_EMULATOR"
  exit 0
fi
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
echo "emulator: cargo build --release -p captchaai-emulator" >&2
(cd "$ROOT" && cargo build --release --quiet -p captchaai-emulator) >&2
echo "$ROOT/target/release/captchaai-emulator"
