#!/usr/bin/env bash
# The main job. Today: build the engine component and serve the bundled CaptchaAI emulator on
# 127.0.0.1:8099 (time-scaled 10x, one 5-thread account). The Spin edge app that will serve on
# 127.0.0.1:3000 in front of it is issue 4.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

cargo xtask component
cargo build --release --quiet -p host-tests
DEMO_KEY=0123456789abcdef0123456789abcdef
KEY="${CAPTCHAAI_KEY:-$DEMO_KEY}"
echo
echo "Try it (in another shell), solving through the engine component:"
[ "$KEY" = "$DEMO_KEY" ] && echo "  export CAPTCHAAI_KEY=$DEMO_KEY"   # a real key is never printed
echo "  target/release/host-tests solve --base-url http://127.0.0.1:${PORT:-8099} --time-scale 10 \\"
echo "      --type turnstile --field sitekey=0x4AAAAAAABkMYinukE8nzY --field pageurl=https://example.com"
echo "  target/release/host-tests threads --base-url http://127.0.0.1:${PORT:-8099} --time-scale 10"
echo
exec target/release/host-tests emulator --port "${PORT:-8099}" --time-scale 10 --key "$KEY:5"
