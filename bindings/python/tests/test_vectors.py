"""Every golden vector in testdata/vectors replayed through the Python layer gives exactly the
stored transcript (the one the Rust replayer produces), compared as canonical JSON."""

import json
from pathlib import Path

import pytest

from captchaai_engine import Engine

from replay import replay, replay_full

VECTORS = Path(__file__).resolve().parents[3] / "testdata" / "vectors"
FILES = sorted(VECTORS.glob("*.json"))


def canonical(value):
    return json.dumps(value, sort_keys=True, ensure_ascii=False, indent=1)


def test_the_vectors_are_there():
    assert len(FILES) >= 80, f"found {len(FILES)} vectors in {VECTORS}"


@pytest.fixture(scope="module")
def engine():
    return Engine()


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_vector_replays_identically(engine, path):
    vector = json.loads(path.read_text(encoding="utf-8"))
    transcript, solve_times_after = replay_full(engine, vector)
    assert vector["transcript"], f"{path.name} has no stored transcript"
    assert canonical(transcript) == canonical(vector["transcript"]), f"{path.stem}: the transcripts differ"
    # With a solve-times model: the model after observing the solution, byte for byte.
    assert solve_times_after == vector.get("solve_times_after"), f"{path.stem}: the model after the solve differs"


def test_a_changed_script_changes_the_transcript(engine):
    """The comparison can fail: one reply body changed gives a different transcript."""
    vector = json.loads((VECTORS / "type_recaptcha_v2.json").read_text(encoding="utf-8"))
    vector["script"][-1]["reply"]["body"] = '{"status":1,"request":"another-token"}'
    assert canonical(replay(engine, vector)) != canonical(vector["transcript"])
