"""The build hook ships the engine component, or fails naming `cargo xtask component`."""

import importlib.util
from pathlib import Path

import pytest

import required

HOOK = Path(__file__).resolve().parents[1] / "hatch_build.py"


def load_hook():
    required.module("hatchling", "pip install 'hatchling>=1.21' (bindings/python/test.sh installs the [test] extra)")
    spec = importlib.util.spec_from_file_location("hatch_build", HOOK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_missing_component_fails_naming_the_build_command(tmp_path, monkeypatch):
    hook = load_hook()
    monkeypatch.delenv("CAPTCHAAI_ENGINE_WASM", raising=False)
    root = tmp_path / "bindings" / "python"
    root.mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="cargo xtask component"):
        hook.find_component(root)
    monkeypatch.setenv("CAPTCHAAI_ENGINE_WASM", str(tmp_path / "missing.wasm"))
    with pytest.raises(FileNotFoundError, match="cargo xtask component"):
        hook.find_component(root)


def test_the_workspace_component_is_found(tmp_path, monkeypatch):
    hook = load_hook()
    monkeypatch.delenv("CAPTCHAAI_ENGINE_WASM", raising=False)
    root = tmp_path / "bindings" / "python"
    root.mkdir(parents=True)
    built = tmp_path / "target" / "component" / "captchaai_engine.wasm"
    built.parent.mkdir(parents=True)
    built.write_bytes(b"\0asm")
    assert hook.find_component(root) == built
    (root / "captchaai_engine.wasm").write_bytes(b"\0asm")  # inside an sdist
    assert hook.find_component(root) == root / "captchaai_engine.wasm"
