"""Drivers: :class:`Solver` (sync, httpx.Client) and :class:`AsyncSolver` (asyncio,
httpx.AsyncClient), with the same surface.

They hold no protocol knowledge. The engine says what to send and when (``request.at``), how long
a request may take (``request.timeout_ms``), what each reply means and when the solve ends; the
drivers sleep, send the bytes, and feed back what came back (a reply, or the WIT transport-error
kind). Every solve keeps a checkpoint (the snapshot's base once, its state after each result), so
if the engine instance traps it is replaced and the solves continue from their checkpoints.

Adaptive polling: each solver keeps one solve-times model per captcha type (the engine's
``solve-times``), learns from every solved solve and creates new solves of that type with it, so
they poll on the schedule of least expected cost for the config's ``poll_cost_ms`` (the table
applies until ``SolveTimes.min_observations()`` solves of the type, the engine's threshold).
``solver.solve_times()`` gives the models' text forms to save; a later solver continues from
them with ``solve_times=``.

Thread budget: at most ``threads`` solves of one solver are in flight at once; the others wait,
in arrival order, before their solve is created (so their deadline does not run while they
wait). The engine's thread gate decides who starts. ``threads=None`` (the default) is the plan's
threads, read with one ``threadsinfo`` request before the first solve: more solves at once than
the plan has threads would only wait on CaptchaAI's busy answers until their deadlines.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any, TypeVar

import httpx

from ._budget import ThreadBudget
from ._http import PooledTransport
from .engine import Engine, Failed, Output, Send, Solved, SolveHandle, SolveTimes
from .errors import EngineMisuse, EngineTrap, Failure, SolveTimesError
from .tasks import TaskLike, task_type
from .types import Config, Request, Response, Solution, ThreadsInfo, TransportErrorKind

Checkpoint = Callable[[str], Any]
T = TypeVar("T")


class Clock:
    """The time given to the engine: epoch milliseconds, from a monotonic clock so it never goes
    backwards. ``scale`` > 1 runs it that many times faster than real time (for tests against
    the emulator started with the same ``--time-scale``): 0.01 to 10000, as the CLI's."""

    MIN_SCALE = 0.01
    MAX_SCALE = 10_000.0

    def __init__(self, scale: float = 1.0) -> None:
        if not isinstance(scale, (int, float)) or isinstance(scale, bool) or not (
                self.MIN_SCALE <= scale <= self.MAX_SCALE):
            raise ValueError(f"a clock scale must be a number from {self.MIN_SCALE} to {self.MAX_SCALE:g} "
                             f"(got {scale!r})")
        self.scale = float(scale)
        self._start_ms = int(time.time() * 1000)
        self._start = time.monotonic()

    def __repr__(self) -> str:
        return f"Clock(scale={self.scale})"

    def now_ms(self) -> int:
        """The current time, epoch ms."""
        return self._start_ms + int((time.monotonic() - self._start) * 1000 * self.scale)

    def seconds(self, virtual_ms: int) -> float:
        """The real duration of ``virtual_ms``, in seconds."""
        return virtual_ms / 1000.0 / self.scale


class PendingSolve:
    """A solve in flight (or finished). ``snapshot()`` gives its state as JSON (never the key) to
    resume later with ``Solver.resume``; ``task_id`` is the CaptchaAI task id (None before the
    submit is accepted)."""

    __slots__ = ("_core", "_handle", "_engine", "_base", "_state", "_outcome", "task_type", "__weakref__")

    def __init__(self, core: _Core, engine: Engine, handle: SolveHandle) -> None:
        self._core = core
        self._engine = engine
        self._handle: SolveHandle | None = handle
        self._base = engine.snapshot_base(handle)
        self._state = engine.snapshot_state(handle)
        self._outcome: None | Solution | Failure = None
        self.task_type = handle.task_type

    def __repr__(self) -> str:
        status = "pending" if self._outcome is None else (
            "solved" if isinstance(self._outcome, Solution) else "failed")
        return f"PendingSolve(type={self.task_type!r}, {status})"

    @property
    def done(self) -> bool:
        """Whether the solve has ended (``run`` then returns or raises its outcome again)."""
        return self._outcome is not None

    @property
    def task_id(self) -> str | None:
        """The CaptchaAI task id, once a submit was accepted (the final one once finished)."""
        if isinstance(self._outcome, Solution):
            return self._outcome.task_id
        if isinstance(self._outcome, Failure):
            return self._outcome.task_id
        return self._core.call(self, lambda engine, handle: engine.task_id(handle))

    @property
    def deadline(self) -> int | None:
        """When the engine gives up on the solve (epoch ms on the solver's clock), None without a
        deadline; the solve ends by then plus one request timeout (a solver stalled past it may
        send one last poll first: the engine's ends-by bounds that)."""
        return self._core.call(self, lambda engine, handle: engine.deadline(handle))

    def snapshot(self) -> str:
        """The whole in-flight state as versioned JSON, without the API key (it does hold the task,
        including any proxy credentials). Resume it with ``Solver.resume``."""
        if self._outcome is not None:
            raise ValueError("the solve has finished; there is nothing to snapshot")
        return self._core.call(self, lambda engine, handle: engine.snapshot(handle))


class _Core:
    """The engine instance shared by one solver's solves, behind a lock, replaced after a trap."""

    def __init__(self, api_key: str, config: Config | None, clock: Clock,
                 solve_times: Mapping[str, str] | None = None) -> None:
        if not isinstance(api_key, str):
            raise TypeError(f"the API key must be a str, not {type(api_key).__name__}")
        if config is not None and not isinstance(config, Config):
            raise TypeError(f"config must be a captchaai_engine.Config, not {type(config).__name__}")
        if solve_times is not None and not isinstance(solve_times, Mapping):
            raise TypeError("solve_times must be a mapping of captcha type to text, as solve_times() returns")
        self._key = api_key
        self.config = config or Config()
        self.clock = clock
        self._lock = threading.Lock()
        self._engine = Engine()
        self.recoveries = 0
        # One model per captcha type, in the current instance; and the texts a replacement
        # instance's models continue from (those given, updated by each solve_times() call).
        self._times: dict[str, SolveTimes] = {}
        self._times_saved: dict[str, str] = {}
        for kind, text in (solve_times or {}).items():
            times = self._engine.solve_times_from_text(text)
            if times.task_type != kind:
                raise SolveTimesError("invalid", f"solve_times[{kind!r}] is a model of {times.task_type!r}")
            self._times[kind], self._times_saved[kind] = times, text

    def __repr__(self) -> str:  # never the key
        return f"_Core(config={self.config!r})"

    def _replace_engine(self) -> Engine:
        self._engine = Engine()
        self.recoveries += 1
        return self._engine

    def engine_call(self, fn: Callable[[Engine], T]) -> T:
        """A call that needs no solve; retried once on a fresh instance after a trap."""
        with self._lock:
            try:
                return fn(self._engine)
            except EngineTrap:
                return fn(self._replace_engine())

    def _model(self, engine: Engine, kind: str | None) -> SolveTimes | None:
        """The model of captcha type ``kind`` in ``engine`` (made on first use, or after a trap
        from its saved text); None for no or an unknown type (the engine refuses such a task)."""
        if kind is None:
            return None
        times = self._times.get(kind)
        if times is not None and times._engine is engine:
            return times
        saved = self._times_saved.get(kind)
        try:
            times = engine.solve_times_from_text(saved) if saved is not None else engine.solve_times(kind)
        except SolveTimesError:
            return None
        self._times[kind] = times
        return times

    def solve_times(self) -> dict[str, str]:
        """Every model's text form, by captcha type."""
        with self._lock:
            try:
                texts = {kind: self._engine.solve_times_text(times) for kind, times in self._times.items()
                         if times._engine is self._engine}
            except EngineTrap:
                self._replace_engine()
                texts = {}
            self._times_saved.update(texts)
            return dict(self._times_saved)

    def first_waits(self) -> dict[str, int | None]:
        """The first wait each model gives a new solve (ms; None while the type's table applies)."""
        def read(engine: Engine) -> dict[str, int | None]:
            return {kind: engine.first_wait_ms(times) for kind in list(self._times)
                    if (times := self._model(engine, kind)) is not None}

        return self.engine_call(read)

    def start(self, task: TaskLike) -> PendingSolve:
        def create(engine: Engine) -> PendingSolve:
            times = self._model(engine, task_type(task))
            created = engine.create(task, self._key, self.config, self.clock.now_ms(), times)
            if isinstance(created, Failure):
                raise created.to_exception()
            return PendingSolve(self, engine, created)

        return self.engine_call(create)

    def check(self, task: TaskLike) -> None:
        """Refuses ``task`` as :meth:`start` would (PermanentError), keeping nothing."""
        def create(engine: Engine) -> None:
            created = engine.create(task, self._key, self.config, self.clock.now_ms(), None)
            if isinstance(created, Failure):
                raise created.to_exception()
            engine.drop(created)

        self.engine_call(create)

    def resume(self, snapshot: str) -> PendingSolve:
        return self.engine_call(lambda engine: PendingSolve(self, engine, engine.restore(snapshot, self._key)))

    def call(self, pending: PendingSolve, fn: Callable[[Engine, SolveHandle], T]) -> T:
        """A call on ``pending``'s solve. After a trap the instance is replaced and the solve is
        restored from its checkpoint (others are restored lazily on their next call); the call
        is then made once more."""
        if pending._core is not self:
            raise ValueError("this PendingSolve belongs to another solver")
        with self._lock:
            for attempt in (0, 1):
                engine = self._engine
                try:
                    if pending._engine is not engine or pending._handle is None:
                        pending._handle = engine.restore_parts(pending._base, pending._state, self._key)
                        pending._engine = engine
                    return fn(engine, pending._handle)
                except EngineTrap:
                    if attempt:
                        raise
                    self._replace_engine()
            raise AssertionError("unreachable: the second attempt returns or raises")

    def feed(self, pending: PendingSolve, request_id: int, reply: Response | TransportErrorKind,
             now: int) -> Output:
        """Feeds a reply or transport error; keeps the new checkpoint state."""
        def fed(engine: Engine, handle: SolveHandle) -> Output:
            if isinstance(reply, Response):
                output = engine.handle_response(handle, now, request_id, reply)
            else:
                output = engine.handle_transport_error(handle, now, request_id, reply)
            if isinstance(output, Send):
                pending._state = engine.snapshot_state(handle)
            return output

        return self.call(pending, fed)

    def finish(self, pending: PendingSolve, output: Solved | Failed) -> None:
        """Records the outcome, frees the engine's solve and lets the type's model learn from a
        solution (a trap there costs only that observation)."""
        with self._lock:
            pending._outcome = output.solution if isinstance(output, Solved) else output.failure
            handle, pending._handle = pending._handle, None
            try:
                if handle is not None and pending._engine is self._engine:
                    self._engine.drop(handle)
                if isinstance(output, Solved):
                    times = self._model(self._engine, pending.task_type)
                    if times is not None:
                        self._engine.observe(times, output.solution)
            except EngineTrap:
                self._replace_engine()


def _check_checkpoint(on_checkpoint: Any) -> None:
    """Refuses a checkpoint callback that is not callable before anything is sent (it would
    fail only after the paid submit)."""
    if on_checkpoint is not None and not callable(on_checkpoint):
        raise TypeError(f"on_checkpoint must be callable, not {type(on_checkpoint).__name__}")


def _outcome(pending: PendingSolve) -> Solution:
    outcome = pending._outcome
    if isinstance(outcome, Failure):
        raise outcome.to_exception()
    assert isinstance(outcome, Solution)
    return outcome


def _transport_kind(error: BaseException) -> TransportErrorKind:
    """The WIT transport-error kind for an httpx failure: not delivered, timed out, or broken."""
    if isinstance(error, (httpx.TimeoutException, asyncio.TimeoutError, TimeoutError)):
        return TransportErrorKind.TIMEOUT
    if isinstance(error, (httpx.ConnectError, httpx.ProxyError, httpx.UnsupportedProtocol,
                          httpx.LocalProtocolError, httpx.InvalidURL)):
        return TransportErrorKind.CONNECT
    return TransportErrorKind.BROKEN


#: Requests one AsyncSolver hands to its httpx client at once (httpx's default pool size; the
#: solver's own client, on _http.PooledTransport, keeps up to that many connections alive). The
#: others wait in the solver, before their timeout starts: httpcore's pool rescans every queued
#: request on each change, so thousands of solves queued there cost quadratic CPU and time out
#: waiting for a connection.
HTTP_CONNECTIONS = 100

_SEND_ERRORS = (httpx.RequestError, httpx.InvalidURL, asyncio.TimeoutError, TimeoutError)


class _Base:
    def __init__(self, api_key: str, config: Config | None, threads: int | None,
                 clock: Clock | None, solve_times: Mapping[str, str] | None) -> None:
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise ValueError(f"threads must be a positive int or None (got {threads!r})")
        if clock is not None and not isinstance(clock, Clock):
            raise TypeError("clock must be a captchaai_engine.Clock")
        self._core = _Core(api_key, config, clock or Clock(), solve_times)
        self.threads = threads
        # The budget for ``threads``; made from the plan's threads on the first solve when None.
        self._budget: ThreadBudget | None = ThreadBudget(threads) if threads is not None else None

    def solve_times(self) -> dict[str, str]:
        """The learned solve-times models, by captcha type, as text (versioned JSON, no key or
        token): pass them as ``solve_times=`` to a later solver to continue learning."""
        return self._core.solve_times()

    def first_waits(self) -> dict[str, int | None]:
        """The first wait (ms) each learned model gives a new solve of its type at the default poll
        cost; None while that type's table applies (under ``SolveTimes.min_observations()``
        solves)."""
        return self._core.first_waits()

    @property
    def config(self) -> Config:
        return self._core.config

    @property
    def clock(self) -> Clock:
        return self._core.clock

    @property
    def recoveries(self) -> int:
        """How many times a trapped engine instance was replaced."""
        return self._core.recoveries

    def __repr__(self) -> str:
        return f"{type(self).__name__}(config={self.config!r}, threads={self.threads!r}, clock={self.clock!r})"

    def _account_request(self, build: Callable[[Engine, str, Config], Request | Failure]) -> Request:
        request = self._core.engine_call(lambda engine: build(engine, self._core._key, self.config))
        if isinstance(request, Failure):
            raise request.to_exception()
        return request

    def _account_result(self, parse: Callable[[Engine, Response | TransportErrorKind], T | Failure],
                        reply: Response | TransportErrorKind) -> T:
        result = self._core.engine_call(lambda engine: parse(engine, reply))
        if isinstance(result, Failure):
            raise result.to_exception()
        return result


class Solver(_Base):
    """Solves captchas synchronously. Thread-safe: solves may run from many threads at once
    (at most ``threads`` in flight). ``client`` is an ``httpx.Client`` to send with (not closed
    by the solver); ``clock`` a :class:`Clock` (real time by default)."""

    def __init__(self, api_key: str, config: Config | None = None, *, client: httpx.Client | None = None,
                 threads: int | None = None, clock: Clock | None = None,
                 solve_times: Mapping[str, str] | None = None) -> None:
        super().__init__(api_key, config, threads, clock, solve_times)
        self._owns_client = client is None
        self._client = client if client is not None else httpx.Client()
        self._budget_lock = threading.Lock()

    def close(self) -> None:
        """Closes the HTTP client if the solver made it."""
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> Solver:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def solve(self, task: TaskLike) -> Solution:
        """Solves ``task`` (a Task, dict or JSON text); raises a CaptchaAIError subclass on failure.
        The solve is created once ``threads`` admits it, so its deadline does not run while it
        waits (a task the engine refuses raises at once)."""
        self._core.check(task)
        with self._thread():
            return self._drive(self.start(task), None)

    def start(self, task: TaskLike) -> PendingSolve:
        """Validates the task and creates the solve; nothing is sent yet. An invalid task, key or
        config raises PermanentError naming the field."""
        return self._core.start(task)

    def resume(self, snapshot: str) -> PendingSolve:
        """A solve continued from ``PendingSolve.snapshot()`` (raises SnapshotError if unusable)."""
        return self._core.resume(snapshot)

    def run(self, pending: PendingSolve, on_checkpoint: Checkpoint | None = None) -> Solution:
        """Drives ``pending`` to its end and returns the solution (or raises the failure); its
        deadline has run since ``start``. ``on_checkpoint(snapshot)`` is called after each result
        that leaves the solve in flight."""
        _check_checkpoint(on_checkpoint)
        if pending.done:
            return _outcome(pending)
        with self._thread():
            return self._drive(pending, on_checkpoint)

    @contextlib.contextmanager
    def _thread(self) -> Iterator[None]:
        """Holds one thread of the budget (made from the plan's threads the first time, when
        ``threads`` is None: a failed ``threadsinfo`` raises its error before anything is sent)."""
        with self._budget_lock:
            if self._budget is None:
                self._budget = ThreadBudget(self.threads_info().threads)
            budget = self._budget
        ticket = budget.enter()
        try:
            yield
        finally:
            budget.leave(ticket)

    def _drive(self, pending: PendingSolve, on_checkpoint: Checkpoint | None) -> Solution:
        """Drives ``pending`` (its thread held by the caller) to its end."""
        core, clock = self._core, self.clock
        try:
            output = core.call(pending, lambda engine, handle: engine.poll_output(handle, clock.now_ms()))
        except EngineMisuse as misuse:
            if misuse.kind != "time_went_backwards":
                raise
            # A resumed solve was given a later time by another clock: wait until then.
            self._sleep_until(misuse.value)
            output = core.call(pending, lambda engine, handle: engine.poll_output(handle, clock.now_ms()))
        while isinstance(output, Send):
            request = output.request
            self._sleep_until(request.at)
            reply = self._send(request)
            output = core.feed(pending, request.id, reply, clock.now_ms())
            if on_checkpoint is not None and isinstance(output, Send):
                on_checkpoint(pending.snapshot())
        core.finish(pending, output)
        return _outcome(pending)

    def threads_info(self) -> ThreadsInfo:
        """The plan's thread cap and busy threads (``threadsinfo``, read by the engine)."""
        request = self._account_request(Engine.threads_info_request)
        self._sleep_until(request.at)
        return self._account_result(Engine.parse_threads_info, self._send(request))

    def balance(self) -> float:
        """The account balance (``getbalance``, read by the engine)."""
        request = self._account_request(Engine.balance_request)
        self._sleep_until(request.at)
        return self._account_result(Engine.parse_balance, self._send(request))

    def _sleep_until(self, at_ms: int) -> None:
        clock = self.clock
        while (now := clock.now_ms()) < at_ms:
            time.sleep(clock.seconds(at_ms - now) + 0.0002)

    def _send(self, request: Request) -> Response | TransportErrorKind:
        timeout = self.clock.seconds(request.timeout_ms)
        try:
            reply = self._client.post(request.url, content=request.body_bytes,
                                      headers={"content-type": request.content_type}, timeout=timeout)
        except _SEND_ERRORS as error:
            return _transport_kind(error)
        return Response.from_bytes(reply.status_code, reply.content)


class AsyncSolver(_Base):
    """Solves captchas on asyncio, with the same surface as :class:`Solver` (every solver method
    is a coroutine). ``client`` is an ``httpx.AsyncClient`` (not closed by the solver)."""

    def __init__(self, api_key: str, config: Config | None = None, *,
                 client: httpx.AsyncClient | None = None, threads: int | None = None,
                 clock: Clock | None = None, solve_times: Mapping[str, str] | None = None) -> None:
        super().__init__(api_key, config, threads, clock, solve_times)
        self._owns_client = client is None
        self._client = client if client is not None else httpx.AsyncClient(
            transport=PooledTransport(max_idle=HTTP_CONNECTIONS))
        self._budget_lock = asyncio.Lock()
        # At most HTTP_CONNECTIONS requests are handed to the client at once; the rest wait here,
        # before their timeout starts (see HTTP_CONNECTIONS).
        self._http_gate = asyncio.Semaphore(HTTP_CONNECTIONS)

    async def aclose(self) -> None:
        """Closes the HTTP client if the solver made it."""
        if self._owns_client:
            await self._client.aclose()

    close = aclose

    async def __aenter__(self) -> AsyncSolver:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def solve(self, task: TaskLike) -> Solution:
        """Solves ``task``; raises a CaptchaAIError subclass on failure. Created once ``threads``
        admits it, as :meth:`Solver.solve` is."""
        self._core.check(task)
        async with self._thread():
            return await self._drive(await self.start(task), None)

    async def start(self, task: TaskLike) -> PendingSolve:
        """Validates the task and creates the solve (no I/O)."""
        return self._core.start(task)

    async def resume(self, snapshot: str) -> PendingSolve:
        """A solve continued from ``PendingSolve.snapshot()`` (no I/O)."""
        return self._core.resume(snapshot)

    async def run(self, pending: PendingSolve, on_checkpoint: Checkpoint | None = None) -> Solution:
        """Drives ``pending`` to its end (its deadline has run since ``start``);
        ``on_checkpoint(snapshot)`` after each result that leaves it in flight (a coroutine
        function is awaited)."""
        _check_checkpoint(on_checkpoint)
        if pending.done:
            return _outcome(pending)
        async with self._thread():
            return await self._drive(pending, on_checkpoint)

    @contextlib.asynccontextmanager
    async def _thread(self) -> AsyncIterator[None]:
        """Holds one thread of the budget, as :meth:`Solver._thread` does."""
        if self._budget is None:
            async with self._budget_lock:
                if self._budget is None:
                    self._budget = ThreadBudget((await self.threads_info()).threads)
        budget = self._budget
        ticket = await budget.enter_async()
        try:
            yield
        finally:
            budget.leave(ticket)

    async def _drive(self, pending: PendingSolve, on_checkpoint: Checkpoint | None) -> Solution:
        """Drives ``pending`` (its thread held by the caller) to its end."""
        core, clock = self._core, self.clock
        try:
            output = core.call(pending, lambda engine, handle: engine.poll_output(handle, clock.now_ms()))
        except EngineMisuse as misuse:
            if misuse.kind != "time_went_backwards":
                raise
            await self._sleep_until(misuse.value)  # see Solver._drive
            output = core.call(pending, lambda engine, handle: engine.poll_output(handle, clock.now_ms()))
        while isinstance(output, Send):
            request = output.request
            await self._sleep_until(request.at)
            reply = await self._send(request)
            output = core.feed(pending, request.id, reply, clock.now_ms())
            if on_checkpoint is not None and isinstance(output, Send):
                result = on_checkpoint(pending.snapshot())
                if asyncio.iscoroutine(result):
                    await result
        core.finish(pending, output)
        return _outcome(pending)

    async def threads_info(self) -> ThreadsInfo:
        """The plan's thread cap and busy threads."""
        request = self._account_request(Engine.threads_info_request)
        await self._sleep_until(request.at)
        return self._account_result(Engine.parse_threads_info, await self._send(request))

    async def balance(self) -> float:
        """The account balance."""
        request = self._account_request(Engine.balance_request)
        await self._sleep_until(request.at)
        return self._account_result(Engine.parse_balance, await self._send(request))

    async def _sleep_until(self, at_ms: int) -> None:
        clock = self.clock
        while (now := clock.now_ms()) < at_ms:
            await asyncio.sleep(clock.seconds(at_ms - now) + 0.0002)

    async def _send(self, request: Request) -> Response | TransportErrorKind:
        timeout = self.clock.seconds(request.timeout_ms)
        async with self._http_gate:
            try:
                reply = await asyncio.wait_for(
                    self._client.post(request.url, content=request.body_bytes,
                                      headers={"content-type": request.content_type}, timeout=timeout),
                    timeout)
            except _SEND_ERRORS as error:
                return _transport_kind(error)
        return Response.from_bytes(reply.status_code, reply.content)

