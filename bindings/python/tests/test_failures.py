"""Each failure class raises its exception with the engine's code, origin and task id; bad input
gets a typed error; misuse and unusable snapshots have their own types; a trapped engine
instance is replaced and in-flight solves continue."""

from __future__ import annotations

import base64
import json
import pickle
import socket
from pathlib import Path

import pytest

from captchaai_engine import (
    AsyncSolver,
    CaptchaAIError,
    Clock,
    Config,
    Engine,
    EngineMisuse,
    Failure,
    FailureClass,
    FailureOrigin,
    PermanentError,
    Response,
    Send,
    SnapshotError,
    Solver,
    TransientError,
    TurnstileTask,
    UnsolvableError,
)

from conftest import KEY, TIME_SCALE
from replay import replay

VECTORS = Path(__file__).resolve().parents[3] / "testdata" / "vectors"
PAGE = "https://portal.example.com/export"
SITEKEY = "0x4AAAAAAABkMYinukE8nzY"
UNKNOWN_KEY = "ffffffffffffffffffffffffffffffff"


def solver_for(emulator, key=KEY, **config) -> Solver:
    return Solver(key, Config(base_url=emulator.base_url, **config), clock=Clock(TIME_SCALE))


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# -- the exception type comes from the failure class ---------------------------------------------


def failures_in_vectors():
    engine = Engine()
    found = []
    for path in sorted(VECTORS.glob("*.json")):
        vector = json.loads(path.read_text(encoding="utf-8"))
        last = replay(engine, vector)[-1]
        body = last.get("failed") or last.get("rejected")
        if body is not None:
            found.append((path.stem, body))
    return found


FAILURES = failures_in_vectors()


def test_vectors_cover_every_failure_class():
    assert {body["class"] for _, body in FAILURES} == {"permanent", "transient", "unsolvable"}


@pytest.mark.parametrize("name,body", FAILURES, ids=[name for name, _ in FAILURES])
def test_each_vector_failure_raises_the_exception_of_its_class(name, body):
    failure = Failure(code=body["code"], failure_class=FailureClass(body["class"]),
                      origin=FailureOrigin(body["origin"]), message=body["message"],
                      retry_after_ms=body["retry_after_ms"], field=body["field"], task_id=body["task_id"])
    error = failure.to_exception()
    expected = {"permanent": PermanentError, "transient": TransientError, "unsolvable": UnsolvableError}
    assert type(error) is expected[body["class"]]
    assert (error.code, error.message, error.task_id, error.origin.value) == (
        body["code"], body["message"], body["task_id"], body["origin"])
    assert error.retry_after == (None if body["retry_after_ms"] is None else body["retry_after_ms"] / 1000)
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error) and again.failure == failure


# -- against the emulator -------------------------------------------------------------------------


def test_an_invalid_task_is_permanent_before_anything_is_sent(emulator):
    with solver_for(emulator) as solver:
        with pytest.raises(PermanentError) as caught:
            solver.start({"type": "turnstile", "pageurl": PAGE})
    error = caught.value
    assert (error.code, error.field, error.origin, error.task_id) == ("INVALID_TASK", "sitekey", FailureOrigin.INPUT,
                                                                     None)


def test_an_invalid_config_value_is_permanent_naming_the_field(emulator):
    with solver_for(emulator, poll_interval_ms=1000) as solver:
        with pytest.raises(PermanentError) as caught:
            solver.solve(TurnstileTask(SITEKEY, PAGE))
    assert (caught.value.code, caught.value.field) == ("INVALID_CONFIG", "poll_interval_ms")


def test_an_unknown_key_is_permanent_from_the_service(start_emulator):
    emulator = start_emulator("--key", f"{KEY}:5", "--ban-after-bad-keys", "0")
    with solver_for(emulator, key=UNKNOWN_KEY) as solver:
        with pytest.raises(PermanentError) as caught:
            solver.solve(TurnstileTask(SITEKEY, PAGE))
    assert (caught.value.code, caught.value.origin, caught.value.task_id) == (
        "ERROR_KEY_DOES_NOT_EXIST", FailureOrigin.SERVICE, None)


def test_a_dead_plan_is_permanent(start_emulator):
    emulator = start_emulator("--no-plan-key", f"{KEY}:2")
    with solver_for(emulator) as solver:
        with pytest.raises(PermanentError) as caught:
            solver.solve(TurnstileTask(SITEKEY, PAGE))
    assert caught.value.code == "ERROR_ZERO_BALANCE"


def test_an_unsolvable_captcha_raises_unsolvable_with_the_task_id(start_emulator):
    emulator = start_emulator("--key", f"{KEY}:5", "--unsolvable-sitekey", "0x4AAAAAAAUNSOLVABLE",
                              "--solve-time", "all=6000:7000")
    with solver_for(emulator) as solver:
        with pytest.raises(UnsolvableError) as caught:
            solver.solve(TurnstileTask("0x4AAAAAAAUNSOLVABLE", PAGE))
    error = caught.value
    assert error.code == "ERROR_CAPTCHA_UNSOLVABLE" and error.origin == FailureOrigin.SERVICE
    assert error.task_id and error.task_id.isdigit()


def test_no_server_is_transient_from_transport_errors_fed_to_the_engine():
    config = Config(base_url=closed_port_url(), max_submit_retries=1)
    with Solver(KEY, config, clock=Clock(TIME_SCALE)) as solver:
        with pytest.raises(TransientError) as caught:
            solver.solve(TurnstileTask(SITEKEY, PAGE))
    error = caught.value
    assert error.code == "TRANSPORT_ERROR" and error.origin == FailureOrigin.NO_ANSWER and error.task_id is None
    assert error.retry_after is None or error.retry_after > 0


async def test_no_server_is_transient_async_too():
    config = Config(base_url=closed_port_url(), max_submit_retries=1)
    async with AsyncSolver(KEY, config, clock=Clock(TIME_SCALE)) as solver:
        with pytest.raises(TransientError) as caught:
            await solver.solve(TurnstileTask(SITEKEY, PAGE))
    assert caught.value.code == "TRANSPORT_ERROR"


def test_error_pages_are_unreadable_replies_and_transient(start_emulator):
    emulator = start_emulator("--key", f"{KEY}:5", "--html-502-rate", "1")
    with solver_for(emulator, max_submit_retries=1) as solver:
        with pytest.raises(TransientError) as caught:
            solver.solve(TurnstileTask(SITEKEY, PAGE))
    assert caught.value.origin == FailureOrigin.NO_ANSWER


def test_every_failure_is_a_captchaai_error():
    for cls in (PermanentError, TransientError, UnsolvableError):
        assert issubclass(cls, CaptchaAIError)
    assert not issubclass(EngineMisuse, CaptchaAIError) and not issubclass(SnapshotError, CaptchaAIError)


# -- bad input, misuse, snapshots -----------------------------------------------------------------


def test_bad_input_gets_typed_errors():
    with pytest.raises(TypeError):
        Solver(12345)
    with pytest.raises(TypeError):
        Config(deadline_ms="60s")
    with pytest.raises(ValueError):
        Config(deadline_ms=-1)
    with pytest.raises(ValueError):
        Config.from_dict({"deadline": 60_000})
    with pytest.raises(ValueError):
        Solver(KEY, threads=0)
    with Solver(KEY) as solver:
        with pytest.raises(TypeError):
            solver.start(42)
        with pytest.raises(TypeError):
            solver.start({"type": "turnstile", "sitekey": object()})
        with pytest.raises(PermanentError) as caught:
            solver.start("{not json")
        assert caught.value.code == "INVALID_TASK"


def test_a_clock_scale_is_from_0_01_to_10000_like_the_clis():
    for scale in (0.01, 1, 50.0, 10_000):
        assert Clock(scale).scale == scale
    for scale in (0, 0.001, -1, 10_001, 1e300, float("inf"), float("nan"), True, "10"):
        with pytest.raises(ValueError, match="from 0.01 to 10000"):
            Clock(scale)


def test_a_malformed_key_is_refused_without_echoing_it():
    key = "short-KEY-abc"
    with Solver(key) as solver:
        with pytest.raises(PermanentError) as caught:
            solver.start(TurnstileTask(SITEKEY, PAGE))
    assert caught.value.code == "INVALID_KEY"
    assert key not in str(caught.value) and key not in repr(caught.value)


def test_host_misuse_is_its_own_error():
    engine = Engine()
    handle = engine.create(TurnstileTask(SITEKEY, PAGE), KEY, Config(), 1_000)
    output = engine.poll_output(handle, 1_000)
    assert isinstance(output, Send)
    with pytest.raises(EngineMisuse) as caught:
        engine.handle_response(handle, 1_100, output.request.id + 7, Response(200, "OK|1"))
    assert caught.value.kind == "unknown_request"
    with pytest.raises(EngineMisuse) as caught:
        engine.poll_output(handle, 10)
    assert caught.value.kind == "time_went_backwards"
    # The solve is unchanged: the same request is still asked for.
    assert engine.poll_output(handle, 1_200) == output


@pytest.mark.parametrize("snapshot,kind",
                         [("not json", "malformed"), ('{"a":1}', "foreign"), ('{"format":', "truncated")])
def test_unusable_snapshots_raise_snapshot_error(snapshot, kind):
    with Solver(KEY) as solver:
        with pytest.raises(SnapshotError) as caught:
            solver.resume(snapshot)
    assert caught.value.kind == kind


# -- trap recovery --------------------------------------------------------------------------------


class Interrupt(Exception):
    pass


def test_a_trapped_instance_is_replaced_and_in_flight_solves_continue(emulator):
    with solver_for(emulator) as solver:
        pending = solver.start(TurnstileTask(SITEKEY, PAGE))

        def stop(_snapshot: str) -> None:
            raise Interrupt

        with pytest.raises(Interrupt):
            solver.run(pending, on_checkpoint=stop)
        task_id = pending.task_id
        # Make the instance trap for real: no memory may grow, then a large task needs some.
        solver._core._engine._instance.store.set_limits(memory_size=1)
        image = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 900_000).decode()
        big = solver.start({"type": "image", "image": image})  # retried on a fresh instance
        assert solver.recoveries == 1
        solution = solver.run(pending)  # restored from its checkpoint in the new instance
        assert solution.task_id == task_id
        assert big.task_id is None
