#!/usr/bin/env bash
# The artifacts as users install them: builds dist/ (`cargo xtask dist`), then installs each one
# in a temporary directory outside the repository and solves a task with it against the emulator:
#
#   the wheel      a fresh venv, `pip install dist/captchaai_engine-*.whl` (no extra), a
#                  Turnstile solve through `Solver`; the sdist holds the same engine;
#   the sdist      another fresh venv, `pip install dist/captchaai_engine-*.tar.gz` (built by
#                  pip outside the repository), the same solve;
#   the tarball    an empty npm project, `npm install dist/captchaai-engine-*.tgz`, a Turnstile
#                  solve under Node through `import` and through `require`;
#   the edge       dist/edge/ copied out and served by real Spin from that folder (`spin up`, the
#                  key, client token and emulator URL as SPIN_VARIABLE_*), POST /v1/solve answered;
#   the CLI        dist/captchaai copied out, `captchaai threads` and `captchaai solve`; built
#                  with the dev profile unless DIST_CLI_PROFILE=release (the same source; the
#                  release build of wasmtime would add about 8 minutes to CI on 2 cores).
#
# The wheel with each extra is tested by bindings/python/integrations.sh (it installs this wheel).
# Spin is $SPIN_BIN, else ../shared/tools/spin/spin beside the repository: where it is missing
# the edge check fails under CI=true and is skipped (and said so) otherwise. The emulator is
# scripts/emulator.sh's ($CAPTCHAAI_EMULATOR, else the release build). pip and npm use
# their usual caches; nothing is installed into the repository. Prints each step and its time.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

TIME_SCALE=10
KEY=dist0key000000000000000000000001
TOKEN=dist-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
SITEKEY=0x4AAAAAAABkMYinukE8nzY
PAGEURL=https://portal.example.com/login
WORK=$(mktemp -d "${TMPDIR:-/tmp}/captchaai-dist.XXXXXX")
PIDS=()
started=$SECONDS
results=()
failed=0

say() { printf '[dist %4ss] %s\n' "$((SECONDS - started))" "$*"; }
cleanup() {
  local status=$?
  # Each server runs in its own process group (spin up runs the app in a child process).
  for pid in "${PIDS[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# free_port, wait_http
source "$ROOT/scripts/net.sh"
# check NAME COMMAND...: runs one artifact's check, records it, and carries on after a failure.
check() {
  local name=$1 t0=$SECONDS
  shift
  say "$name"
  if "$@"; then
    results+=("$(printf '%-36s passed   %4ss' "$name" "$((SECONDS - t0))")")
  else
    results+=("$(printf '%-36s FAILED   %4ss' "$name" "$((SECONDS - t0))")")
    failed=1
  fi
}

# 1. The artifacts.
say "cargo xtask dist"
t0=$SECONDS
cargo xtask dist --cli-profile "${DIST_CLI_PROFILE:-dev}"
say "dist built in $((SECONDS - t0))s"
wheel=$(ls "$ROOT"/dist/captchaai_engine-*.whl)
sdist=$(ls "$ROOT"/dist/captchaai_engine-*.tar.gz)
tarball=$(ls "$ROOT"/dist/captchaai-engine-*.tgz)

# 2. The emulator, on a free loopback port.
EMULATOR_BIN=$(bash scripts/emulator.sh)
EMULATOR_PORT=$(free_port)
EMULATOR=http://127.0.0.1:$EMULATOR_PORT
setsid "$EMULATOR_BIN" --port "$EMULATOR_PORT" --time-scale "$TIME_SCALE" --key "$KEY:10" \
  --ban-after-bad-keys 0 >"$WORK/emulator.log" 2>&1 &
PIDS+=($!)
wait_http "$EMULATOR/_emulator/health" 30 || { say "the emulator did not start"; cat "$WORK/emulator.log"; exit 1; }
say "emulator on $EMULATOR (time scale $TIME_SCALE)"

# Everything below runs from $WORK: nothing resolves into the repository.
cd "$WORK"

# 3. The wheel, without extras, in a fresh venv.
wheel_check() {
  python3 -m venv "$WORK/venv" || return 1
  "$WORK/venv/bin/pip" install --quiet --disable-pip-version-check --only-binary :all: "$wheel" || return 1
  cat >"$WORK/solve.py" <<'EOF'
import os, sys, tarfile, time, zipfile
import captchaai_engine
from captchaai_engine import Clock, Config, Solver, TurnstileTask

root, wheel, sdist = sys.argv[1:4]
here = os.path.dirname(captchaai_engine.__file__)
assert not here.startswith(root), f"imported from the repository: {here}"
wasm = os.path.join(here, "captchaai_engine.wasm")
engine = open(os.path.join(root, "target/component/captchaai_engine.wasm"), "rb").read()
assert open(wasm, "rb").read() == engine, "the installed engine is target/component's"
with tarfile.open(sdist) as t:
    [member] = [m for m in t.getmembers() if m.name.endswith("/captchaai_engine.wasm")]
    assert t.extractfile(member).read() == engine, "the sdist's engine is target/component's"
start = time.monotonic()
with Solver(os.environ["KEY"], Config(base_url=os.environ["EMULATOR"]), clock=Clock(float(os.environ["TIME_SCALE"]))) as solver:
    solution = solver.solve(TurnstileTask(os.environ["SITEKEY"], os.environ["PAGEURL"]))
assert solution.type == "turnstile" and len(solution.answer) > 20, solution
print(f"  installed: Turnstile solved in {time.monotonic() - start:.1f} s from {here} (task {solution.task_id})")
EOF
  KEY=$KEY EMULATOR=$EMULATOR TIME_SCALE=$TIME_SCALE SITEKEY=$SITEKEY PAGEURL=$PAGEURL \
    timeout 120 "$WORK/venv/bin/python" "$WORK/solve.py" "$ROOT" "$wheel" "$sdist"
}
check "wheel (fresh venv, no extra)" wheel_check

# 3b. The sdist, built and installed by pip in another fresh venv (what pip does where no wheel
# fits): the same checks and solve.
sdist_check() {
  python3 -m venv "$WORK/venv-sdist" || return 1
  "$WORK/venv-sdist/bin/pip" install --quiet --disable-pip-version-check "$sdist" || return 1
  KEY=$KEY EMULATOR=$EMULATOR TIME_SCALE=$TIME_SCALE SITEKEY=$SITEKEY PAGEURL=$PAGEURL \
    timeout 120 "$WORK/venv-sdist/bin/python" "$WORK/solve.py" "$ROOT" "$wheel" "$sdist"
}
check "sdist (fresh venv, built by pip)" sdist_check

# 4. The npm tarball, in an empty project, through import and through require.
npm_check() {
  mkdir -p "$WORK/npm" && cd "$WORK/npm" || return 1
  printf '{"name": "dist-check", "version": "0.0.0", "private": true}\n' >package.json
  npm install --no-audit --no-fund --ignore-scripts --loglevel=error "$tarball" >/dev/null || return 1
  local solve='const o = { key: process.env.KEY, url: process.env.EMULATOR, scale: Number(process.env.TIME_SCALE) };
const started = Date.now();
new Solver(o.key, { baseUrl: o.url }, { timeScale: o.scale })
  .solve({ type: "turnstile", sitekey: process.env.SITEKEY, pageurl: process.env.PAGEURL })
  .then((s) => {
    if (typeof s.answer !== "string" || s.answer.length <= 20) throw new Error(`bad answer ${s.answer}`);
    console.log(`  ${ENTRY}: Turnstile solved in ${((Date.now() - started) / 1000).toFixed(1)} s (task ${s.taskId})`);
  })
  .catch((e) => { console.error(e); process.exitCode = 1; });'
  printf 'import { Solver } from "captchaai-engine";\nconst ENTRY = "import";\n%s\n' "$solve" >solve.mjs
  printf 'const { Solver } = require("captchaai-engine");\nconst ENTRY = "require";\n%s\n' "$solve" >solve.cjs
  local status=0
  for script in solve.mjs solve.cjs; do
    KEY=$KEY EMULATOR=$EMULATOR TIME_SCALE=$TIME_SCALE SITEKEY=$SITEKEY PAGEURL=$PAGEURL \
      timeout 120 node "$script" || status=1
  done
  node -e 'const p = require.resolve("captchaai-engine"); if (!p.startsWith(process.cwd())) { console.error(p); process.exit(1); }' \
    || status=1
  cd "$WORK" || return 1
  return $status
}
check "npm tarball (empty project, node)" npm_check

# 5. The edge bundle under real Spin, from its own folder.
SPIN=${SPIN_BIN:-$ROOT/../shared/tools/spin/spin}
edge_check() {
  cp -r "$ROOT/dist/edge" "$WORK/edge" && cd "$WORK/edge" || return 1
  local port log=$WORK/spin.log pid
  port=$(free_port)
  SPIN_VARIABLE_CAPTCHAAI_KEY=$KEY SPIN_VARIABLE_CLIENT_TOKENS=$TOKEN SPIN_VARIABLE_API_BASE=$EMULATOR \
    setsid "$SPIN" up --listen "127.0.0.1:$port" --state-dir "$WORK/spin-state" >"$log" 2>&1 &
  pid=$!
  PIDS+=("$pid")
  cd "$WORK" || return 1
  if ! wait_http "http://127.0.0.1:$port/healthz" 120; then
    say "spin up did not serve within 120 s:"; tail -20 "$log"; return 1
  fi
  # An image task: its first poll is 1 s after the submit (Spin runs in real time).
  python3 -c 'import json, sys; print(json.dumps({"type": "image", "image": json.load(open(sys.argv[1]))["task"]["image"]}))' \
    "$ROOT/testdata/vectors/type_image_multipart.json" >"$WORK/image-task.json"
  local reply
  reply=$(curl -sS --max-time 40 -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    --data-binary @"$WORK/image-task.json" "http://127.0.0.1:$port/v1/solve?wait=25") || { tail -20 "$log"; return 1; }
  python3 -c 'import json, sys
r = json.loads(sys.argv[1])
assert r.get("status") == "solved" and r.get("answer"), r
elapsed, task, solve = r["elapsed_ms"], r["task_id"], r["id"]
print(f"  edge: image solved under Spin in {elapsed} ms (task {task}, id {solve})")' "$reply" \
    || { tail -20 "$log"; return 1; }
  kill -TERM -- "-$pid" 2>/dev/null || true
}
edge_skipped=
if [[ -x $SPIN ]]; then
  check "edge bundle (real Spin, own folder)" edge_check
elif [[ ${CI:-} == true ]]; then
  say "FAILED: no Spin CLI at $SPIN; CI runs the edge bundle under real Spin (set SPIN_BIN to a Spin 4.1+ binary)"
  results+=("$(printf '%-36s FAILED (no Spin CLI at %s)' "edge bundle (real Spin, own folder)" "$SPIN")")
  failed=1
else
  edge_skipped="SKIPPED: no Spin CLI at $SPIN (set SPIN_BIN to a Spin 4.1+ binary)"
  say "edge bundle: $edge_skipped"
  results+=("$(printf '%-36s %s' "edge bundle (real Spin, own folder)" "$edge_skipped")")
fi

# 6. The CLI binary, copied out.
cli_check() {
  mkdir -p "$WORK/bin" && cp "$ROOT/dist/captchaai" "$WORK/bin/captchaai" || return 1
  export CAPTCHAAI_KEY=$KEY CAPTCHAAI_BASE_URL=$EMULATOR CAPTCHAAI_CACHE_DIR=$WORK/cli-cache
  timeout 60 "$WORK/bin/captchaai" threads || return 1
  local answer
  answer=$(timeout 120 "$WORK/bin/captchaai" solve --time-scale "$TIME_SCALE" --type turnstile \
    --field "sitekey=$SITEKEY" --field "pageurl=$PAGEURL") || return 1
  unset CAPTCHAAI_KEY CAPTCHAAI_BASE_URL CAPTCHAAI_CACHE_DIR
  [[ ${#answer} -gt 20 ]] || { echo "  cli: unexpected answer '$answer'"; return 1; }
  echo "  cli: Turnstile solved (${#answer}-character token)"
}
check "captchaai CLI (copied out)" cli_check

if grep -q "$KEY" "$WORK"/*.log 2>/dev/null; then
  say "FAILED: the key appears in a log"
  failed=1
fi
say "summary ($((SECONDS - started))s in all):"
printf '  %s\n' "${results[@]}"
exit $failed
