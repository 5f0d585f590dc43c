#!/usr/bin/env bash
# Installs bindings/python into venvs under target/ and runs its tests on each call layer and
# wasmtime-py version the package supports, after its lints (ruff, mypy --strict), and the overhead
# bench with BENCH=1:
#
#   wasmtime 51.0.0, fast layer (_wit.py)         every test            target/venv-python
#   wasmtime 51.0.0, public API (forced by env)   every test            target/venv-python
#   wasmtime 50.0.1, fast layer                   vectors, call layers  target/venv-python-wasmtime50
#   wasmtime 49.0.0, fast layer                   every test            target/venv-python-wasmtime49
#   wasmtime 44.0.0, public API (untested: falls  vectors, call layers,  target/venv-python-wasmtime44
#                    back with one warning)       failures
#
# 51.0.0 is the newest wasmtime-py (what `pip install captchaai-engine` resolves: pyproject.toml
# bounds it below the next major). The C functions and structures _wit.py uses, and wasmtime-py's
# component modules, are the same in 50.0.1 as in 51.0.0, so 50.0.1 runs the converters' tests only.
#
# $CAPTCHAAI_ENGINE_EXPECT_LAYER tells tests/test_call_paths.py which layer each run must be on.
# Needs target/component/captchaai_engine.wasm (`cargo xtask component`) and the emulator
# target/release/captchaai-emulator (`cargo build --release -p captchaai-emulator`, or set
# CAPTCHAAI_EMULATOR). Run from anywhere; extra arguments go to every pytest run (e.g. -q).
# QUICK=1 runs only the first line of the table.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${PYTHON_VENV:-$root/target/venv-python}"
python="${PYTHON:-python3}"
# The wasmtime-py versions CI runs; the fast ones match _component.FAST_PATH_WASMTIME.
WASMTIME_MAIN=51.0.0
WASMTIME_FAST_PREVIOUS=50.0.1
WASMTIME_FAST_OLDEST=49.0.0
WASMTIME_FALLBACK=44.0.0   # the oldest the public layer supports (pyproject: wasmtime>=44)

if [[ ! -f "${CAPTCHAAI_ENGINE_WASM:-$root/target/component/captchaai_engine.wasm}" ]]; then
    echo "bindings/python: the engine component is missing: run \`cargo xtask component\` first" >&2
    exit 1
fi

# make_venv DIR WASMTIME_VERSION: the venv with that wasmtime, this package (built afresh, so
# the shipped .wasm is the current one) and the test dependencies.
# Installed with uv (scripts/uv.sh), which CI's venvs take minutes less to build with than pip.
make_venv() {
    local dir="$1" wasmtime="$2" uv
    uv="$(bash "$root/scripts/uv.sh")"
    if [[ ! -x "$dir/bin/python" ]]; then
        echo "bindings/python: creating $dir"
        "$python" -m venv "$dir"
    fi
    echo "bindings/python: installing ./bindings/python, wasmtime==$wasmtime and the test dependencies in $dir"
    "$uv" pip install --quiet --python "$dir/bin/python" --reinstall-package captchaai-engine \
        "$here[test]" "wasmtime==$wasmtime"
}

# run_pytest DIR LAYER LABEL [pytest args...]
run_pytest() {
    local dir="$1" layer="$2" label="$3"
    shift 3
    echo "bindings/python: pytest ($label)"
    (cd "$here" && CAPTCHAAI_ENGINE_EXPECT_LAYER="$layer" "$dir/bin/python" -m pytest -p no:cacheprovider "$@")
}

make_venv "$venv" "$WASMTIME_MAIN"
# The lints (settings in pyproject.toml): ruff over the package, its tests, benches and examples;
# mypy --strict over the package, on the newest wasmtime-py's types.
echo "bindings/python: ruff check, mypy --strict"
(cd "$here" && "$venv/bin/ruff" check --cache-dir "$root/target/ruff-cache" . \
    && "$venv/bin/mypy" --cache-dir "$root/target/mypy-cache")
# tests/conftest.py leaves out tests/integrations: integrations.sh runs them in their own venvs.
run_pytest "$venv" fast "wasmtime $WASMTIME_MAIN, fast layer" -v "$@"
if [[ "${QUICK:-0}" != "1" ]]; then
    CAPTCHAAI_ENGINE_PUBLIC_API=1 run_pytest "$venv" public "wasmtime $WASMTIME_MAIN, public API forced" "$@"
    make_venv "$root/target/venv-python-wasmtime50" "$WASMTIME_FAST_PREVIOUS"
    run_pytest "$root/target/venv-python-wasmtime50" fast "wasmtime $WASMTIME_FAST_PREVIOUS, fast layer" \
        tests/test_vectors.py tests/test_call_paths.py "$@"
    make_venv "$root/target/venv-python-wasmtime49" "$WASMTIME_FAST_OLDEST"
    run_pytest "$root/target/venv-python-wasmtime49" fast "wasmtime $WASMTIME_FAST_OLDEST, fast layer" "$@"
    make_venv "$root/target/venv-python-wasmtime44" "$WASMTIME_FALLBACK"
    run_pytest "$root/target/venv-python-wasmtime44" public "wasmtime $WASMTIME_FALLBACK, public API fallback" \
        tests/test_vectors.py tests/test_call_paths.py tests/test_failures.py "$@"
fi
if [[ "${BENCH:-0}" == "1" ]]; then
    "$venv/bin/python" "$here/benches/overhead.py"
fi
