#!/usr/bin/env bash
# Installs bindings/python into a venv under target/ and runs its tests (and the overhead bench
# with BENCH=1). Needs target/component/captchaai_engine.wasm (`cargo xtask component`) and the
# emulator target/release/captchaai-emulator (`cargo build --release -p captchaai-emulator`, or
# set CAPTCHAAI_EMULATOR). Run from anywhere; extra arguments go to pytest.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${PYTHON_VENV:-$root/target/venv-python}"
python="${PYTHON:-python3}"

if [[ ! -f "${CAPTCHAAI_ENGINE_WASM:-$root/target/component/captchaai_engine.wasm}" ]]; then
    echo "bindings/python: the engine component is missing: run \`cargo xtask component\` first" >&2
    exit 1
fi
if [[ ! -x "$venv/bin/python" ]]; then
    echo "bindings/python: creating $venv"
    "$python" -m venv "$venv"
fi
echo "bindings/python: installing ./bindings/python and the test dependencies"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
# A fresh build each time, so the shipped .wasm is the current one.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$here"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$here[test]"
cd "$here"
echo "bindings/python: pytest"
# tests/conftest.py leaves out tests/integrations: integrations.sh runs them in their own venvs.
"$venv/bin/python" -m pytest -p no:cacheprovider -v "$@"
if [[ "${BENCH:-0}" == "1" ]]; then
    "$venv/bin/python" benches/overhead.py
fi
