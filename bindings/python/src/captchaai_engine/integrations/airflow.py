"""Airflow 3: a deferrable operator and its trigger on the captchaai-engine package.

:class:`CaptchaAISolveOperator` submits the task in ``execute()`` (the worker's first short
visit), hands the solve to :class:`CaptchaAITrigger` through ``self.defer()``, and resumes in
``execute_complete()``, which checks that the token is still fresh and calls :meth:`use_token`
(override it: post the form there, return a result, never the token).

The trigger's ``serialize()`` carries the engine snapshot (the solve's whole state, with no key);
``run()`` resumes it with :class:`~captchaai_engine.AsyncSolver` on the triggerer's event loop.
The API key is the password of an Airflow connection (``conn_id``, default ``captchaai``), read
where it is needed and never stored in trigger kwargs, events, XCom or logs: the trigger reads
it again on the triggerer. So before it submits, the operator reads the connection the way the
trigger will and fails (no retries) if that read fails or differs: a trigger that cannot read its
connection must not leave a paid task behind. Should the triggerer still fail to read it (a
triggerer on another machine without the connection), the trigger hands the snapshot back and
the worker finishes the solve. The connection's
extra may hold ``{"config": {<Config fields>}, "time_scale": <float>}``: ``config`` sets the
solve's :class:`~captchaai_engine.Config` (``base_url`` and so on); ``time_scale`` (default 1)
is only for tests against an emulator started with the same ``--time-scale``.

Failures: a permanent one (bad key, task or plan) raises ``AirflowFailException`` (no retries);
transient and unsolvable ones, and a token that went stale before the resume, raise
``AirflowException`` so the task's retries solve again. The failure class is the engine's.

Put the task in a pool with ``include_deferred`` sized to the plan's threads
(:func:`plan_threads` reads them) so deferred solves count against it. The trigger module must be
importable by the triggerer: it is this installed package, never a Dag bundle.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import timedelta
from typing import Any, TypeVar

from airflow.sdk import BaseHook, BaseOperator, conf
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowNotFoundException
from airflow.triggers.base import BaseTrigger, TriggerEvent

from ..errors import CaptchaAIError, PermanentError
from ..solver import AsyncSolver, Clock, PendingSolve, Solver
from ..tasks import Task
from ..types import Config, Solution
from ._common import clock_for, error_from_json, failure_to_json, solution_from_json, solution_to_json

__all__ = ["CaptchaAISolveOperator", "CaptchaAITrigger", "connection_settings", "plan_threads"]

DEFAULT_CONN_ID = "captchaai"
T = TypeVar("T")


def connection_settings(conn: Any) -> tuple[str, Config, Clock]:
    """The API key, :class:`Config` and clock an Airflow connection describes (key: password;
    extra: ``config`` and ``time_scale``). A malformed extra raises ``AirflowFailException``."""
    extra = conn.extra_dejson or {}
    try:
        config = Config.from_dict(extra.get("config") or {})
        clock = clock_for(extra.get("time_scale", 1.0))
    except (TypeError, ValueError) as error:
        raise AirflowFailException(f"connection {conn.conn_id!r}: bad extra: {error}") from None
    return conn.password or "", config, clock


def _connection_anywhere(conn_id: str) -> Any:
    """The connection ``conn_id`` in a task or outside one (a shell, a deploy script). Outside a
    task the Task SDK reads only environment variables and secrets backends, so a connection
    stored in the metadata database (``airflow connections add``) is then read with Airflow
    core's lookup, which includes the database."""
    try:
        return BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        try:
            from airflow.models.connection import Connection
        except ImportError:  # only the Task SDK installed: nothing more to look in
            raise
        return Connection.get_connection_from_secrets(conn_id)


async def _trigger_connection(conn_id: str) -> Any:
    """The connection as the trigger reads it: the Task SDK's async lookup, else its sync lookup
    in a thread. Airflow's in-process runner (``dag.test()``, ``airflow dags test``) runs triggers
    with a supervisor that answers only sync lookups: there the async one finds no connection
    stored in the metadata database (``airflow connections add``)."""
    try:
        return await BaseHook.aget_connection(conn_id)
    except AirflowNotFoundException:
        return await asyncio.to_thread(BaseHook.get_connection, conn_id)


def plan_threads(conn_id: str = DEFAULT_CONN_ID) -> int:
    """The plan's thread count (one ``threadsinfo`` request): the size for the pool that the
    operator's tasks run in (``airflow pools set captchaai N ... --include-deferred``). Works
    outside a task too, with the connection in the metadata database."""
    key, config, clock = connection_settings(_connection_anywhere(conn_id))
    with Solver(key, config, clock=clock) as solver:
        return _airflow_error(solver.threads_info).threads


def _airflow_error(call: Callable[..., T], *args: Any) -> T:
    """Runs ``call``; a CaptchaAIError becomes the Airflow exception its class asks for."""
    try:
        return call(*args)
    except CaptchaAIError as error:
        raise _to_airflow(error) from None


def _to_airflow(error: CaptchaAIError) -> AirflowException:
    """Permanent: fail without retries; transient or unsolvable: leave it to the retries. Chained
    ``from None`` and built from the engine's fields only, so no request (or key) is shown."""
    kind = AirflowFailException if isinstance(error, PermanentError) else AirflowException
    where = f" (CaptchaAI task {error.task_id})" if error.task_id else ""
    return kind(f"{type(error).__name__}{where}: {error}")


class CaptchaAITrigger(BaseTrigger):
    """Resumes one solve from its engine snapshot on the triggerer and yields one event:
    ``{"status": "solved", "solution": {...}}`` or ``{"status": "failed", "failure": {...}}``
    (the engine's failure record), or ``{"status": "connection_unreadable", "snapshot": ...}``
    when it cannot read its connection (the operator then finishes the solve in the worker). The
    snapshot holds no key; ``run()`` reads it from the connection. A trigger re-created after a
    triggerer restart resumes the same snapshot (the same CaptchaAI task, on the engine's
    original deadline)."""

    def __init__(self, snapshot: str, conn_id: str = DEFAULT_CONN_ID) -> None:
        super().__init__()
        if not isinstance(snapshot, str) or not snapshot:
            raise ValueError("CaptchaAITrigger needs the engine snapshot (a JSON string)")
        self.snapshot = snapshot
        self.conn_id = conn_id

    def __repr__(self) -> str:
        return f"CaptchaAITrigger(conn_id={self.conn_id!r})"

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"snapshot": self.snapshot, "conn_id": self.conn_id})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            key, config, clock = connection_settings(await _trigger_connection(self.conn_id))
        except Exception as error:  # noqa: BLE001 - whatever stops the read, the paid task goes back
            # The submitted task is paid for: hand it back for the worker to finish.
            self.log.error("cannot read the connection %r on the triggerer (%s); the worker finishes the solve",
                           self.conn_id, error)
            yield TriggerEvent({"status": "connection_unreadable", "snapshot": self.snapshot})
            return
        async with AsyncSolver(key, config, threads=1, clock=clock) as solver:
            pending = await solver.resume(self.snapshot)
            try:
                solution = await solver.run(pending)
            except CaptchaAIError as error:
                self.log.info("CaptchaAI solve failed: %s", error)
                yield TriggerEvent({"status": "failed", "failure": failure_to_json(error)})
                return
        self.log.info("CaptchaAI task %s solved", solution.task_id)
        yield TriggerEvent({"status": "solved", "solution": solution_to_json(solution)})


class _Submitted(Exception):
    """Stops the worker's drive once CaptchaAI has accepted the submit."""

    def __init__(self, snapshot: str) -> None:
        super().__init__("submitted")
        self.snapshot = snapshot


TaskSpec = Task | Mapping[str, Any]

#: How long past the engine's deadline Airflow's deferral backstop waits by default: the trigger
#: ends the solve by the engine's ends-by (the deadline plus one request timeout, at most 2
#: minutes; a triggerer stalled past the deadline may send one last poll, up to the submit plus
#: the token's lifetime: 3.5 minutes after a Turnstile deadline), and the triggerer may be slow
#: to run it.
DEFER_MARGIN = timedelta(minutes=5)


class CaptchaAISolveOperator(BaseOperator):
    """Solves ``task`` (a task dict such as ``{"type": "recaptcha_v2", "sitekey": ...,
    "pageurl": ...}``, templated, or a :class:`~captchaai_engine.Task`) and calls
    :meth:`use_token` with the :class:`~captchaai_engine.Solution` while it is fresh.

    ``deferrable`` (default ``[operators] default_deferrable``): submit, then wait on the
    triggerer; otherwise the whole solve runs in the worker. ``max_token_age`` (seconds, None:
    only the engine's token lifetime) is how old the token may be when the task resumes; an older
    one raises ``AirflowException`` so a retry solves again. ``defer_timeout`` is Airflow's
    backstop above the engine's own deadline (None: that deadline plus ``DEFER_MARGIN``, so the
    backstop never cuts a solve the engine is still allowed to finish)."""

    template_fields = ("task",)

    def __init__(self, *, task: TaskSpec, conn_id: str = DEFAULT_CONN_ID,
                 max_token_age: float | None = None,
                 defer_timeout: timedelta | None = None,
                 deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.task = task.to_dict() if isinstance(task, Task) else dict(task)
        self.conn_id = conn_id
        self.max_token_age = max_token_age
        self.defer_timeout = defer_timeout
        self.deferrable = deferrable

    def execute(self, context: Any) -> Any:
        settings = connection_settings(BaseHook.get_connection(self.conn_id))
        if self.deferrable:
            self._check_trigger_connection(settings)
        key, config, clock = settings
        with Solver(key, config, threads=1, clock=clock) as solver:
            pending = _airflow_error(solver.start, self.task)
            if not self.deferrable:
                return self._complete(context, _airflow_error(solver.run, pending), clock)
            try:
                solution = _airflow_error(solver.run, pending,
                                          lambda snapshot: self._stop_once_submitted(pending, snapshot))
            except _Submitted as submitted:
                self.log.info("CaptchaAI task %s submitted; deferring", pending.task_id)
                self.defer(trigger=CaptchaAITrigger(submitted.snapshot, self.conn_id),
                           method_name="execute_complete", timeout=self._backstop(pending, clock))
        # Answered without a checkpoint after the submit (an image solved in one request).
        return self._complete(context, solution, clock)

    def _check_trigger_connection(self, settings: tuple[str, Config, Clock]) -> None:
        """Reads the connection the way the trigger will, before anything is submitted: a
        connection the trigger cannot read, or reads differently, fails the task now (no retries)
        instead of leaving a paid task uncollected."""
        try:
            seen = connection_settings(asyncio.run(_trigger_connection(self.conn_id)))
        except AirflowNotFoundException as error:
            raise AirflowFailException(
                f"the trigger could not read the connection {self.conn_id!r} ({error}); nothing was "
                "submitted. Define it where the triggerer reads connections (the metadata database, "
                "an AIRFLOW_CONN_ variable, a secrets backend), or pass deferrable=False") from None
        if seen != settings:
            raise AirflowFailException(
                f"the trigger reads the connection {self.conn_id!r} differently from the worker (another "
                "definition shadows it); nothing was submitted")

    def _backstop(self, pending: PendingSolve, clock: Clock) -> timedelta | None:
        """``defer_timeout``, else the real time left until the engine's deadline plus
        ``DEFER_MARGIN`` (None for a solve without a deadline)."""
        if self.defer_timeout is not None:
            return self.defer_timeout
        deadline = pending.deadline
        if deadline is None:
            return None
        return timedelta(seconds=clock.seconds(max(0, deadline - clock.now_ms()))) + DEFER_MARGIN

    @staticmethod
    def _stop_once_submitted(pending: PendingSolve, snapshot: str) -> None:
        if pending.task_id is not None:
            raise _Submitted(snapshot)

    def execute_complete(self, context: Any, event: Mapping[str, Any]) -> Any:
        """Resumes from the trigger's event: raises its failure, uses the fresh token, or
        finishes the solve here when the triggerer could not read the connection."""
        status = event.get("status")
        key, config, clock = connection_settings(BaseHook.get_connection(self.conn_id))
        if status == "connection_unreadable":
            self.log.warning("the triggerer could not read the connection %r; finishing the solve in the worker",
                             self.conn_id)
            with Solver(key, config, threads=1, clock=clock) as solver:
                pending = _airflow_error(solver.resume, event["snapshot"])
                return self._complete(context, _airflow_error(solver.run, pending), clock)
        if status != "solved":
            raise _to_airflow(error_from_json(event["failure"]))
        return self._complete(context, solution_from_json(event["solution"]), clock)

    def _complete(self, context: Any, solution: Solution, clock: Clock) -> Any:
        if not solution.is_fresh(now=clock.now_ms() / 1000, max_age=self.max_token_age):
            raise AirflowException(f"the token of CaptchaAI task {solution.task_id} is no longer fresh; "
                                   "a retry solves again")
        self.log.info("CaptchaAI task %s solved in %.1f s", solution.task_id, solution.elapsed_ms / 1000)
        return self.use_token(context, solution)

    def use_token(self, context: Any, solution: Solution) -> Any:
        """Override: use ``solution.answer`` (and ``solution.user_agent``) at once, e.g. post the
        protected form, and return the result (it goes to XCom, so never the token)."""
        raise NotImplementedError(f"{type(self).__name__} must override use_token()")
