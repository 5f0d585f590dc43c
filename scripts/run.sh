#!/usr/bin/env bash
# The main job. Today: build the engine component and serve the bundled CaptchaAI emulator on
# 127.0.0.1:8099 (time-scaled 10x, one 5-thread account). The Spin edge app that will serve on
# 127.0.0.1:3000 in front of it is issue 4.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

cargo xtask component
cargo build --release --quiet -p host-tests
KEY="${CAPTCHAAI_KEY:-0123456789abcdef0123456789abcdef}"
echo
echo "Try it (in another shell):"
echo "  curl -s -d key=\$CAPTCHAAI_KEY -d method=turnstile -d sitekey=0x4AAAAAAABkMYinukE8nzY \\"
echo "       -d pageurl=https://example.com -d json=1 http://127.0.0.1:8099/in.php"
echo "  curl -s -d key=\$CAPTCHAAI_KEY -d action=get -d id=<id> -d json=1 http://127.0.0.1:8099/res.php"
echo "(the emulator accepts the key in CAPTCHAAI_KEY, default 0123456789abcdef0123456789abcdef)"
echo
exec target/release/host-tests emulator --port "${PORT:-8099}" --time-scale 10 --key "$KEY:5"
