#!/usr/bin/env bash
# A not-ready `res.php?action=get` poll against a not-ready `GET /v1/solve/{id}`, side by side on
# the same edge process and store (BENCHMARKS.md, "drop-in" rows): 16 reCAPTCHA v2 solves started
# through in.php and 16 through POST /v1/solve, then wrk (2 threads, 16 keep-alive connections,
# each request on the next id of its set) on each route in turn, twice. The emulator never
# solves (10-minute solve time), so every answer is "not ready"; the upstream requests made
# meanwhile are counted against the client polls: upstream polls follow the engine's schedule
# (at most one per solve per 5 s poll interval, the bound checked), however fast clients poll.
#
#   benches/dropin-poll.sh [sqlite|redis] [spin|serve]   (defaults: sqlite serve)
# Needs wrk, curl, the emulator ($CAPTCHAAI_EMULATOR, else target/debug), the serve host
# (target/debug/captchaai-serve) or Spin ($SPIN_BIN, else ../shared/tools/spin/spin), and
# redis-server for `redis`. Stops what it started.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
STORE=${1:-sqlite}
RUNTIME=${2:-serve}
DURATION=${DURATION:-5}
source scripts/net.sh
WORK=$(mktemp -d "${TMPDIR:-/tmp}/dropin-poll.XXXXXX")
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

KEY=B3nchKeyB3nchKeyB3nchKeyB3nchKey
TOKEN=Tok3nForTheDropInPollBenchmark01
EMULATOR=${CAPTCHAAI_EMULATOR:-$ROOT/target/debug/captchaai-emulator}
EPORT=$(free_port)
"$EMULATOR" --port "$EPORT" --key "$KEY:40" --solve-time all=600000:600000 >/dev/null 2>&1 &
PIDS+=($!)
wait_http "http://127.0.0.1:$EPORT/_emulator/health" 10

STORE_ARGS=(--state-dir "$WORK/state")
if [[ $STORE == redis ]]; then
  RPORT=$(free_port)
  redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK" >/dev/null &
  PIDS+=($!)
  for _ in $(seq 1 50); do redis-cli -p "$RPORT" ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
  printf '[key_value_store.default]\ntype = "redis"\nurl = "redis://127.0.0.1:%s"\n' "$RPORT" >"$WORK/rc.toml"
  STORE_ARGS+=(--runtime-config-file "$WORK/rc.toml")
fi
PORT=$(free_port)
export SPIN_VARIABLE_CAPTCHAAI_KEY=$KEY SPIN_VARIABLE_CLIENT_TOKENS="bench:$TOKEN" \
  SPIN_VARIABLE_API_BASE="http://127.0.0.1:$EPORT"
if [[ $RUNTIME == spin ]]; then
  "${SPIN_BIN:-$ROOT/../shared/tools/spin/spin}" up --from spin.toml --listen "127.0.0.1:$PORT" "${STORE_ARGS[@]}" \
    >"$WORK/server.log" 2>&1 &
else
  target/debug/captchaai-serve --manifest spin.toml --listen "127.0.0.1:$PORT" "${STORE_ARGS[@]}" \
    --cache-dir target/component-cache --quiet-guest >"$WORK/server.log" 2>&1 &
fi
PIDS+=($!)
unset SPIN_VARIABLE_CAPTCHAAI_KEY
wait_http "http://127.0.0.1:$PORT/healthz" 120
EDGE=http://127.0.0.1:$PORT

SITEKEY=6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-
classic=() v1=()
for _ in $(seq 1 16); do
  reply=$(curl -fsS "$EDGE/in.php" -d key=$TOKEN -d method=userrecaptcha -d googlekey=$SITEKEY \
    -d pageurl=https://portal.example.com/login)
  classic+=("/res.php?key=$TOKEN&action=get&id=${reply#OK|}")
  id=$(curl -fsS "$EDGE/v1/solve?wait=0" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    -d "{\"type\":\"recaptcha_v2\",\"sitekey\":\"$SITEKEY\",\"pageurl\":\"https://portal.example.com/login\"}" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  v1+=("/v1/solve/$id?wait=0")
done
[[ $(curl -fsS "$EDGE${classic[0]}") == CAPCHA_NOT_READY ]] || { echo "dropin-poll: in.php solve not pending" >&2; exit 1; }

# A wrk script walking `paths` (each connection thread on the next one).
lua() {
  printf 'local paths = {'
  printf '"%s",' "$@"
  printf '}\nlocal i = 0\nrequest = function() i = i %% #paths + 1; return wrk.format("GET", paths[i]) end\n'
}
lua "${classic[@]}" >"$WORK/classic.lua"
lua "${v1[@]}" >"$WORK/v1.lua"

upstream() { curl -fsS "http://127.0.0.1:$EPORT/_emulator/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests"])'; }
before=$(upstream)
started=$(date +%s)
echo "store $STORE, runtime $RUNTIME, $DURATION s per run, 16 connections; upstream requests so far: $before"
polls=0
for round in 1 2; do
  for route in classic v1; do
    header=()
    [[ $route == v1 ]] && header=(--header "Authorization: Bearer $TOKEN")
    out=$(wrk --latency --threads 2 --connections 16 --duration "${DURATION}s" "${header[@]}" \
      --script "$WORK/$route.lua" "$EDGE")
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
    p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
    non2xx=$(awk '/Non-2xx/ {print $NF}' <<<"$out")
    errors=$(awk '/Socket errors/ {print}' <<<"$out")
    name=$([[ $route == classic ]] && echo "res.php get (not ready)" || echo "GET /v1/solve/{id} (not ready)")
    printf 'round %s  %-32s %8s req/s  p50 %-8s p99 %-8s non-2xx %s %s\n' "$round" "$name" "$rps" "$p50" "$p99" "${non2xx:-0}" "$errors"
    polls=$((polls + $(awk '/requests in/ {print $1}' <<<"$out")))
  done
done
after=$(upstream)
elapsed=$(($(date +%s) - started + 1))
bound=$((32 * (elapsed / 5 + 1)))
echo "client polls: $polls; upstream requests meanwhile: $((after - before)) (the schedule's bound: $bound, 32 solves x one poll per 5 s over $elapsed s)"
((after - before <= bound)) || { echo "dropin-poll: more upstream requests than the engine's schedule makes" >&2; exit 1; }
