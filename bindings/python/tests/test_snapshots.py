"""Snapshot and resume mid-solve continue to the same answer (sync and async, in the same solver
or a new one), and the key is in no snapshot, repr or exception."""

from __future__ import annotations

import importlib.resources
import os
import pickle
from pathlib import Path

import httpx
import pytest

import captchaai_engine
from captchaai_engine import AsyncSolver, Clock, Config, Engine, PermanentError, Solver, TurnstileTask

import required
from conftest import KEY, ROOT, TIME_SCALE

PAGE = "https://portal.example.com/export"
TASK = TurnstileTask("0x4AAAAAAABkMYinukE8nzY", PAGE, proxy="user:secret@203.0.113.7:3128", proxytype="HTTP")


class Interrupt(Exception):
    pass


def interrupt_after(count: int, snapshots: list):
    def checkpoint(snapshot: str) -> None:
        snapshots.append(snapshot)
        if len(snapshots) >= count:
            raise Interrupt

    return checkpoint


def emulator_answer(emulator, task_id: str) -> str:
    """What the emulator holds for the task (it keeps finished tasks queryable)."""
    reply = httpx.post(f"{emulator.base_url}/res.php", data={"key": KEY, "action": "get", "id": task_id, "json": "1"})
    return reply.json()["request"]


def solver(emulator) -> Solver:
    # The first poll comes at 5 s, before the emulator's 6-9 s solves finish: one not-ready poll.
    return Solver(KEY, Config(base_url=emulator.base_url, initial_wait_ms=5000), clock=Clock(TIME_SCALE))


@pytest.mark.parametrize("checkpoints", [1, 2])
def test_resume_in_a_new_solver_continues_to_the_same_answer(emulator, checkpoints):
    snapshots: list = []
    with solver(emulator) as first:
        pending = first.start(TASK)
        assert pending.task_id is None  # nothing submitted yet
        with pytest.raises(Interrupt):
            first.run(pending, on_checkpoint=interrupt_after(checkpoints, snapshots))
        task_id = pending.task_id
    assert task_id
    with solver(emulator) as second:  # a new solver: a new engine instance
        resumed = second.resume(snapshots[-1])
        assert resumed.task_id == task_id
        solution = second.run(resumed)
    assert solution.task_id == task_id and solution.type == "turnstile"
    assert solution.answer == emulator_answer(emulator, task_id)


def test_the_interrupted_solve_itself_also_continues(emulator):
    snapshots: list = []
    with solver(emulator) as s:
        pending = s.start(TASK)
        with pytest.raises(Interrupt):
            s.run(pending, on_checkpoint=interrupt_after(1, snapshots))
        solution = s.run(pending)
        assert s.run(pending) == solution  # a finished solve returns its outcome again
    assert solution.answer == emulator_answer(emulator, solution.task_id)


async def test_async_resume_from_the_same_snapshot_twice_gives_the_same_answer(emulator):
    snapshots: list = []
    config = Config(base_url=emulator.base_url)
    async with AsyncSolver(KEY, config, clock=Clock(TIME_SCALE)) as first:
        pending = await first.start(TASK)
        with pytest.raises(Interrupt):
            await first.run(pending, on_checkpoint=interrupt_after(1, snapshots))
    answers = []
    for _ in range(2):
        async with AsyncSolver(KEY, config, clock=Clock(TIME_SCALE)) as again:
            answers.append((await again.run(await again.resume(snapshots[0]))).answer)
    assert answers[0] == answers[1] == emulator_answer(emulator, pending.task_id)


def test_the_key_is_in_no_snapshot_repr_or_exception(emulator):
    snapshots: list = []
    with solver(emulator) as s:
        pending = s.start(TASK)
        snapshots.append(pending.snapshot())
        s.run(pending, on_checkpoint=snapshots.append)
        solution = s.run(pending)
        texts = [repr(s), str(s), repr(pending), repr(solution), str(solution.to_dict()), repr(s.config),
                 repr(s._core), *snapshots]
        request = Engine().threads_info_request(KEY, s.config)
        texts.append(repr(request))
        assert KEY in request.body  # the body holds the key (it goes to CaptchaAI), its repr does not
    async_solver = AsyncSolver(KEY)
    texts.append(repr(async_solver))
    for bad_key in (KEY[:-1] + "!", KEY + "0"):
        with Solver(bad_key) as bad:
            with pytest.raises(PermanentError) as caught:
                bad.start(TASK)
        error = caught.value
        texts += [str(error), repr(error), repr(error.args), repr(error.failure), pickle.dumps(error).hex()]
        assert bad_key not in " ".join(texts)
    assert len(snapshots) >= 3
    for text in texts:
        assert KEY not in text
        assert KEY.encode().hex() not in text
    assert "secret" not in repr(TASK)  # proxy credentials stay out of the task's repr


def test_the_package_ships_the_built_component():
    shipped = importlib.resources.files(captchaai_engine).joinpath("captchaai_engine.wasm")
    built = Path(os.environ.get("CAPTCHAAI_ENGINE_WASM") or ROOT / "target" / "component" / "captchaai_engine.wasm")
    required.file("the engine component", built, "build it with `cargo xtask component`")
    assert shipped.is_file(), "the installed package has no captchaai_engine.wasm"
    assert shipped.read_bytes() == built.read_bytes(), f"the shipped component differs from {built}"
    assert captchaai_engine._component.wasm_path().resolve() == Path(str(shipped)).resolve()
