#!/usr/bin/env bash
# The edge's contract, end to end: schemathesis (pinned, in a venv under target/) runs every check
# against the edge app served by real Spin (../shared/tools/spin/spin, or $SPIN_BIN) in front of
# the CaptchaAI emulator, authenticated with a client token, and must pass AND reach real solves:
# the emulator's counters must show tasks submitted and solved during the run, or this fails.
#
#   edge/contract/run.sh            # build what is missing or stale, then test
#   CONTRACT_EXAMPLES=N             # schemathesis --max-examples per operation (default 20)
#   CONTRACT_PROPS_EXAMPLES=N       # schema_props.py examples per type (default 40; 0 skips it)
#   CONTRACT_SERVE=1                # also run the contract on `captchaai-serve --manifest spin.toml`
#   CONTRACT_SERVE_PROFILE=release  # cargo profile of that serve host (default dev: the build
#                                   # `cargo test` already made; its dependencies are optimized)
# Where no Spin CLI is present the contract runs on the serve host instead (printed as SKIPPED
# for real Spin), so it always runs somewhere.
#
# Before schemathesis it checks that edge/openapi.json is what `cargo xtask openapi` generates and
# runs the property test (schema_props.py: schema-valid tasks are all accepted by the engine).
# Prints progress; stops every child it started on exit; exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD

SCHEMATHESIS_VERSION=4.32.5
EXAMPLES=${CONTRACT_EXAMPLES:-20}
PROPS_EXAMPLES=${CONTRACT_PROPS_EXAMPLES:-40}
VENV=$ROOT/target/contract-venv
WORK=$(mktemp -d "${TMPDIR:-/tmp}/edge-contract.XXXXXX")
KEY=c0ffee00c0ffee00c0ffee00c0ffee00
TOKEN=contract-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
PIDS=()

say() { printf 'contract: %s\n' "$*"; }
cleanup() {
  local status=$?
  for pid in "${PIDS[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${PIDS[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$WORK"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# free_port, wait_http
source "$ROOT/scripts/net.sh"

stats() { curl -fsS --max-time 5 "$EMULATOR/_emulator/stats"; }
stat_of() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

# 1. Tools and builds.
SPIN=${SPIN_BIN:-$ROOT/../shared/tools/spin/spin}
if [[ ! -x $SPIN ]]; then
  if [[ ${CI:-} == true ]]; then
    say "FAILED: no Spin CLI at $SPIN; CI runs the contract under real Spin (set SPIN_BIN to a Spin 4.1+ binary)"
    exit 1
  fi
  say "SKIPPED under real Spin: no Spin CLI at $SPIN (set SPIN_BIN); the contract runs on captchaai-serve"
  SPIN=
  CONTRACT_SERVE=1
fi
if [[ ! -x $VENV/bin/schemathesis ]] || [[ $("$VENV/bin/schemathesis" --version 2>/dev/null) != *"$SCHEMATHESIS_VERSION"* ]] \
  || ! "$VENV/bin/python" -c 'import jsonschema' 2>/dev/null; then
  say "creating $VENV (schemathesis==$SCHEMATHESIS_VERSION, jsonschema for the property test)"
  python3 -m venv "$VENV"
  "$(bash "$ROOT/scripts/uv.sh")" pip install --quiet --python "$VENV/bin/python" "schemathesis==$SCHEMATHESIS_VERSION" "jsonschema==4.26.0"
fi
say "building: engine component, edge app, emulator (cargo, incremental)"
cargo xtask component >/dev/null
cargo xtask edge >/dev/null
EMULATOR_BIN=$(bash "$ROOT/scripts/emulator.sh")

# 2. The document is generated, and every schema-valid task is accepted by the engine.
say "checking edge/openapi.json is what cargo xtask openapi writes"
cargo xtask openapi --check
if ((PROPS_EXAMPLES > 0)); then
  say "property test: $PROPS_EXAMPLES schema-valid tasks per type through the engine's validation"
  "$VENV/bin/python" edge/contract/schema_props.py "$PROPS_EXAMPLES"
fi

# 3. The emulator: one account with a plan larger than any run's concurrency, solving fast.
EMULATOR_PORT=$(free_port)
EMULATOR=http://127.0.0.1:$EMULATOR_PORT
# Finished tasks stay queryable for --retention-ms of virtual time: 10 real minutes here.
"$EMULATOR_BIN" --port "$EMULATOR_PORT" --time-scale 200 --key "$KEY:500" \
  --retention-ms $((200 * 600000)) --ban-after-bad-keys 0 >"$WORK/emulator.log" 2>&1 &
PIDS+=($!)
wait_http "$EMULATOR/_emulator/health" 30 || { say "the emulator did not start"; cat "$WORK/emulator.log"; exit 1; }
say "emulator on $EMULATOR (time scale 200)"

# Runs schemathesis against a server at $1 (a label in $2) and checks real solves were reached.
contract() {
  local base=$1 label=$2 before after created solved sync status
  before=$(stats)
  say "$label: schemathesis $SCHEMATHESIS_VERSION, all checks, --max-examples $EXAMPLES, against $base"
  local started=$SECONDS
  set +e
  # --max-response-time: the documented bound is `wait` (at most 25 s) plus the upstream
  # timeout (5 s by default); 35 s leaves scheduling slack on 2 busy cores.
  "$VENV/bin/schemathesis" --config-file "$ROOT/edge/contract/schemathesis.toml" run "$ROOT/edge/openapi.json" \
    --url "$base" \
    --header "Authorization: Bearer $TOKEN" \
    --checks all \
    --max-response-time 35 \
    --max-examples "$EXAMPLES" \
    --workers 4 \
    --seed 1 \
    --request-timeout 60 \
    --suppress-health-check all \
    --report junit --report-dir "$WORK/report-$label" \
    2>&1 | tee "$WORK/schemathesis-$label.log"
  status=${PIPESTATUS[0]}
  set -e
  after=$(stats)
  created=$(($(stat_of tasks_created <<<"$after") - $(stat_of tasks_created <<<"$before")))
  solved=$(($(stat_of tasks_solved <<<"$after") - $(stat_of tasks_solved <<<"$before")))
  sync=$(($(stat_of sync_solves <<<"$after") - $(stat_of sync_solves <<<"$before")))
  local ok200
  ok200=$(grep -c ' -> 200 ' "$WORK/$label.log" 2>/dev/null || true)
  say "$label: schemathesis exit $status in $((SECONDS - started)) s; emulator: $created tasks submitted, $solved solved, $sync solved synchronously; edge log: $ok200 responses 200"
  say "$label: edge responses by route and status:"
  grep -o 'edge: [A-Z]* [^ ]* -> [0-9]*' "$WORK/$label.log" | sort | uniq -c | sort -rn | sed 's/^/    /' || true
  if ((status != 0)); then
    say "$label: schemathesis failed"
    return 1
  fi
  if ((created + sync == 0 || solved + sync == 0)); then
    say "$label: no real solve was reached (nothing submitted or solved at the emulator)"
    return 1
  fi
}

# Whether the schemathesis log $1 shows no failed check and no error other than answers cut
# short: Spin 4.1.0-pre0 sometimes closes the connection after an answer's data without the
# chunked body's last chunk, 1 answer in 100 to 7,000 of those sent before the request's body
# has arrived (host-tests/tests/edge.rs; docs/operating.md), and schemathesis reports each as a
# Network Error.
only_cut_answers() {
  local log=$1 kinds errors cuts
  if grep -q '^Failures:\|= FAILURES =' "$log"; then return 1; fi
  kinds=$(sed -n '/^Errors:/,/^$/p' "$log" | grep -v '^Errors:\|^$' || true)
  if [[ -z $kinds ]] || grep -qv 'Network Error: [0-9]*$' <<<"$kinds"; then return 1; fi
  errors=$(grep -o 'Network Error: [0-9]*' <<<"$kinds" | awk -F': ' '{n += $2} END {print n + 0}')
  cuts=$(grep -c 'The server declared chunked encoding but sent an invalid chunk' "$log" || true)
  ((errors > 0 && errors == cuts))
}

# 4. Real Spin, where present. A run whose only problems are answers Spin cut short is run
# again, at most twice; anything else fails at once.
if [[ -n $SPIN ]]; then
  SPIN_PORT=$(free_port)
  SPIN_VARIABLE_CAPTCHAAI_KEY=$KEY SPIN_VARIABLE_CLIENT_TOKENS=$TOKEN SPIN_VARIABLE_API_BASE=$EMULATOR \
    "$SPIN" up --from spin.toml --listen "127.0.0.1:$SPIN_PORT" --state-dir "$WORK/spin-state" \
    >"$WORK/spin.log" 2>&1 &
  PIDS+=($!)
  wait_http "http://127.0.0.1:$SPIN_PORT/healthz" 120 || { say "spin up did not serve"; cat "$WORK/spin.log"; exit 1; }
  say "spin up serving on 127.0.0.1:$SPIN_PORT"
  for attempt in 1 2 3; do
    if contract "http://127.0.0.1:$SPIN_PORT" spin; then
      break
    fi
    if ((attempt == 3)) || ! only_cut_answers "$WORK/schemathesis-spin.log"; then
      exit 1
    fi
    say "spin: KNOWN SPIN DEFECT: every problem was an answer Spin cut short (docs/operating.md); running the contract under Spin again ($((attempt + 1)) of 3)"
  done
fi

# 5. The project's serve host, where asked.
if [[ ${CONTRACT_SERVE:-0} == 1 ]]; then
  SERVE_PORT=$(free_port)
  profile=${CONTRACT_SERVE_PROFILE:-dev}
  say "building captchaai-serve (cargo profile $profile)"
  if [[ $profile == dev ]]; then
    # The workspace's dev build, as the tests and the docs check make it: with the same features
    # unified, nothing is built again (`-p captchaai-serve` alone would rebuild wasmtime).
    cargo build --quiet --workspace --bins --examples
  else
    cargo build --profile "$profile" --quiet -p captchaai-serve
  fi
  [[ $profile == dev ]] && serve_bin=target/debug/captchaai-serve || serve_bin=target/$profile/captchaai-serve
  SPIN_VARIABLE_CAPTCHAAI_KEY=$KEY SPIN_VARIABLE_CLIENT_TOKENS=$TOKEN SPIN_VARIABLE_API_BASE=$EMULATOR \
    "$serve_bin" --manifest spin.toml --listen "127.0.0.1:$SERVE_PORT" --state-dir "$WORK/serve-state" \
    >"$WORK/serve.log" 2>&1 &
  PIDS+=($!)
  wait_http "http://127.0.0.1:$SERVE_PORT/healthz" 60 || { say "captchaai-serve did not serve"; cat "$WORK/serve.log"; exit 1; }
  say "captchaai-serve on 127.0.0.1:$SERVE_PORT"
  contract "http://127.0.0.1:$SERVE_PORT" serve
fi
say "passed"
