"""Keyless solves through the component (the WIT ``keyless`` interface): every golden vector
replayed with solves created without the key, each request sent as ``with_key`` makes it and each
reply fed back through ``without_key``, gives exactly the stored transcript of the solve with the
key; the requests themselves never hold the key, and ``with_key`` refuses what is not keyless."""

import json

import pytest
from test_vectors import FILES, canonical

from captchaai_engine import Engine, Failure, Response, Send
from captchaai_engine.engine import KeylessSolveHandle
from captchaai_engine.errors import WithKeyError
from captchaai_engine.types import KeylessRequest, Request

from replay import replay_full

KEY = "0123456789abcdef0123456789abcdef"
PLACEHOLDER = "{captchaai-key}"


class KeylessEngine(Engine):
    """The replayer's engine calls, made on keyless solves: what a host that stores its history
    does (the key only at send time)."""

    def __init__(self) -> None:
        super().__init__()
        self.key = ""
        self.keyless_requests = []

    def create(self, task, key, config, now, times=None):
        checked = super().create(task, key, config, now, times)  # refused alike, key included
        if isinstance(checked, Failure):
            return checked
        self.drop(checked)
        self.key = key
        return self.create_keyless(task, config, now, times)

    def restore(self, snapshot, key):
        self.drop(super().restore(snapshot, key))
        return self.restore_keyless(snapshot)

    def _sent(self, output):
        if not isinstance(output, Send):
            return output
        assert isinstance(output.request, KeylessRequest)
        self.keyless_requests.append(output.request)
        return Send(self.with_key(output.request, self.key))

    def poll_output(self, handle, now):
        assert isinstance(handle, KeylessSolveHandle)
        return self._sent(super().poll_output(handle, now))

    def handle_response(self, handle, now, request_id, response):
        return self._sent(super().handle_response(handle, now, request_id, self.without_key(response, self.key)))

    def handle_transport_error(self, handle, now, request_id, error):
        return self._sent(super().handle_transport_error(handle, now, request_id, error))


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_every_vector_replays_keyless_to_the_keyed_transcript(path):
    vector = json.loads(path.read_text(encoding="utf-8"))
    engine = KeylessEngine()
    transcript, solve_times_after = replay_full(engine, vector)
    assert canonical(transcript) == canonical(vector["transcript"]), f"{path.stem}: the transcripts differ"
    assert solve_times_after == vector.get("solve_times_after")
    for request in engine.keyless_requests:
        body = request.body if isinstance(request.body, str) else request.body.decode("utf-8", "replace")
        assert vector["key"] not in body and vector["key"] not in repr(request)
        assert PLACEHOLDER in body


def test_with_key_refuses_a_keyed_request_a_bad_key_and_a_body_without_the_placeholder():
    engine = Engine()
    task = {"type": "turnstile", "sitekey": "0x4AAAAAAABkMYinukE8nzY", "pageurl": "https://portal.example.com/"}
    keyless = engine.poll_output(engine.create_keyless(task, None, 0), 0).request
    keyed = engine.poll_output(engine.create(task, KEY, None, 0), 0).request
    assert isinstance(keyed, Request) and engine.with_key(keyless, KEY) == keyed
    with pytest.raises(TypeError):
        engine.with_key(keyed, KEY)  # a Request is never keyless
    with pytest.raises(WithKeyError) as bad_key:
        engine.with_key(keyless, "short")
    assert bad_key.value.kind == "invalid_key" and "short" not in str(bad_key.value)
    forged = KeylessRequest(keyless.id, keyless.kind, keyless.at, keyless.url, keyless.content_type,
                            keyless.body.replace(PLACEHOLDER, "x"), keyless.timeout_ms)
    with pytest.raises(WithKeyError) as not_keyless:
        engine.with_key(forged, KEY)
    assert not_keyless.value.kind == "not_keyless"


def test_without_key_removes_every_occurrence_and_nothing_else():
    engine = Engine()
    reply = Response(502, f"<p>{KEY}</p> echo {KEY}")
    assert engine.without_key(reply, KEY) == Response(502, "<p><redacted></p> echo <redacted>")
    assert engine.without_key(Response(200, "OK|7412"), KEY) == Response(200, "OK|7412")
