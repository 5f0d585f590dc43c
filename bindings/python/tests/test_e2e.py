"""End to end against the emulator over loopback: one solve per captcha family, sync and async,
through the typed tasks (and plain dicts), with time running TIME_SCALE times faster."""

from __future__ import annotations

import asyncio
import base64
import struct

import httpx
import pytest

from captchaai_engine import (
    AsyncSolver,
    BlsTask,
    CaptchaFoxTask,
    Clock,
    CloudflareChallengeTask,
    Config,
    FriendlyCaptchaTask,
    GeeTestTask,
    GeeTestV4Task,
    GridTask,
    ImageTask,
    LeminTask,
    PermanentError,
    RecaptchaV2EnterpriseTask,
    RecaptchaV2Task,
    RecaptchaV3EnterpriseTask,
    RecaptchaV3Task,
    Solution,
    Solver,
    TurnstileTask,
)

from conftest import KEY, TIME_SCALE

GOOGLEKEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
PAGE = "https://portal.example.com/export"
PROXY = {"proxy": "user:pass@203.0.113.7:3128", "proxytype": "HTTP"}


def png(side: int) -> bytes:
    """A tiny but valid PNG header followed by filler, over 100 bytes."""
    data = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + struct.pack(">II", side, side)
    return data + b"\x07" * (160 - len(data))


def tasks():
    image = png(60)
    return {
        "recaptcha_v2": RecaptchaV2Task(GOOGLEKEY, PAGE, invisible=True),
        "recaptcha_v2_enterprise": RecaptchaV2EnterpriseTask(GOOGLEKEY, PAGE),
        "recaptcha_v3": RecaptchaV3Task(GOOGLEKEY, PAGE, "verify", min_score=0.3),
        "recaptcha_v3_enterprise": RecaptchaV3EnterpriseTask(GOOGLEKEY, PAGE, "login"),
        "turnstile": TurnstileTask("0x4AAAAAAABkMYinukE8nzY", PAGE, action="login"),
        "cloudflare_challenge": CloudflareChallengeTask(PAGE, **PROXY),
        "geetest_v3": GeeTestTask("81388ea1fc187e0c335c0a8907ff2625", "12345678abc90123d45678ef90123a456b", PAGE),
        "geetest_v4": GeeTestV4Task("e392e1d7fd421dc63325744d5a2b9c73", PAGE),
        "captchafox": CaptchaFoxTask("sk_11111111111111111111", PAGE, **PROXY),
        "friendly_captcha": FriendlyCaptchaTask("FCMGEMUD2KTDSQ5H", PAGE, version="v2"),
        "lemin": LeminTask("CROPPED_3dfdd5c_d1872b526b794d83", "lemin-cropped-captcha", PAGE),
        "image": ImageTask(image, numeric=1),
        "image_multipart": ImageTask(base64.b64encode(image).decode(), upload="multipart"),
        "image_sync": ImageTask(image, sync=True),
        "grid": GridTask(image, "buses"),
        "bls": BlsTask("664", [png(100)] * 9),
        # A plain dict is a task too.
        "turnstile_dict": {"type": "turnstile", "sitekey": "0x4AAAAAAABkMYinukE8nzY", "pageurl": PAGE},
    }


TASKS = tasks()
STRUCTURED = {"geetest_v3", "geetest_v4", "lemin", "grid", "bls"}


def check(name: str, solution: Solution) -> None:
    assert isinstance(solution, Solution)
    assert solution.answer, f"{name}: empty answer"
    task = TASKS[name]
    assert solution.type == (task["type"] if isinstance(task, dict) else task.type)
    assert solution.is_structured == (name in STRUCTURED), name
    if solution.is_structured:
        assert isinstance(solution.answer_json, (dict, list)), name
    else:
        assert solution.answer_json is None
    if name != "image_sync":
        assert solution.task_id, f"{name}: no task id"
    assert solution.solved_at >= solution.submitted_at
    assert solution.attempts == 1
    assert KEY not in repr(solution) and KEY not in str(solution.to_dict())


def config(emulator) -> Config:
    return Config(base_url=emulator.base_url)


@pytest.mark.parametrize("name", list(TASKS))
def test_sync_solve_per_family(emulator, name):
    with Solver(KEY, config(emulator), clock=Clock(TIME_SCALE)) as solver:
        check(name, solver.solve(TASKS[name]))


@pytest.mark.parametrize("name", list(TASKS))
async def test_async_solve_per_family(emulator, name):
    async with AsyncSolver(KEY, config(emulator), clock=Clock(TIME_SCALE)) as solver:
        check(name, await solver.solve(TASKS[name]))


def test_a_token_is_fresh_until_it_expires(emulator):
    with Solver(KEY, config(emulator), clock=Clock(TIME_SCALE)) as solver:
        solution = solver.solve(TASKS["recaptcha_v2"])
    assert solution.expires_at is not None  # reCAPTCHA tokens live 120 s
    solved_s = solution.solved_at / 1000
    assert solution.is_fresh(now=solved_s + 1)
    assert not solution.is_fresh(now=solved_s + 1, max_age=0.5)
    assert not solution.is_fresh(now=solution.expires_at / 1000 + 1)


def test_account_calls(emulator):
    with Solver(KEY, config(emulator), clock=Clock(TIME_SCALE)) as solver:
        info = solver.threads_info()
        assert info.threads == 5 and 0 <= info.working_threads <= 5 and info.free == 5 - info.working_threads
        assert isinstance(solver.balance(), float)


async def test_async_account_calls(emulator):
    async with AsyncSolver(KEY, config(emulator), clock=Clock(TIME_SCALE)) as solver:
        assert (await solver.threads_info()).threads == 5
        assert isinstance(await solver.balance(), float)


def test_a_caller_supplied_client_is_used_and_left_open(emulator):
    sent = []
    with httpx.Client(event_hooks={"request": [lambda request: sent.append(request.url.path)]}) as client:
        with Solver(KEY, config(emulator), client=client, clock=Clock(TIME_SCALE)) as solver:
            solver.solve(TASKS["turnstile"])
        assert not client.is_closed
    # threadsinfo (the plan's threads: the default budget), the submit, then the polls
    assert sent[:2] == ["/res.php", "/in.php"] and set(sent[2:]) == {"/res.php"}


def test_the_thread_budget_gate_serializes_sync_solves(emulator):
    """threads=1: solves run one after another (their in-flight intervals never overlap)."""
    import threading

    spans = {}
    with Solver(KEY, config(emulator), threads=1, clock=Clock(TIME_SCALE)) as solver:
        def one(i: int) -> None:
            times = []
            solver.run(solver.start(TASKS["turnstile"]), on_checkpoint=lambda _s: times.append(solver.clock.now_ms()))
            spans[i] = (times[0], times[-1])

        threads = [threading.Thread(target=one, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    assert len(spans) == 3
    ordered = sorted(spans.values())
    for (_, end), (start, _) in zip(ordered, ordered[1:], strict=False):
        assert end < start, f"two solves were in flight at once: {ordered}"


async def test_the_thread_budget_gate_caps_async_solves(emulator):
    """threads=2 with 5 solves: never more than 2 in flight, and the budget is used."""
    in_flight = 0
    peak = 0
    async with AsyncSolver(KEY, config(emulator), threads=2, clock=Clock(TIME_SCALE)) as solver:
        async def one() -> None:
            nonlocal in_flight, peak
            first = True

            def checkpoint(_snapshot: str) -> None:
                nonlocal in_flight, peak, first
                if first:
                    first = False
                    in_flight += 1
                    peak = max(peak, in_flight)

            await solver.run(await solver.start(TASKS["turnstile"]), on_checkpoint=checkpoint)
            in_flight -= 1

        await asyncio.gather(*(one() for _ in range(5)))
    assert peak == 2


async def test_a_queued_solve_starts_its_deadline_when_admitted(emulator):
    """threads=1, three Turnstile solves of about 13 s each (virtual) with 20 s deadlines: created
    up front, the later ones would expire in the queue without sending anything."""
    cfg = Config(base_url=emulator.base_url, deadline_ms=20_000)
    async with AsyncSolver(KEY, cfg, threads=1, clock=Clock(TIME_SCALE)) as solver:
        solutions = await asyncio.gather(*(solver.solve(TASKS["turnstile"]) for _ in range(3)))
    assert all(solution.answer for solution in solutions)
    with Solver(KEY, cfg, threads=1, clock=Clock(TIME_SCALE)) as solver:
        with pytest.raises(PermanentError):  # a refused task fails at once, before any wait
            solver.solve({"type": "turnstile", "pageurl": "not a url"})


def test_a_bad_checkpoint_callback_is_refused_before_anything_is_sent(emulator):
    with Solver(KEY, config(emulator), clock=Clock(TIME_SCALE)) as solver:
        pending = solver.start(TASKS["turnstile"])
        with pytest.raises(TypeError, match="on_checkpoint"):
            solver.run(pending, on_checkpoint=5)
        assert pending.task_id is None, "no paid task was left behind"
        assert solver.run(pending).answer
