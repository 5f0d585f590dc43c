"""Temporal: solves as durable workflows, on the captchaai-engine package (temporalio 1.35).

The engine runs inside the workflow: its time is the workflow's clock (``workflow.now()``), each
wait is a durable timer (``workflow.sleep``) until the engine's ``request.at``, and each request
is one activity, sent as the engine asks and never retried by Temporal (a request whose reply
never came goes back to the engine as its transport error, and the engine decides). Every
decision is replayed identically, so a worker killed mid-solve loses nothing: another worker
replays the history and carries on from the same point, without a second submit.

- :func:`solve` solves one task from your own workflow (``solution = await solve(task)``);
  :class:`SolveWorkflow` (``captchaai-solve``) is a ready-made workflow around it, to start
  from a client or as a child workflow.
- :class:`CaptchaAI` holds the key and the config on the worker side: ``captchaai.worker(client,
  task_queue=..., workflows=[...])`` builds a worker with your workflows, this module's
  workflows and activities, and a sandbox that passes ``captchaai_engine`` through (wasmtime
  loads once per process, outside the sandbox; the engine is deterministic by construction). A
  workflow reads the worker's settings once per run through a local activity
  (:class:`WorkerSettings`), so replays and other workers use the same ones. The engine runs in
  one instance per process (:class:`_SharedEngine`); the component instance is never part of the
  state: after a cache eviction, a restart or a trap, the solve is rebuilt by replaying the
  history into a fresh one.
- **The key never enters history.** Solves are keyless (the engine's ``keyless-solve``): the
  requests in history hold a placeholder where the key goes. The send activity, on the worker
  that holds the key, inserts it with the engine's ``with-key`` at send time and removes it from
  the reply (``without-key``) before the reply goes into history.
- **One thread budget across workers**: the budget workflow (:class:`BudgetWorkflow`, id
  ``captchaai-budget`` by default, started on first use) holds the engine's thread gate, sized to
  the plan's threads less ``reserve``. A solve signals ``acquire`` and waits for a ``grant``
  signal before the engine creates it (its deadline runs from then), and signals ``release`` when
  it ends, fails or is cancelled. Each grant is a lease that ends by the solve's ``ends-by`` (the
  engine's bound on how long a solve waits on CaptchaAI) plus :data:`LEASE_GRACE`, on the budget
  workflow's clock, so the slot of a solve whose workflow timed out or was terminated without
  its cleanup comes back too. The budget continues as new every :data:`BUDGET_HISTORY_EVENTS`
  events, and runs on the task queue of the worker that started it: keep a worker on it.
- **Adaptive polling**: the budget workflow keeps one solve-times model per captcha type
  (the engine's ``solve-times``); a grant carries the model of the solve's type, the solve is
  created with it, and its ``release`` reports the solution's times (never its answer).
- A failure ends :func:`solve` with an ``ApplicationError`` whose ``type`` is the package's
  exception class (``PermanentError``, ``TransientError``, ``UnsolvableError``), whose details
  hold the engine's failure record, and which is non-retryable when permanent;
  :func:`captchaai_error` turns it (or a workflow or child failure caused by it) back into the
  typed exception.

Use only for portals you own or are licensed to automate.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

import httpx
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy, WorkflowIDConflictPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import TimeoutError as TemporalTimeout
from temporalio.worker import Replayer, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from .._http import PooledTransport
from ..engine import Engine, Failed, KeylessSolveHandle, Send, Solved, SolveTimes
from ..errors import CaptchaAIError, Failure, FailureClass, SolveTimesError
from ..solver import _SEND_ERRORS, HTTP_CONNECTIONS, _transport_kind
from ..tasks import TaskLike, task_json
from ..types import Config, KeylessRequest, RequestKind, Response, Solution, TransportErrorKind
from ._common import ConfigurationError, error_from_json

if workflow.unsafe.in_sandbox():  # pragma: no cover - imported inside a sandbox by mistake
    raise ImportError(
        "captchaai_engine must be passed through Temporal's workflow sandbox (it runs the engine "
        "in wasmtime): build the worker with CaptchaAI.worker(), or use CaptchaAI.sandbox_runner() "
        "as its workflow_runner, or import it inside workflow.unsafe.imports_passed_through()")

__all__ = ["BUDGET_HISTORY_EVENTS", "BUDGET_ID", "BudgetWorkflow", "CaptchaAI", "ConfigurationError",
           "LEASE_GRACE", "SolveInput", "SolveWorkflow", "WorkerSettings", "captchaai_error", "solve"]

BUDGET_ID = "captchaai-budget"
"""The default id of the budget workflow: one per key, shared by every worker and task queue."""
LEASE_GRACE = timedelta(seconds=5)
"""How long a lease outlasts its solve's ``ends-by``: the time a grant may take to reach the solve."""
BUDGET_HISTORY_EVENTS = 1_000
"""The budget workflow continues as new once its history has this many events."""

SOLVE_WORKFLOW = "captchaai-solve"
BUDGET_WORKFLOW = "captchaai-budget"
SEND_ACTIVITY = "captchaai-send"
START_BUDGET_ACTIVITY = "captchaai-start-budget"
SETTINGS_ACTIVITY = "captchaai-settings"
GRANT_SIGNAL = "captchaai-grant"
ACQUIRE_SIGNAL = "acquire"
RELEASE_SIGNAL = "release"

#: A send activity's slack past its request's timeout before Temporal times it out (the
#: activity times the request out itself first).
_SEND_SLACK_S = 5.0

T = TypeVar("T")


# -- what goes through history ---------------------------------------------------------------


@dataclass(frozen=True)
class SolveInput:
    """:class:`SolveWorkflow`'s input: the task in the engine's task format (a dict) and
    optionally ``Config`` fields (a dict) that override the worker's config."""

    task: dict[str, Any]
    config: dict[str, Any] | None = None


@dataclass(frozen=True)
class Outgoing:
    """A keyless request as the send activity's input. It holds no key (the placeholder is where
    the key goes), so it is safe in history. ``body`` is the form text, or the multipart bytes
    as base64; ``timeout_s`` the request's timeout in real seconds."""

    id: int
    kind: str
    at: int
    url: str
    content_type: str
    body: str
    multipart: bool
    timeout_ms: int
    timeout_s: float

    @classmethod
    def of(cls, request: KeylessRequest, time_scale: float) -> Outgoing:
        multipart = isinstance(request.body, bytes)
        body = base64.b64encode(request.body).decode("ascii") if isinstance(request.body, bytes) else request.body
        return cls(request.id, RequestKind(request.kind).value, request.at, request.url, request.content_type,
                   body, multipart, request.timeout_ms, request.timeout_ms / 1000.0 / time_scale)

    def request(self) -> KeylessRequest:
        body: str | bytes = base64.b64decode(self.body) if self.multipart else self.body
        return KeylessRequest(self.id, RequestKind(self.kind), self.at, self.url, self.content_type, body,
                              self.timeout_ms)


@dataclass(frozen=True)
class Reply:
    """What came back for a request, with the key removed: a status and body, or a transport
    error kind (``timeout``, ``connect``, ``broken``)."""

    status: int | None = None
    body: str | None = None
    transport_error: str | None = None


@dataclass(frozen=True)
class Acquire:
    """A solve asks the budget for a thread: ``lease_ms`` is how long it can hold it at most."""

    workflow_id: str
    run_id: str
    seq: int
    task_type: str
    lease_ms: int


@dataclass(frozen=True)
class Grant:
    """The budget admits solve ``seq``: its lease ends at ``expires_at`` (epoch ms, workflow
    time), and ``solve_times`` is the model of its type (None until the type has one)."""

    seq: int
    expires_at: int
    solve_times: str | None = None


@dataclass(frozen=True)
class Release:
    """A solve gives its thread back (or withdraws from the queue); ``observed`` is its solution
    without the answer, for the type's model (None unless solved)."""

    workflow_id: str
    run_id: str
    seq: int
    observed: Solution | None = None


@dataclass
class Holder:
    """A solve the budget holds: running (``expires_at`` set) or queued."""

    workflow_id: str
    run_id: str
    seq: int
    task_type: str
    lease_ms: int
    expires_at: int | None = None

    @property
    def key(self) -> str:
        return f"{self.workflow_id}/{self.run_id}/{self.seq}"


@dataclass
class BudgetState:
    """The budget workflow's input, carried over when it continues as new."""

    plan_threads: int
    reserve: int
    holders: list[Holder] = field(default_factory=list)
    solve_times: dict[str, str] = field(default_factory=dict)
    peak: int = 0


# -- the worker's settings, the engine inside workflows, the clock ----------------------------


@dataclass(frozen=True)
class WorkerSettings:
    """What a worker's :class:`CaptchaAI` tells the workflows it runs (never the key): the
    ``Config`` fields it sets, the time scale, the budget workflow's id and the send activities'
    heartbeat timeout. A workflow reads them once per run, through a local activity, so they are
    in its history: a replay, or another worker, makes the same decisions."""

    config: dict[str, Any]
    time_scale: float
    budget: str | None
    heartbeat_timeout_s: float


class _Run:
    """What :func:`solve` keeps per workflow run: the worker's settings (read once) and the
    ``captchaai-grant`` signal handler with the grants its solves received (by the solve's
    sequence number in the run)."""

    def __init__(self) -> None:
        self.next_seq = 0
        self.granted: dict[int, Grant] = {}
        self._settings: asyncio.Task[WorkerSettings] | None = None

    def on_grant(self, grant: Grant) -> None:
        self.granted[grant.seq] = grant

    @classmethod
    def current(cls) -> _Run:
        run = getattr(workflow.get_signal_handler(GRANT_SIGNAL), "__self__", None)
        if isinstance(run, _Run):
            return run
        run = cls()
        workflow.set_signal_handler(GRANT_SIGNAL, run.on_grant)
        return run

    async def settings(self) -> WorkerSettings:
        if self._settings is None:
            self._settings = asyncio.ensure_future(workflow.execute_local_activity(
                SETTINGS_ACTIVITY, result_type=WorkerSettings, start_to_close_timeout=timedelta(seconds=30),
                summary="CaptchaAI settings"))
        return await asyncio.shield(self._settings)


class _SharedEngine:
    """One engine instance for the workflows of a process, behind a lock (workflow tasks run on
    several threads): a solve in it takes under 2 KiB, an instance of its own about 87 KiB
    resident (measured with 100 instances, wasmtime 50). A trapped instance is replaced; the
    solves that lived in it fail their workflow task and are replayed from history into the new
    one.

    A resource a workflow makes (a solve, a thread gate) is registered with :meth:`keep` and
    freed with :meth:`free`, which only queues the freeing for the next call: the cleanup of a
    workflow coroutine may run inside the garbage collector (the SDK drops replayed and evicted
    instances), that is inside another engine call on the same thread, which would otherwise
    wait on its own lock. Kept here until then, the resource is never part of the collected
    cycle: otherwise the collector may finalize its wasmtime handle before the coroutine's cleanup
    runs, and the queued drop fails ("already closed") in the next workflow's task."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._engine: Engine | None = None
        self._to_free: list[tuple[object, Callable[[Engine], Any]]] = []
        self._kept: dict[int, object] = {}

    def __call__(self, fn: Callable[[Engine], T]) -> T:
        with self._lock:
            if self._engine is None or self._engine.trapped:
                self._engine = Engine()
            while self._to_free:
                owner, free = self._to_free.pop()
                try:
                    free(self._engine)
                finally:
                    self._kept.pop(id(owner), None)
            return fn(self._engine)

    def keep(self, owner: object) -> None:
        """Holds ``owner`` (a solve handle, a thread gate) until :meth:`free` frees it."""
        self._kept[id(owner)] = owner  # atomic: no lock taken

    def free(self, owner: object, fn: Callable[[Engine], Any]) -> None:
        """Frees ``owner`` with ``fn`` at the next engine call."""
        self._to_free.append((owner, fn))  # atomic: no lock taken


_engine = _SharedEngine()


def _workflow_ms() -> int:
    return int(workflow.now().timestamp() * 1000)


class _Clock:
    """The engine's time in a workflow: ``workflow.now()`` in epoch ms, run ``scale`` times faster
    from the moment the clock is made (scale 1: the workflow's own clock; other scales only for
    tests against an emulator started with the same ``--time-scale``)."""

    def __init__(self, scale: float) -> None:
        self.scale = scale
        self.origin = _workflow_ms()

    def now(self) -> int:
        return self.origin + int((_workflow_ms() - self.origin) * self.scale)

    def real_ms(self, virtual_ms: int) -> int:
        return math.ceil(virtual_ms / self.scale)

    async def sleep_until(self, at: int) -> None:
        """Durable timers until the engine's time reaches ``at``."""
        while (now := self.now()) < at:
            await workflow.sleep(timedelta(milliseconds=max(1, self.real_ms(at - now))))


# -- failures ---------------------------------------------------------------------------------


def _application_error(failure: Failure) -> ApplicationError:
    """The workflow-failing form of the engine's failure: its class as the type, its record as
    the details (never a key: the engine's fields only)."""
    exception = failure.to_exception()
    return ApplicationError(f"{failure.code}: {failure.message}", failure.to_dict(),
                            type=type(exception).__name__,
                            non_retryable=failure.failure_class is FailureClass.PERMANENT)


def captchaai_error(error: BaseException) -> CaptchaAIError | None:
    """The package's typed exception (``PermanentError``, ``TransientError``,
    ``UnsolvableError``) for a failure :func:`solve` raised, found in ``error`` or its causes (a
    ``WorkflowFailureError``, ``ChildWorkflowError`` or ``ActivityError`` around it); None if
    there is none."""
    current: BaseException | None = error
    for _ in range(16):  # causes nest a few levels deep at most
        if current is None:
            return None
        if isinstance(current, CaptchaAIError):
            return current
        if isinstance(current, ApplicationError) and current.type in _FAILURE_TYPES and current.details:
            return error_from_json(current.details[0])
        current = getattr(current, "cause", None) or current.__cause__
    return None


_FAILURE_TYPES = ("PermanentError", "TransientError", "UnsolvableError")


# -- the budget -------------------------------------------------------------------------------


class _Lease:
    """A solve's place in the budget: acquired, granted, released exactly once."""

    def __init__(self, run: _Run, budget_id: str, task_type: str, lease_ms: int) -> None:
        info = workflow.info()
        self.budget_id = budget_id
        self.grants = run
        self.seq = run.next_seq
        run.next_seq += 1
        self.acquire = Acquire(info.workflow_id, info.run_id, self.seq, task_type, lease_ms)
        self.held = False

    async def _signal(self, name: str, arg: Any) -> None:
        await workflow.get_external_workflow_handle(self.budget_id).signal(name, arg)

    async def wait(self) -> Grant:
        """Asks for a thread (starting the budget workflow if it does not run) and waits for it."""
        self.held = True
        while True:
            try:
                await self._signal(ACQUIRE_SIGNAL, self.acquire)
            except ApplicationError:  # the budget workflow does not run: start it, then ask again
                try:
                    await workflow.execute_activity(
                        START_BUDGET_ACTIVITY, self.budget_id, start_to_close_timeout=timedelta(minutes=1),
                        retry_policy=RetryPolicy(maximum_attempts=5, non_retryable_error_types=[
                            "PermanentError", "ConfigurationError"]))
                except ActivityError as error:  # the plan could not be read: the engine's failure
                    self.held = False
                    raise _unwrapped(error) from None
                await self._signal(ACQUIRE_SIGNAL, self.acquire)
            await workflow.wait_condition(lambda: self.seq in self.grants.granted)
            grant = self.grants.granted.pop(self.seq)
            # A grant that took longer to arrive than the lease's grace would leave the solve
            # running past its lease: give it back and queue again.
            if _workflow_ms() + self.acquire.lease_ms <= grant.expires_at:
                return grant
            await self.release(None)
            self.held = True

    async def release(self, observed: Solution | None) -> None:
        if self.held:
            self.held = False
            info = self.acquire
            try:
                await self._signal(RELEASE_SIGNAL, Release(info.workflow_id, info.run_id, self.seq, observed))
            except ApplicationError:  # the budget workflow ended: it holds nothing of this solve
                pass


def _unwrapped(error: ActivityError) -> BaseException:
    """The activity's own ``ApplicationError`` (its type and details), else ``error``."""
    cause = error.cause
    unwrapped: BaseException = error
    if isinstance(cause, ApplicationError):
        unwrapped = ApplicationError(cause.message, *cause.details, type=cause.type, non_retryable=cause.non_retryable)
    return unwrapped


@workflow.defn(name=BUDGET_WORKFLOW)
class BudgetWorkflow:
    """The thread budget of one key across every worker: the engine's thread gate (the plan's
    threads less the reserve), leases that end by each solve's ``ends-by`` plus
    :data:`LEASE_GRACE`, and one solve-times model per captcha type. Query ``state`` for its
    capacity, running and queued solves and the most that ran at once."""

    def __init__(self) -> None:
        self._inbox: list[Acquire | Release | int] = []
        self._summary: dict[str, int] = {}

    @workflow.signal(name=ACQUIRE_SIGNAL)
    def acquire(self, request: Acquire) -> None:
        self._inbox.append(request)

    @workflow.signal(name=RELEASE_SIGNAL)
    def release(self, request: Release) -> None:
        self._inbox.append(request)

    @workflow.signal(name="set_plan")
    def set_plan(self, plan_threads: int) -> None:
        """A new plan size (for operators: ``temporal workflow signal --name set_plan``)."""
        self._inbox.append(plan_threads)

    @workflow.query(name="state")
    def state(self) -> dict[str, int]:
        return dict(self._summary)

    @workflow.run
    async def run(self, state: BudgetState) -> None:
        gate = _engine(lambda engine: engine.thread_gate(state.plan_threads, state.reserve))
        if isinstance(gate, Failure):
            raise _application_error(gate)
        _engine.keep(gate)
        try:
            await self._serve(gate, state)
        finally:
            _engine.free(gate, lambda engine: gate.drop())

    async def _serve(self, gate: Any, state: BudgetState) -> None:
        holders: dict[int, Holder] = {}
        by_key: dict[str, int] = {}
        models = dict(state.solve_times)
        peak, plan = state.peak, state.plan_threads
        to_grant: list[int] = []

        def enter(holder: Holder) -> None:
            ticket, (admission, _) = _engine(lambda engine: gate.enter())
            holders[ticket] = holder
            by_key[holder.key] = ticket
            if admission == "admitted" and holder.expires_at is None:
                to_grant.append(ticket)

        def leave(ticket: int) -> None:
            holder = holders.pop(ticket)
            by_key.pop(holder.key, None)
            admitted = _engine(lambda engine: gate.leave(ticket)) or []
            to_grant.extend(admitted)

        # Carried over: the running ones first (their leases go on), then the queue in order.
        for holder in sorted(state.holders, key=lambda h: h.expires_at is None):
            enter(holder)

        while True:
            now = _workflow_ms()
            for message in self._inbox:
                if isinstance(message, int):
                    admitted = _engine(lambda engine: gate.set_plan(message))  # noqa: B023 (called at once)
                    if isinstance(admitted, Failure):
                        workflow.logger.warning("captchaai: plan of %d threads refused: %s", message, admitted.message)
                    else:
                        plan = message
                        to_grant.extend(admitted)
                elif isinstance(message, Acquire):
                    holder = Holder(message.workflow_id, message.run_id, message.seq, message.task_type,
                                    message.lease_ms)
                    if holder.key not in by_key:
                        enter(holder)
                else:
                    ticket = by_key.get(f"{message.workflow_id}/{message.run_id}/{message.seq}")
                    if ticket is not None:
                        kind = holders[ticket].task_type
                        leave(ticket)
                        if message.observed is not None:
                            models[kind] = _observed(models.get(kind), kind, message.observed)
            self._inbox.clear()
            for ticket, holder in list(holders.items()):
                if holder.expires_at is not None and holder.expires_at <= now:
                    leave(ticket)
            # Continued as new here, with every message taken in and nothing awaited since: under a
            # steady stream of signals the inbox is never empty, so a check after the wait would
            # never run (1,000 solves at once grew one run to 15,425 events, whose replays outlasted
            # the SDK's 2 s deadlock bound). Admitted holders not yet granted (no lease yet) go over
            # as queued, after the running ones: the new run admits and grants them.
            if workflow.info().get_current_history_length() >= BUDGET_HISTORY_EVENTS:
                ordered = sorted(holders.items(), key=lambda item: (item[1].expires_at is None, item[0]))
                workflow.continue_as_new(BudgetState(plan, state.reserve, [holder for _, holder in ordered],
                                                     models, peak))
            # Grants go out together; a holder that is gone (its workflow ended) is let go.
            granted, to_grant[:] = [t for t in to_grant if t in holders], []
            for ticket in granted:
                holder = holders[ticket]
                holder.expires_at = now + holder.lease_ms + int(LEASE_GRACE.total_seconds() * 1000)
            results = await asyncio.gather(*(self._grant(holders[t], models) for t in granted), return_exceptions=True)
            for ticket, result in zip(granted, results, strict=False):
                if isinstance(result, ApplicationError) and ticket in holders:
                    leave(ticket)
                elif isinstance(result, BaseException):
                    raise result
            running = _engine(lambda engine: gate.running)
            peak = max(peak, running)
            self._summary = {"capacity": _engine(lambda engine: gate.capacity), "running": running,
                             "queued": _engine(lambda engine: gate.queued), "peak": peak}
            if to_grant or self._inbox:
                continue
            expiries = [h.expires_at for h in holders.values() if h.expires_at is not None]
            timeout = None if not expiries else max(0.001, (min(expiries) - now) / 1000.0)
            try:
                await workflow.wait_condition(lambda: bool(self._inbox), timeout=timeout)
            except asyncio.TimeoutError:
                pass

    async def _grant(self, holder: Holder, models: Mapping[str, str]) -> None:
        handle = workflow.get_external_workflow_handle(holder.workflow_id, run_id=holder.run_id)
        await handle.signal(GRANT_SIGNAL, Grant(holder.seq, holder.expires_at or 0,
                                                models.get(holder.task_type)))


def _observed(text: str | None, kind: str, solution: Solution) -> str:
    """The model of type ``kind`` (from ``text``, or empty) after it observed ``solution``."""
    def learn(engine: Engine) -> str:
        try:
            times = engine.solve_times_from_text(text) if text else engine.solve_times(kind)
        except SolveTimesError:
            times = engine.solve_times(kind)
        try:
            engine.observe(times, solution)
            return engine.solve_times_text(times)
        finally:
            engine.drop_times(times)

    return _engine(learn)


# -- solving ----------------------------------------------------------------------------------


async def solve(task: TaskLike, *, config: Config | None = None) -> Solution:
    """Solves ``task`` from inside a workflow; returns the :class:`Solution` or raises an
    ``ApplicationError`` with the engine's failure (:func:`captchaai_error` reads it). The
    fields ``config`` sets override the worker's ``CaptchaAI`` config for this solve. Solves of
    one workflow may run concurrently (``asyncio.gather``)."""
    run = _Run.current()
    settings = await run.settings()
    config = Config.from_dict({**settings.config, **(config.to_dict() if config is not None else {})})
    try:
        text = task_json(task)
    except (TypeError, ValueError) as error:  # not a task at all (the engine checks the task itself)
        raise ApplicationError(f"the task: {error}", type="ConfigurationError", non_retryable=True) from None
    clock = _Clock(settings.time_scale)
    # The engine checks the task first (nothing is sent, no thread taken), and says how long a
    # solve of it can hold a thread at most (its ends-by, from its creation).
    checked = _engine(lambda engine: _probe(engine, text, config, clock.now()))
    if isinstance(checked, Failure):
        raise _application_error(checked)
    kind, lease_virtual_ms = checked
    lease = _Lease(run, settings.budget, kind, clock.real_ms(lease_virtual_ms)) if settings.budget else None
    try:
        grant = await lease.wait() if lease is not None else None
        solution = await _drive(text, config, _Clock(settings.time_scale), grant, settings)
    except GeneratorExit:
        # Closed by the garbage collector (a replayed or evicted instance the SDK dropped): this
        # may run while another workflow is active, so it must issue no command.
        raise
    except BaseException:  # failed, cancelled, or evicted (the SDK then refuses the signal)
        if lease is not None:
            await lease.release(None)
        raise
    if lease is not None:
        await lease.release(dataclasses.replace(solution, answer="", answer_json=None, is_structured=False))
    return solution


def _probe(engine: Engine, text: str, config: Config, now: int) -> tuple[str, int] | Failure:
    created = engine.create_keyless(text, config, now)
    if isinstance(created, Failure):
        return created
    try:
        return created.task_type, (engine.ends_by(created) or now) - now
    finally:
        engine.drop(created)


async def _drive(text: str, config: Config, clock: _Clock, grant: Grant | None,
                 settings: WorkerSettings) -> Solution:
    def create(engine: Engine) -> KeylessSolveHandle | Failure:
        times: SolveTimes | None = None
        if grant is not None and grant.solve_times:
            try:
                times = engine.solve_times_from_text(grant.solve_times)
            except SolveTimesError:
                times = None
        try:
            return engine.create_keyless(text, config, clock.now(), times)
        finally:
            if times is not None:
                engine.drop_times(times)

    handle = _engine(create)
    if isinstance(handle, Failure):
        raise _application_error(handle)
    _engine.keep(handle)
    try:
        output = _engine(lambda engine: engine.poll_output(handle, clock.now()))
        while isinstance(output, Send):
            request = output.request
            await clock.sleep_until(request.at)
            reply = await _send(request, settings)
            output = _engine(lambda engine: _feed(engine, handle, clock.now(), request.id, reply))  # noqa: B023
        if isinstance(output, Failed):
            raise _application_error(output.failure)
        assert isinstance(output, Solved)
        return output.solution
    finally:
        _engine.free(handle, lambda engine: engine.drop(handle) if handle._engine is engine else None)


def _feed(engine: Engine, handle: KeylessSolveHandle, now: int, request_id: int, reply: Reply) -> Any:
    if reply.transport_error is not None:
        return engine.handle_transport_error(handle, now, request_id, TransportErrorKind(reply.transport_error))
    return engine.handle_response(handle, now, request_id, Response(reply.status or 0, reply.body or ""))


async def _send(request: KeylessRequest, settings: WorkerSettings) -> Reply:
    """One request as one activity, never retried by Temporal. An activity that ends without a
    reply (its worker died: the heartbeat or its timeout ran out) is the engine's transport error
    ``timeout``; the engine decides what follows."""
    outgoing = Outgoing.of(request, settings.time_scale)
    try:
        return await workflow.execute_activity(  # type: ignore[no-any-return]
            SEND_ACTIVITY, outgoing, result_type=Reply,
            start_to_close_timeout=timedelta(seconds=outgoing.timeout_s + _SEND_SLACK_S),
            heartbeat_timeout=timedelta(seconds=settings.heartbeat_timeout_s),
            retry_policy=RetryPolicy(maximum_attempts=1),
            summary=f"{outgoing.kind} {outgoing.id}")
    except ActivityError as error:
        kind = TransportErrorKind.TIMEOUT if isinstance(error.cause, TemporalTimeout) else TransportErrorKind.BROKEN
        return Reply(transport_error=kind.value)


@workflow.defn(name=SOLVE_WORKFLOW)
class SolveWorkflow:
    """Solves one task (:class:`SolveInput`) and returns its :class:`Solution`, or fails with the
    engine's failure: start it from a client, or as a child workflow."""

    @workflow.run
    async def run(self, request: SolveInput) -> Solution:
        try:
            config = Config.from_dict(request.config) if request.config is not None else None
        except (TypeError, ValueError) as error:
            raise ApplicationError(
                f"SolveInput.config: {error}", type="ConfigurationError", non_retryable=True
            ) from None
        return await solve(request.task, config=config)


# -- the worker side --------------------------------------------------------------------------


class CaptchaAI:
    """The worker side: the key, the config and the activities that send requests. The key
    stays on the worker (never in an activity input or result); ``config`` (a :class:`Config`;
    ``base_url`` points at CaptchaAI by default) is what :func:`solve` uses (the fields a solve's
    own config sets override it). A workflow reads these settings once per run from the worker
    that runs it first (:class:`WorkerSettings`, kept in its history).

    ``budget`` is the budget workflow's id (None: no shared thread budget, no shared model);
    ``reserve`` threads of the plan are kept free for other clients of the key.
    ``heartbeat_timeout`` bounds how long a request whose worker died goes unnoticed.
    ``time_scale`` is only for tests against an emulator started with the same
    ``--time-scale``."""

    def __init__(self, api_key: str, config: Config | None = None, *, budget: str | None = BUDGET_ID,
                 reserve: int = 1, heartbeat_timeout: timedelta = timedelta(seconds=10),
                 time_scale: float = 1.0, http_client: httpx.AsyncClient | None = None) -> None:
        if config is not None and not isinstance(config, Config):
            raise TypeError(f"config must be a captchaai_engine.Config, not {type(config).__name__}")
        if isinstance(reserve, bool) or not isinstance(reserve, int) or reserve < 0:
            raise ValueError(f"reserve must be an int of at least 0 (got {reserve!r})")
        if not isinstance(time_scale, (int, float)) or isinstance(time_scale, bool) or not time_scale > 0:
            raise ValueError(f"time_scale must be a positive number (got {time_scale!r})")
        self.config = config or Config()
        self._engine = Engine()  # compiles the component now, not inside a workflow task
        checked = self._engine.threads_info_request(api_key, self.config)
        if isinstance(checked, Failure):  # a malformed key or config: the engine's words, no key
            raise checked.to_exception()
        self._key = api_key
        self._engine_lock = threading.Lock()
        self.budget = budget
        self.reserve = reserve
        self.heartbeat_timeout = heartbeat_timeout
        self.time_scale = float(time_scale)
        self._http = http_client

    def __repr__(self) -> str:  # never the key
        return f"CaptchaAI(config={self.config!r}, budget={self.budget!r}, reserve={self.reserve})"

    @property
    def workflows(self) -> list[type]:
        """This module's workflows, for a worker's ``workflows``."""
        return [SolveWorkflow, BudgetWorkflow]

    @property
    def activities(self) -> list[Callable[..., Any]]:
        """This key's activities, for a worker's ``activities``."""
        return [self.send, self.start_budget, self.settings]

    @staticmethod
    def sandbox_runner(restrictions: SandboxRestrictions | None = None) -> SandboxedWorkflowRunner:
        """Temporal's sandbox with ``captchaai_engine`` passed through: the engine (wasmtime) is
        loaded once per process, outside the sandbox, and is deterministic by construction (its
        only inputs are the workflow's time and the activities' results)."""
        base = restrictions or SandboxRestrictions.default
        return SandboxedWorkflowRunner(restrictions=base.with_passthrough_modules("captchaai_engine"))

    def worker(self, client: Client, *, task_queue: str, workflows: Sequence[type] = (),
               activities: Sequence[Callable[..., Any]] = (), **options: Any) -> Worker:
        """A worker for ``task_queue`` with ``workflows`` and ``activities`` plus this module's, and
        the sandbox runner; other options go to ``temporalio.worker.Worker``."""
        options.setdefault("workflow_runner", self.sandbox_runner())
        return Worker(client, task_queue=task_queue, workflows=[*workflows, *self.workflows],
                      activities=[*activities, *self.activities], **options)

    @classmethod
    def replayer(cls, workflows: Sequence[type] = (), **options: Any) -> Replayer:
        """A ``Replayer`` for histories of ``workflows`` and this module's, with the sandbox
        runner (it needs no worker: the worker's settings are in each history)."""
        options.setdefault("workflow_runner", cls.sandbox_runner())
        return Replayer(workflows=[*workflows, SolveWorkflow, BudgetWorkflow], **options)

    def _with_engine(self, fn: Callable[[Engine], T]) -> T:
        with self._engine_lock:
            if self._engine.trapped:
                self._engine = Engine()
            return fn(self._engine)

    def _http_client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(transport=PooledTransport(max_idle=HTTP_CONNECTIONS))
        return self._http

    @activity.defn(name=SEND_ACTIVITY)
    async def send(self, outgoing: Outgoing) -> Reply:
        """Sends one request: the key inserted here (the engine's ``with-key``), the reply
        returned with the key removed (``without-key``). Heartbeats while it waits."""
        request = self._with_engine(lambda engine: engine.with_key(outgoing.request(), self._key))
        beating = asyncio.ensure_future(_heartbeat(self.heartbeat_timeout))
        try:
            reply = await asyncio.wait_for(
                self._http_client().post(request.url, content=request.body_bytes,
                                         headers={"content-type": request.content_type},
                                         timeout=outgoing.timeout_s),
                outgoing.timeout_s)
        except _SEND_ERRORS as error:
            return Reply(transport_error=_transport_kind(error).value)
        finally:
            beating.cancel()
        response = self._with_engine(
            lambda engine: engine.without_key(Response.from_bytes(reply.status_code, reply.content), self._key))
        return Reply(status=response.status, body=response.body)

    @activity.defn(name=SETTINGS_ACTIVITY)
    async def settings(self) -> WorkerSettings:
        """This worker's settings for the workflows it runs (a local activity; never the key)."""
        return WorkerSettings(self.config.to_dict(), self.time_scale, self.budget,
                              self.heartbeat_timeout.total_seconds())

    @activity.defn(name=START_BUDGET_ACTIVITY)
    async def start_budget(self, budget_id: str) -> None:
        """Starts the budget workflow ``budget_id`` on this task queue if it does not run, sized to
        the plan's threads (one ``threadsinfo``) less ``reserve``."""
        request = self._with_engine(lambda engine: engine.threads_info_request(self._key, self.config))
        if isinstance(request, Failure):
            raise _application_error(request)
        try:
            reply = await self._http_client().post(
                request.url, content=request.body_bytes, headers={"content-type": request.content_type},
                timeout=request.timeout_ms / 1000.0 / self.time_scale)
            result: Response | TransportErrorKind = Response.from_bytes(reply.status_code, reply.content)
        except _SEND_ERRORS as error:
            result = _transport_kind(error)
        info = self._with_engine(lambda engine: engine.parse_threads_info(result))
        if isinstance(info, Failure):
            raise _application_error(info)
        capacity = self._with_engine(lambda engine: engine.thread_capacity(info.threads, self.reserve))
        if isinstance(capacity, Failure):
            raise ApplicationError(f"{capacity.message}: lower the CaptchaAI reserve", type="ConfigurationError",
                                   non_retryable=True)
        await activity.client().start_workflow(
            BUDGET_WORKFLOW, BudgetState(info.threads, self.reserve), id=budget_id,
            task_queue=activity.info().task_queue, id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING)


async def _heartbeat(timeout: timedelta) -> None:
    """Heartbeats a few times per ``timeout`` while a request is out."""
    period = max(0.05, timeout.total_seconds() / 4)
    while True:
        activity.heartbeat()
        await asyncio.sleep(period)
