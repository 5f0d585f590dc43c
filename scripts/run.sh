#!/usr/bin/env bash
# The main job: builds everything and serves the Spin edge app on 127.0.0.1:3000 with the
# project's own Spin host. Upstream is the bundled CaptchaAI emulator (started here on
# 127.0.0.1:8099) unless CAPTCHAAI_KEY and CAPTCHAAI_BASE_URL are both given.
# The client token is $EDGE_TOKEN or a fresh random one (printed for the curl example: it is
# yours). The CaptchaAI key is never printed.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

build_all
cargo build --release --quiet -p host-tests -p captchaai-emulator

PORT="${PORT:-3000}"
if [ -n "${CAPTCHAAI_KEY:-}" ] && [ -n "${CAPTCHAAI_BASE_URL:-}" ]; then
  API_BASE="$CAPTCHAAI_BASE_URL"
  echo "upstream: $API_BASE (your key)"
else
  CAPTCHAAI_KEY=0123456789abcdef0123456789abcdef
  API_BASE="http://127.0.0.1:${EMULATOR_PORT:-8099}"
  target/release/captchaai-emulator --port "${EMULATOR_PORT:-8099}" --key "$CAPTCHAAI_KEY:5" >/dev/null &
  EMULATOR_PID=$!
  trap 'kill "$EMULATOR_PID" 2>/dev/null' EXIT
  echo "upstream: the bundled CaptchaAI emulator at $API_BASE (demo key)"
fi
TOKEN="${EDGE_TOKEN:-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')}"

echo
echo "The edge app is starting on http://127.0.0.1:$PORT. Try it (a Turnstile solve takes ~10-15 s):"
echo
echo "  curl -s -X POST 'http://127.0.0.1:$PORT/v1/solve?wait=25' \\"
echo "       -H 'Authorization: Bearer $TOKEN' -H 'Content-Type: application/json' \\"
echo "       -d '{\"type\":\"turnstile\",\"sitekey\":\"0x4AAAAAAABkMYinukE8nzY\",\"pageurl\":\"https://example.com/login\"}'"
echo
echo "A 202 answer carries an id; continue with:"
echo "  curl -s 'http://127.0.0.1:$PORT/v1/solve/<id>?wait=25' -H 'Authorization: Bearer $TOKEN'"
echo
SPIN_VARIABLE_CAPTCHAAI_KEY="$CAPTCHAAI_KEY" \
SPIN_VARIABLE_CLIENT_TOKENS="$TOKEN" \
SPIN_VARIABLE_API_BASE="$API_BASE" \
  target/release/captchaai serve --manifest spin.toml --listen "127.0.0.1:$PORT" \
    --kv "file:target/edge-kv.json" --cache-dir target/component-cache
