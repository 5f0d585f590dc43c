"""The two call layers: ``_wit`` (wasmtime-py's private C bindings) only on the wasmtime versions
CI tests, else wasmtime-py's public component API with one warning, and the same results.

bindings/python/test.sh runs the whole suite on each layer and wasmtime version it supports and
says which layer it expects in ``$CAPTCHAAI_ENGINE_EXPECT_LAYER``; this file checks that the
expected layer is the one in use, so a run meant for one path cannot pass on the other.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from captchaai_engine import Engine, _component

from replay import replay

VECTORS = Path(__file__).resolve().parents[3] / "testdata" / "vectors"


def test_the_rule_picks_the_fast_layer_only_on_tested_versions():
    for version in ("49.0.0", "50.0.1", "50.9.9", "51.0.0"):
        assert _component.choose_call_layer(version, {})[0] == "fast", version
    for version in ("48.0.0", "52.0.0", "100.0.0", "unknown", "50rc1"):
        layer, reason = _component.choose_call_layer(version, {})
        assert layer == "public" and version in reason, version
    for value in ("1", "true", "YES"):
        layer, reason = _component.choose_call_layer("50.0.1", {_component.PUBLIC_API_ENV: value})
        assert layer == "public" and _component.PUBLIC_API_ENV in reason
    assert _component.choose_call_layer("50.0.1", {_component.PUBLIC_API_ENV: "0"})[0] == "fast"


def test_the_layer_in_use_is_the_one_this_run_expects():
    expected = os.environ.get("CAPTCHAAI_ENGINE_EXPECT_LAYER") or _component.choose_call_layer()[0]
    assert _component.call_layer_name() == expected, _component.choose_call_layer()


def solve_on(layer, vector):
    """The vector replayed on an engine whose instance calls through ``layer``."""
    engine = Engine()
    engine._instance = _component.load().instantiate(layer)
    return replay(engine, vector)


def test_both_layers_give_the_same_transcripts():
    """Where the fast layer loads (a tested wasmtime), every vector replays identically on both.
    Elsewhere the private bindings are never even imported."""
    if _component.choose_call_layer(env={})[0] != "fast":
        Engine()  # the layer is chosen
        assert _component.call_layer_name() == "public"
        assert "captchaai_engine._wit" not in sys.modules
        return
    from captchaai_engine import _public, _wit

    for path in sorted(VECTORS.glob("*.json")):
        vector = json.loads(path.read_text(encoding="utf-8"))
        assert solve_on(_wit, vector) == solve_on(_public, vector) == vector["transcript"], path.stem


FALLBACK = textwrap.dedent("""
    import json, logging, sys, warnings
    from importlib import metadata
    real = metadata.version
    metadata.version = lambda name: "48.0.0" if name == "wasmtime" else real(name)
    sys.path.insert(0, sys.argv[1])
    # As Airflow does: warnings go into logging, whose handler writes to stdout.
    logging.captureWarnings(True)
    logging.basicConfig(stream=sys.stdout, format="LOGGED %(message)s")
    from captchaai_engine import Engine, _component
    if sys.argv[3] == "ignored":
        warnings.simplefilter("ignore", _component.CallPathWarning)
    from replay import replay
    with open(sys.argv[2], encoding="utf-8") as file:
        vector = json.load(file)
    same = [replay(Engine(), vector) == vector["transcript"] for _ in range(3)]
    print(json.dumps({"layer": _component.call_layer_name(), "same": same}))
""")


def fallback(mode: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in (_component.PUBLIC_API_ENV, "PYTHONWARNINGS")}
    return subprocess.run([sys.executable, "-c", FALLBACK, str(Path(__file__).parent),
                           str(VECTORS / "type_recaptcha_v2.json"), mode],
                          env=env, capture_output=True, text=True, timeout=120, check=True)


def test_an_untested_wasmtime_falls_back_to_the_public_api_with_one_warning_on_stderr():
    """A fresh process that sees wasmtime "48.0.0", in which warnings are logged to stdout (as
    Airflow logs them): the public layer, the stored transcript on every solve, and one
    CallPathWarning naming the version, on stderr only, so stdout is the program's own output."""
    out = fallback("shown")
    [line] = out.stdout.splitlines()
    report = json.loads(line)
    assert report["layer"] == "public"
    assert report["same"] == [True, True, True]
    [warning] = [text for text in out.stderr.splitlines() if "Warning" in text]
    assert "CallPathWarning" in warning and "wasmtime 48.0.0" in warning and "public component API" in warning
    # The warnings module's filters still apply.
    ignored = fallback("ignored")
    assert json.loads(ignored.stdout)["layer"] == "public" and "CallPathWarning" not in ignored.stderr
