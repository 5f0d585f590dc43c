"""The low-level engine: typed calls into the engine component (captchaai:engine@0.3.0).

An :class:`Engine` is one component instance (its own wasmtime Store); the compiled component is
shared by the whole process. It is not thread-safe: the solvers serialize calls with a lock.
Nothing here sends or waits; see :mod:`captchaai_engine.solver` for drivers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Union

from . import _component
from .errors import EngineMisuse, Failure, FailureClass, FailureOrigin, SnapshotError, SolveTimesError
from .tasks import Task, task_json
from .types import Config, Request, RequestKind, Response, Solution, ThreadsInfo, TransportErrorKind


@dataclass(frozen=True)
class Send:
    """Send ``request`` at its ``at`` (sleep until then), then report the result."""

    request: Request


@dataclass(frozen=True)
class Solved:
    """Terminal: the answer."""

    solution: Solution


@dataclass(frozen=True)
class Failed:
    """Terminal: the solve ended without an answer."""

    failure: Failure


Output = Union[Send, Solved, Failed]
Reply = Union[Response, TransportErrorKind]


class SolveHandle:
    """One in-flight solve inside an :class:`Engine` (a WIT ``solve`` resource). The key lives
    only inside the engine."""

    __slots__ = ("_resource", "task_type", "_engine")

    def __init__(self, engine: "Engine", resource: Any, task_type: str) -> None:
        self._engine = engine
        self._resource = resource
        self.task_type = task_type

    def __repr__(self) -> str:
        return f"SolveHandle(task_type={self.task_type!r})"


def _failure(f: Mapping[str, Any]) -> Failure:
    return Failure(
        code=f["code"],
        failure_class=FailureClass(f["class"]),
        origin=FailureOrigin(f["origin"].replace("-", "_")),
        message=f["message"],
        retry_after_ms=f["retry-after-ms"],
        field=f["field"],
        task_id=f["task-id"],
    )


def _request(r: Mapping[str, Any]) -> Request:
    tag, body = r["body"]
    return Request(
        id=r["id"],
        kind=RequestKind(r["kind"].replace("-", "_")),
        at=r["at"],
        url=r["url"],
        content_type=r["content-type"],
        body=body if tag == "form" else bytes(body),
        timeout_ms=r["timeout-ms"],
    )


def _reply(reply: Reply) -> Any:
    if isinstance(reply, Response):
        return ("ok", {"status": reply.status, "body": reply.body})
    return ("err", TransportErrorKind(reply).value)


class SolveTimes:
    """A learned model of one captcha type's solve times inside an :class:`Engine` (a WIT
    ``solve-times`` resource): adaptive polling. Its text form holds no key or token."""

    __slots__ = ("_resource", "task_type", "_engine")

    def __init__(self, engine: "Engine", resource: Any, task_type: str) -> None:
        self._engine = engine
        self._resource = resource
        self.task_type = task_type

    def __repr__(self) -> str:
        return f"SolveTimes(task_type={self.task_type!r})"

    @staticmethod
    def min_observations() -> int:
        """Observations a model needs before it changes anything (the engine's
        ``solve-times.min-observations``): under this many, solves of its type keep the type's
        table."""
        return _component.call_shared("[static]solve-times.min-observations")


class Engine:
    """One instance of the engine component. Every method is a single engine call."""

    def __init__(self) -> None:
        self._instance = _component.load().instantiate()

    def __repr__(self) -> str:
        return f"Engine(trapped={self.trapped})"

    @property
    def trapped(self) -> bool:
        """Whether this instance trapped: every later call raises :class:`EngineTrap`."""
        return self._instance.trapped

    def _call(self, name: str, *args: Any) -> Any:
        return self._instance.call(name, *args)

    def _output(self, result: Any, handle: SolveHandle) -> Output:
        tag, value = result
        if tag == "err":
            kind, payload = value
            raise EngineMisuse(kind.replace("-", "_"), payload)
        kind, payload = value
        if kind == "send":
            return Send(_request(payload))
        if kind == "solved":
            return Solved(Solution._from_wit(payload, handle.task_type))
        return Failed(_failure(payload))

    # -- solves --------------------------------------------------------------------------------

    def create(self, task: Union[Task, Mapping[str, Any], str], key: str, config: Optional[Config],
               now: int, times: Optional[SolveTimes] = None) -> Union[SolveHandle, Failure]:
        """Validates the task, key and config and starts a solve at ``now`` (epoch ms); a problem
        is a permanent :class:`Failure` naming the field, and nothing is sent. With ``times`` (a
        model of the task's type) the first poll is the one the model gives."""
        text = task_json(task)
        wit_config = (config or Config())._to_wit()
        if times is None:
            result = self._call("[static]solve.create", text, _key(key), wit_config, now)
        else:
            result = self._call("[static]solve.create-with-times", text, _key(key), wit_config, now,
                                self._own_times(times))
        tag, value = result
        if tag == "err":
            return _failure(value)
        return SolveHandle(self, value, self._call("[method]solve.task-type", value))

    def restore(self, snapshot: str, key: str) -> SolveHandle:
        """Continues a solve from a snapshot with the key supplied again."""
        if not isinstance(snapshot, str):
            raise TypeError(f"a snapshot is a str, not {type(snapshot).__name__}")
        return self._restored(self._call("[static]solve.restore", snapshot, _key(key)))

    def restore_parts(self, base: str, state: str, key: str) -> SolveHandle:
        """Continues a solve from ``snapshot_base`` and a later ``snapshot_state``."""
        if not isinstance(base, str) or not isinstance(state, str):
            raise TypeError("snapshot parts are str")
        result = self._call("[static]solve.restore-parts", base, state, _key(key))
        return self._restored(result)

    def _restored(self, result: Any) -> SolveHandle:
        tag, value = result
        if tag == "err":
            error, detail = value
            raise SnapshotError(error.replace("-", "_"), None if detail is None else str(detail))
        return SolveHandle(self, value, self._call("[method]solve.task-type", value))

    def poll_output(self, handle: SolveHandle, now: int) -> Output:
        """What to do at ``now``: the next request, or the terminal outcome (sticky)."""
        return self._output(self._call("[method]solve.poll-output", self._own(handle), now), handle)

    def handle_response(self, handle: SolveHandle, now: int, request_id: int, response: Response) -> Output:
        """Feeds back the reply to ``request_id`` received at ``now``; returns the next output."""
        wit = {"status": response.status, "body": response.body}
        return self._output(self._call("[method]solve.handle-response", self._own(handle), now, request_id, wit),
                            handle)

    def handle_transport_error(self, handle: SolveHandle, now: int, request_id: int,
                               error: TransportErrorKind) -> Output:
        """Reports that ``request_id`` failed without a reply at ``now``; returns the next output."""
        kind = TransportErrorKind(error).value
        return self._output(
            self._call("[method]solve.handle-transport-error", self._own(handle), now, request_id, kind), handle)

    def snapshot(self, handle: SolveHandle) -> str:
        """The whole in-flight state as versioned JSON, without the key."""
        return self._call("[method]solve.snapshot", self._own(handle))

    def snapshot_base(self, handle: SolveHandle) -> str:
        """The part of the snapshot that never changes during a solve (task and config)."""
        return self._call("[method]solve.snapshot-base", self._own(handle))

    def snapshot_state(self, handle: SolveHandle) -> str:
        """The part that changes with each result (a few hundred bytes)."""
        return self._call("[method]solve.snapshot-state", self._own(handle))

    def task_id(self, handle: SolveHandle) -> Optional[str]:
        """The current CaptchaAI task id, once a submit was accepted."""
        return self._call("[method]solve.task-id", self._own(handle))

    def deadline(self, handle: SolveHandle) -> Optional[int]:
        """When the deadline passes (epoch ms), once the first submit was sent."""
        return self._call("[method]solve.deadline", self._own(handle))

    def drop(self, handle: SolveHandle) -> None:
        """Frees a solve (its handle is unusable afterwards)."""
        resource, handle._resource = handle._resource, None
        if resource is not None and handle._engine is self:
            self._instance.drop(resource)

    def _own(self, handle: SolveHandle) -> Any:
        if not isinstance(handle, SolveHandle):
            raise TypeError(f"expected a SolveHandle, not {type(handle).__name__}")
        if handle._engine is not self:
            raise ValueError("this solve belongs to another Engine")
        if handle._resource is None:
            raise ValueError("this solve was dropped")
        return handle._resource

    # -- solve times (adaptive polling) --------------------------------------------------------

    def solve_times(self, task_type: str) -> SolveTimes:
        """An empty model of ``task_type``; an unknown type raises :class:`SolveTimesError`."""
        if not isinstance(task_type, str):
            raise TypeError(f"a captcha type is a str, not {type(task_type).__name__}")
        return self._times(self._call("[static]solve-times.create", task_type))

    def solve_times_from_text(self, text: str) -> SolveTimes:
        """A model from its text form (:meth:`solve_times_text`)."""
        if not isinstance(text, str):
            raise TypeError(f"a solve-times text is a str, not {type(text).__name__}")
        return self._times(self._call("[static]solve-times.from-text", text))

    def _times(self, result: Any) -> SolveTimes:
        tag, value = result
        if tag == "err":
            kind, detail = value
            raise SolveTimesError(kind.replace("-", "_"), None if detail is None else str(detail))
        return SolveTimes(self, value, self._call("[method]solve-times.task-type", value))

    def solve_times_text(self, times: SolveTimes) -> str:
        """The model's text form: versioned JSON under 1 KiB, no key or token."""
        return self._call("[method]solve-times.to-text", self._own_times(times))

    def observe(self, times: SolveTimes, solution: Solution) -> bool:
        """Learns from a solution of the model's type; returns whether it was used."""
        return self._call("[method]solve-times.observe", self._own_times(times), solution._to_wit())

    def first_wait_ms(self, times: SolveTimes) -> Optional[int]:
        """The first wait the model gives a new solve, or None while the type's table applies."""
        return self._call("[method]solve-times.first-wait-ms", self._own_times(times))

    def observations(self, times: SolveTimes) -> int:
        """Solves the model learned from."""
        return self._call("[method]solve-times.observations", self._own_times(times))

    def drop_times(self, times: SolveTimes) -> None:
        """Frees a model (its handle is unusable afterwards)."""
        resource, times._resource = times._resource, None
        if resource is not None and times._engine is self:
            self._instance.drop(resource)

    def _own_times(self, times: SolveTimes) -> Any:
        if not isinstance(times, SolveTimes):
            raise TypeError(f"expected SolveTimes, not {type(times).__name__}")
        if times._engine is not self:
            raise ValueError("this model belongs to another Engine")
        if times._resource is None:
            raise ValueError("this model was dropped")
        return times._resource

    # -- solutions -----------------------------------------------------------------------------

    def is_fresh(self, solution: Solution, now: int, max_age_ms: int) -> bool:
        """Whether ``solution`` may still be used at ``now``: no older than ``max_age_ms`` and
        not past its ``expires_at``."""
        return self._call("is-fresh", solution._to_wit(), now, max_age_ms)

    def solution_json(self, solution: Solution) -> str:
        """The engine's client JSON for ``solution``."""
        return self._call("solution-json", solution._to_wit())

    # -- account -------------------------------------------------------------------------------

    def threads_info_request(self, key: str, config: Optional[Config] = None) -> Union[Request, Failure]:
        """The ``threadsinfo`` request for the config's base URL and timeout."""
        return self._account_request("threads-info-request", key, config)

    def parse_threads_info(self, reply: Reply) -> Union[ThreadsInfo, Failure]:
        """Reads what came back for a ``threadsinfo`` request."""
        tag, value = self._call("parse-threads-info", _reply(reply))
        if tag == "err":
            return _failure(value)
        return ThreadsInfo(threads=value["threads"], working_threads=value["working-threads"], free=value["free"])

    def balance_request(self, key: str, config: Optional[Config] = None) -> Union[Request, Failure]:
        """The ``getbalance`` request."""
        return self._account_request("balance-request", key, config)

    def parse_balance(self, reply: Reply) -> Union[float, Failure]:
        """Reads what came back for a ``getbalance`` request."""
        tag, value = self._call("parse-balance", _reply(reply))
        return _failure(value) if tag == "err" else float(value)

    def thread_capacity(self, plan_threads: int, reserve: int) -> Union[int, Failure]:
        """How many solves the engine's thread gate admits at once for a plan of
        ``plan_threads`` less ``reserve`` threads; a failure when the reserve leaves none."""
        tag, value = self._call("[static]thread-gate.create", plan_threads, reserve)
        if tag == "err":
            return _failure(value)
        try:
            return self._call("[method]thread-gate.capacity", value)
        finally:
            self._instance.drop(value)

    def _account_request(self, name: str, key: str, config: Optional[Config]) -> Union[Request, Failure]:
        tag, value = self._call(name, _key(key), (config or Config())._to_wit())
        return _failure(value) if tag == "err" else _request(value)


def _key(key: Any) -> str:
    if not isinstance(key, str):
        raise TypeError(f"the API key must be a str, not {type(key).__name__}")
    return key
