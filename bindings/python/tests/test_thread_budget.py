"""The solvers' default thread budget against the emulator: with ``threads=None`` a solver reads
the plan's threads (one ``threadsinfo``) and holds more solves than that until a thread frees, so
solves beyond the plan wait for a thread instead of spending their deadline on CaptchaAI's busy
answers (50 at once on a 5-thread plan lost 15 to DEADLINE_EXCEEDED without it)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from captchaai_engine import AsyncSolver, Clock, Config, PermanentError, Solver, TurnstileTask

from conftest import TIME_SCALE

#: A key of its own, with a 5-thread plan.
PLAN_KEY = "5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a"
PLAN_THREADS = 5
TASK = TurnstileTask("0x4AAAAAAABkMYinukE8nzY", "https://portal.example.com/login")


@pytest.fixture
def plan_emulator(start_emulator):
    """An emulator whose account has PLAN_THREADS threads and solves of 6-9 s (virtual)."""
    return start_emulator("--key", f"{PLAN_KEY}:{PLAN_THREADS}", "--solve-time", "all=6000:9000")


def log(emulator) -> list:
    return httpx.get(f"{emulator.base_url}/_emulator/requests", timeout=10).json()


def check_held_to_the_plan(emulator, solves: int) -> None:
    requests = log(emulator)
    assert [r["action"] for r in requests].count("threadsinfo") == 1, "the plan's threads are read once"
    submits = [r for r in requests if r["path"] == "/in.php"]
    assert len(submits) == solves, "one submit per solve: none was turned away for busy threads"
    assert not [r for r in requests if r["reply_code"] == "ERROR_NO_SLOT_AVAILABLE"]


async def test_async_solver_default_holds_more_solves_than_the_plan_has_threads(plan_emulator):
    config = Config(base_url=plan_emulator.base_url)
    async with AsyncSolver(PLAN_KEY, config, clock=Clock(TIME_SCALE)) as solver:
        solutions = await asyncio.gather(*(solver.solve(TASK) for _ in range(50)))
    assert len(solutions) == 50 and all(solution.answer for solution in solutions)
    check_held_to_the_plan(plan_emulator, 50)


def test_sync_solver_default_holds_more_solves_than_the_plan_has_threads(plan_emulator):
    config = Config(base_url=plan_emulator.base_url)
    with Solver(PLAN_KEY, config, clock=Clock(TIME_SCALE)) as solver, ThreadPoolExecutor(20) as pool:
        solutions = list(pool.map(lambda _: solver.solve(TASK), range(20)))
    assert len(solutions) == 20 and all(solution.answer for solution in solutions)
    check_held_to_the_plan(plan_emulator, 20)


async def test_a_plan_that_cannot_be_read_fails_the_solve_before_anything_is_sent(start_emulator):
    """The key the emulator does not know: threadsinfo's permanent failure, and no submit."""
    emulator = start_emulator("--key", f"{PLAN_KEY}:{PLAN_THREADS}", "--ban-after-bad-keys", "0")
    other = "f" * 32
    async with AsyncSolver(other, Config(base_url=emulator.base_url), clock=Clock(TIME_SCALE)) as solver:
        with pytest.raises(PermanentError):
            await solver.solve(TASK)
    assert [r["action"] for r in log(emulator)] == ["threadsinfo"]
