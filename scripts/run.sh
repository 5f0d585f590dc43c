#!/usr/bin/env bash
# The main job: builds everything and serves the Spin edge app on 127.0.0.1:3000, under real Spin
# when there is one (`$SPIN_BIN`, or `spin` on PATH, version 4.1 or later), else under the
# bundled Spin-compatible host (captchaai-serve); it says which. Upstream is the bundled
# CaptchaAI emulator (started here on 127.0.0.1:8099) unless CAPTCHAAI_KEY and
# CAPTCHAAI_BASE_URL are both given.
#
# State: the edge keeps its solves in SQLite at target/edge-state/sqlite_key_value.db, so they
# survive a restart of this script (EDGE_RUNTIME_CONFIG=FILE: a Spin runtime config file whose
# [key_value_store.default] chooses the store instead, e.g. type = "redis"). The emulator keeps
# nothing.
# Client token: $EDGE_TOKEN, else the one stored in target/edge-token (created once, mode 600),
# so it stays the same across restarts. The CaptchaAI key is never printed.
# Stopping: Ctrl-C or SIGTERM stops both children; if either child dies, the other is stopped
# and this script exits with an error.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*" >&2; }

CHILDREN=()
cleanup() {
  trap - EXIT INT TERM
  local pid
  # In order: the server first (the bundled host lets in-flight requests finish for up to 10 s
  # or answers them with a JSON 503, then exits; Spin exits at once), then the emulator it may
  # still be calling.
  for pid in "${CHILDREN[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

source scripts/setup.sh

# Real Spin when there is one: $SPIN_BIN, else `spin` on PATH; version 4.1 or later (spin-sdk 7).
spin_at_least_4_1() {
  local version
  version=$("$1" --version 2>/dev/null | awk '{print $2}') || return 1
  [[ $version =~ ^([0-9]+)\.([0-9]+) ]] || return 1
  (( BASH_REMATCH[1] > 4 || (BASH_REMATCH[1] == 4 && BASH_REMATCH[2] >= 1) ))
}
SPIN=""
if [ -n "${SPIN_BIN:-}" ]; then
  if ! spin_at_least_4_1 "$SPIN_BIN"; then
    echo "run.sh: SPIN_BIN=$SPIN_BIN is not a Spin 4.1 or later (it prints: $("$SPIN_BIN" --version 2>&1 | head -1))" >&2
    exit 1
  fi
  SPIN="$SPIN_BIN"
elif command -v spin >/dev/null 2>&1 && spin_at_least_4_1 "$(command -v spin)"; then
  SPIN="$(command -v spin)"
fi

step "building the engine component, the edge app and the hello component"
build_all
# The bundled host (when there is no Spin) and the emulator, in one build of the `local` profile
# (Cargo.toml: release at opt-level 2, a fifth less build time than release at the same speed).
hosts=()
[ -n "$SPIN" ] || hosts+=(captchaai-serve)
[ -n "${CAPTCHAAI_EMULATOR:-}" ] || hosts+=(captchaai-emulator)
if [ ${#hosts[@]} -gt 0 ]; then
  step "building ${hosts[*]} (the first build takes a few minutes)"
  cargo build --profile local "${hosts[@]/#/--package=}"
fi
EMULATOR_BIN="${CAPTCHAAI_EMULATOR:-$PWD/target/local/captchaai-emulator}"

PORT="${PORT:-3000}"
if [ -n "${CAPTCHAAI_KEY:-}" ] && [ -n "${CAPTCHAAI_BASE_URL:-}" ]; then
  API_BASE="$CAPTCHAAI_BASE_URL"
  echo "upstream: $API_BASE (your key)"
else
  CAPTCHAAI_KEY=0123456789abcdef0123456789abcdef
  API_BASE="http://127.0.0.1:${EMULATOR_PORT:-8099}"
  "$EMULATOR_BIN" --port "${EMULATOR_PORT:-8099}" --key "$CAPTCHAAI_KEY:5" >/dev/null &
  CHILDREN+=("$!")
  echo "upstream: the bundled CaptchaAI emulator at $API_BASE (demo key; it forgets its tasks when stopped)"
fi

TOKEN_FILE=target/edge-token
if [ -n "${EDGE_TOKEN:-}" ]; then
  TOKEN="$EDGE_TOKEN"
else
  if [ ! -s "$TOKEN_FILE" ]; then
    (umask 077 && head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$TOKEN_FILE")
  fi
  TOKEN="$(cat "$TOKEN_FILE")"
fi

STORE_ARGS=(--state-dir target/edge-state)
STORE_TEXT="SQLite at target/edge-state/sqlite_key_value.db (kept across restarts)"
if [ -n "${EDGE_RUNTIME_CONFIG:-}" ]; then
  STORE_ARGS=(--runtime-config-file "$EDGE_RUNTIME_CONFIG" --state-dir target/edge-state)
  STORE_TEXT="as configured in $EDGE_RUNTIME_CONFIG"
fi

export SPIN_VARIABLE_CAPTCHAAI_KEY="$CAPTCHAAI_KEY" SPIN_VARIABLE_CLIENT_TOKENS="$TOKEN" SPIN_VARIABLE_API_BASE="$API_BASE"
if [ -n "$SPIN" ]; then
  step "starting the edge app under real Spin ($SPIN, $("$SPIN" --version | head -1)) on http://127.0.0.1:$PORT (key-value store: $STORE_TEXT)"
  "$SPIN" up --from spin.toml --listen "127.0.0.1:$PORT" "${STORE_ARGS[@]}" &
else
  step "starting the edge app under the bundled Spin host (captchaai-serve; no Spin 4.1+ found: set SPIN_BIN to use one) on http://127.0.0.1:$PORT (key-value store: $STORE_TEXT)"
  target/local/captchaai-serve --manifest spin.toml --listen "127.0.0.1:$PORT" \
    "${STORE_ARGS[@]}" --cache-dir target/component-cache &
fi
SERVE_PID=$!
unset SPIN_VARIABLE_CAPTCHAAI_KEY
CHILDREN=("$SERVE_PID" "${CHILDREN[@]}")

# Wait until the server answers (a first start compiles the component: up to a minute).
for _ in $(seq 1 600); do
  if curl -sf -o /dev/null "http://127.0.0.1:$PORT/healthz"; then
    break
  fi
  if ! kill -0 "$SERVE_PID" 2>/dev/null; then
    echo "run.sh: the server exited before it was ready (see its messages above)" >&2
    exit 1
  fi
  sleep 0.2
done
if ! curl -sf -o /dev/null "http://127.0.0.1:$PORT/healthz"; then
  echo "run.sh: the server did not answer /healthz within 2 minutes" >&2
  exit 1
fi

echo
echo "The edge app is listening on http://127.0.0.1:$PORT. Try it (a Turnstile solve takes ~10-15 s):"
echo
echo "  curl -s -X POST 'http://127.0.0.1:$PORT/v1/solve?wait=25' \\"
echo "       -H 'Authorization: Bearer $TOKEN' -H 'Content-Type: application/json' \\"
echo "       -d '{\"type\":\"turnstile\",\"sitekey\":\"0x4AAAAAAABkMYinukE8nzY\",\"pageurl\":\"https://example.com/login\"}'"
echo
echo "A 202 answer carries an id; continue with (repeatable until the result expires):"
echo "  curl -s 'http://127.0.0.1:$PORT/v1/solve/<id>?wait=25' -H 'Authorization: Bearer $TOKEN'"
echo
if [ -z "${EDGE_TOKEN:-}" ]; then
  echo "The token is kept in $TOKEN_FILE (delete it for a new one, or set EDGE_TOKEN)."
fi
echo "Ctrl-C stops the server and the emulator."

# Run until a child exits (or a signal arrives); then the trap stops the others.
set +e
wait -n "${CHILDREN[@]}"
status=$?
set -e
echo "run.sh: a child process exited (status $status); stopping" >&2
exit 1
