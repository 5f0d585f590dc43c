"""Adaptive polling from Python: the engine's solve-times model through the WIT (typed errors,
text round trip, the same requests from a reloaded model) and the solvers' use of it (one model
per type, learned from their own solves, saved and continued in a later solver)."""

from __future__ import annotations

import asyncio
import json

import pytest

from captchaai_engine import (
    AsyncSolver,
    Clock,
    Config,
    Engine,
    Response,
    Send,
    Solution,
    Solver,
    SolveTimesError,
    TurnstileTask,
)

from conftest import KEY

# Slower than the other tests' 50x: an answer found at the first poll counts as late (and stops
# the learning) past the table's first wait plus 2.5 s, which at 50x is 50 ms of real latency, a
# margin a loaded CI machine can exceed; at 10x it is 250 ms.
TIME_SCALE = 10.0

TABLE_FIRST_WAIT_MS = 13_000  # Turnstile's first wait in the engine's type table
TASK = TurnstileTask("0x4AAAAAAAB-adaptive", "https://portal.example.com/login")


def fast_solution(i: int) -> Solution:
    """A Turnstile solve answered at its first poll, 4 s after the submit."""
    return Solution(answer="tok", answer_json=None, is_structured=False, task_id=str(1000 + i), type="turnstile",
                    user_agent=None, submitted_at=i * 60_000, solved_at=i * 60_000 + 4_000, elapsed_ms=4_000,
                    polls=1, attempts=1, expires_at=None)


def first_request_times(engine: Engine, times) -> list:
    """The submit's and the first poll's `at` of a solve created at 0 and answered at once."""
    handle = engine.create(TASK, KEY, Config(), 0, times)
    submit = engine.poll_output(handle, 0)
    assert isinstance(submit, Send)
    poll = engine.handle_response(handle, 100, submit.request.id, Response(200, "OK|123"))
    assert isinstance(poll, Send)
    engine.drop(handle)
    return [submit.request.at, poll.request.at]


def test_a_model_learns_and_round_trips_through_its_text():
    engine = Engine()
    times = engine.solve_times("turnstile")
    assert times.task_type == "turnstile"
    assert engine.first_wait_ms(times) is None
    table = first_request_times(engine, None)
    assert first_request_times(engine, times) == table  # under 20 observations: the table
    used = [engine.observe(times, fast_solution(i)) for i in range(40)]
    assert all(used) and engine.observations(times) == 40
    learned = engine.first_wait_ms(times)
    assert learned is not None and learned < TABLE_FIRST_WAIT_MS
    text = engine.solve_times_text(times)
    assert len(text.encode()) <= 1024 and KEY not in text and "tok" not in text
    reloaded = Engine().solve_times_from_text(text)
    assert reloaded.task_type == "turnstile"
    adaptive = first_request_times(engine, times)
    assert adaptive[1] < table[1]
    again = Engine()
    assert first_request_times(again, again.solve_times_from_text(text)) == adaptive


def test_a_resubmitted_solve_is_not_learned_from():
    engine = Engine()
    times = engine.solve_times("turnstile")
    resubmitted = fast_solution(0).__class__(**{**fast_solution(0).__dict__, "attempts": 2})
    assert engine.observe(times, resubmitted) is False
    assert engine.observations(times) == 0


@pytest.mark.parametrize("text, kind", [
    ("not json", "malformed"),
    ('{"format": "something-else"}', "foreign"),
])
def test_a_bad_model_text_is_a_typed_error(text, kind):
    with pytest.raises(SolveTimesError) as error:
        Engine().solve_times_from_text(text)
    assert error.value.kind == kind


def test_an_unknown_type_and_a_model_of_another_type_are_refused():
    engine = Engine()
    with pytest.raises(SolveTimesError) as error:
        engine.solve_times("no_such_type")
    assert error.value.kind == "invalid"
    other = engine.solve_times("recaptcha_v2")
    failure = engine.create(TASK, KEY, Config(), 0, other)
    assert failure.field == "solve_times" and failure.failure_class.value == "permanent"


def test_a_solver_refuses_a_saved_model_under_another_type():
    engine = Engine()
    text = engine.solve_times_text(engine.solve_times("turnstile"))
    with pytest.raises(SolveTimesError, match="model of 'turnstile'") as error:
        Solver(KEY, solve_times={"recaptcha_v2": text})
    assert error.value.kind == "invalid"
    with pytest.raises(SolveTimesError):
        Solver(KEY, solve_times={"turnstile": "{}"})


def test_solvers_learn_from_their_solves_and_continue_from_saved_models(start_emulator):
    # Turnstile answers in 3-4 s (virtual); the table first polls at 13 s.
    emulator = start_emulator("--key", f"{KEY}:60", "--solve-time", "turnstile=3000:4000",
                              time_scale=TIME_SCALE)
    config = Config(base_url=emulator.base_url)

    async def learn() -> dict:
        async with AsyncSolver(KEY, config, clock=Clock(TIME_SCALE)) as solver:
            for _ in range(3):  # waves: a model only applies to solves created after it learned
                solutions = await asyncio.gather(*(solver.solve(TASK) for _ in range(10)))
                assert all(s.polls >= 1 for s in solutions)
            waits = solver.first_waits()
            assert waits["turnstile"] is not None and waits["turnstile"] < TABLE_FIRST_WAIT_MS
            return solver.solve_times()

    saved = asyncio.run(learn())
    assert set(saved) == {"turnstile"} and json.loads(saved["turnstile"])
    assert KEY not in saved["turnstile"]

    with Solver(KEY, config, clock=Clock(TIME_SCALE)) as fresh:
        assert fresh.solve(TASK).elapsed_ms >= TABLE_FIRST_WAIT_MS  # no model: the table
    with Solver(KEY, config, clock=Clock(TIME_SCALE), solve_times=saved) as continued:
        assert continued.first_waits() == {"turnstile": json_wait(saved)}
        assert continued.solve(TASK).elapsed_ms < TABLE_FIRST_WAIT_MS  # answered at the learned first poll


def json_wait(saved: dict) -> int:
    engine = Engine()
    return engine.first_wait_ms(engine.solve_times_from_text(saved["turnstile"]))
