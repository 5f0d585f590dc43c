"""The low-level engine: typed calls into the engine component (captchaai:engine@0.3.0).

An :class:`Engine` is one component instance (its own wasmtime Store); the compiled component is
shared by the whole process. It is not thread-safe: the solvers serialize calls with a lock.
Nothing here sends or waits; see :mod:`captchaai_engine.solver` for drivers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Tuple, Union

from . import _component
from .errors import EngineMisuse, Failure, FailureClass, FailureOrigin, SnapshotError, SolveTimesError, WithKeyError
from .tasks import Task, task_json
from .types import (
    Config,
    KeylessRequest,
    Request,
    RequestKind,
    Response,
    Solution,
    ThreadsInfo,
    TransportErrorKind,
)


@dataclass(frozen=True)
class Send:
    """Send ``request`` at its ``at`` (sleep until then), then report the result. A keyless
    solve's request is a :class:`KeylessRequest`: send ``Engine.with_key`` of it."""

    request: Union[Request, KeylessRequest]


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
    #: The WIT resource, which names its functions.
    _RESOURCE = "solve"

    def __init__(self, engine: "Engine", resource: Any, task_type: str) -> None:
        self._engine = engine
        self._resource = resource
        self.task_type = task_type

    def __repr__(self) -> str:
        return f"{type(self).__name__}(task_type={self.task_type!r})"


class KeylessSolveHandle(SolveHandle):
    """A solve without the key (a WIT ``keyless-solve``): its requests are
    :class:`KeylessRequest` objects, which ``Engine.with_key`` fills at send time."""

    __slots__ = ()
    _RESOURCE = "keyless-solve"


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


def _request(r: Mapping[str, Any], keyless: bool = False) -> Union[Request, KeylessRequest]:
    tag, body = r["body"]
    return (KeylessRequest if keyless else Request)(
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
            return Send(_request(payload, isinstance(handle, KeylessSolveHandle)))
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

    def create_keyless(self, task: Union[Task, Mapping[str, Any], str], config: Optional[Config], now: int,
                       times: Optional[SolveTimes] = None) -> Union[KeylessSolveHandle, Failure]:
        """:meth:`create` without the key: a keyless solve, whose requests hold a placeholder
        where the key goes (:class:`KeylessRequest`), for hosts that store every request they
        send. Send :meth:`with_key` of each and feed replies back through :meth:`without_key`;
        then it decides exactly as a solve created with the key."""
        text = task_json(task)
        wit_config = (config or Config())._to_wit()
        if times is None:
            result = self._call("[static]keyless-solve.create", text, wit_config, now)
        else:
            result = self._call("[static]keyless-solve.create-with-times", text, wit_config, now,
                                self._own_times(times))
        tag, value = result
        if tag == "err":
            return _failure(value)
        return KeylessSolveHandle(self, value, self._call("[method]keyless-solve.task-type", value))

    def restore_keyless(self, snapshot: str) -> KeylessSolveHandle:
        """Continues any snapshot (of a solve with or without the key) as a keyless solve."""
        if not isinstance(snapshot, str):
            raise TypeError(f"a snapshot is a str, not {type(snapshot).__name__}")
        tag, value = self._call("[static]keyless-solve.restore", snapshot)
        if tag == "err":
            error, detail = value
            raise SnapshotError(error.replace("-", "_"), None if detail is None else str(detail))
        return KeylessSolveHandle(self, value, self._call("[method]keyless-solve.task-type", value))

    def with_key(self, request: KeylessRequest, key: str) -> Request:
        """The request to send: ``request`` with ``key`` in place of its placeholder, byte for
        byte the request a solve created with the key sends at the same point. Call it where the
        key is, at send time; raises :class:`WithKeyError` for a malformed key or a request that
        holds no placeholder."""
        if not isinstance(request, KeylessRequest):
            raise TypeError(f"with_key takes a KeylessRequest, not {type(request).__name__}")
        wit = {
            "id": request.id,
            "kind": RequestKind(request.kind).value.replace("_", "-"),
            "at": request.at,
            "url": request.url,
            "content-type": request.content_type,
            "body": ("form", request.body) if isinstance(request.body, str) else ("multipart", bytes(request.body)),
            "timeout-ms": request.timeout_ms,
        }
        tag, value = self._call("with-key", wit, _key(key))
        if tag == "err":
            kind, detail = value
            raise WithKeyError(kind.replace("-", "_"), detail)
        return _request(value)

    def without_key(self, response: Response, key: str) -> Response:
        """``response`` with every occurrence of ``key`` replaced by ``<redacted>``, as a solve
        with the key treats a reply before reading it: what a host of a keyless solve stores
        and feeds back."""
        wit = self._call("without-key", {"status": response.status, "body": response.body}, _key(key))
        return Response(wit["status"], wit["body"])

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
        return self._output(self._call(_method(handle, "poll-output"), self._own(handle), now), handle)

    def handle_response(self, handle: SolveHandle, now: int, request_id: int, response: Response) -> Output:
        """Feeds back the reply to ``request_id`` received at ``now``; returns the next output."""
        wit = {"status": response.status, "body": response.body}
        return self._output(self._call(_method(handle, "handle-response"), self._own(handle), now, request_id, wit),
                            handle)

    def handle_transport_error(self, handle: SolveHandle, now: int, request_id: int,
                               error: TransportErrorKind) -> Output:
        """Reports that ``request_id`` failed without a reply at ``now``; returns the next output."""
        kind = TransportErrorKind(error).value
        return self._output(
            self._call(_method(handle, "handle-transport-error"), self._own(handle), now, request_id, kind), handle)

    def snapshot(self, handle: SolveHandle) -> str:
        """The whole in-flight state as versioned JSON, without the key."""
        return self._call(_method(handle, "snapshot"), self._own(handle))

    def snapshot_base(self, handle: SolveHandle) -> str:
        """The part of the snapshot that never changes during a solve (task and config)."""
        _keyed(handle)
        return self._call("[method]solve.snapshot-base", self._own(handle))

    def snapshot_state(self, handle: SolveHandle) -> str:
        """The part that changes with each result (a few hundred bytes)."""
        _keyed(handle)
        return self._call("[method]solve.snapshot-state", self._own(handle))

    def task_id(self, handle: SolveHandle) -> Optional[str]:
        """The current CaptchaAI task id, once a submit was accepted."""
        return self._call(_method(handle, "task-id"), self._own(handle))

    def deadline(self, handle: SolveHandle) -> Optional[int]:
        """When the deadline passes (epoch ms), once the first submit was sent."""
        return self._call(_method(handle, "deadline"), self._own(handle))

    def ends_by(self, handle: SolveHandle) -> Optional[int]:
        """The latest time the solve can still wait on CaptchaAI (epoch ms): its deadline plus
        one request timeout."""
        return self._call(_method(handle, "ends-by"), self._own(handle))

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

    def thread_gate(self, plan_threads: int, reserve: int) -> Union["ThreadGate", Failure]:
        """The engine's thread gate: admits at most ``plan_threads - reserve`` solves at once and
        queues the rest in arrival order; a failure when the reserve leaves no thread."""
        tag, value = self._call("[static]thread-gate.create", plan_threads, reserve)
        if tag == "err":
            return _failure(value)
        return ThreadGate(self, value)

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


class ThreadGate:
    """The engine's thread gate (a WIT ``thread-gate``) inside an :class:`Engine`: tickets are
    admitted in arrival order while fewer than ``capacity`` run. Admission is
    ``("admitted", None)`` or ``("queued", solves_ahead)``."""

    __slots__ = ("_engine", "_resource")

    def __init__(self, engine: Engine, resource: Any) -> None:
        self._engine = engine
        self._resource = resource

    def __repr__(self) -> str:
        return "ThreadGate()" if self._resource is None else (
            f"ThreadGate(capacity={self.capacity}, running={self.running}, queued={self.queued})")

    def _call(self, name: str, *args: Any) -> Any:
        if self._resource is None:
            raise ValueError("this thread gate was dropped")
        return self._engine._call(f"[method]thread-gate.{name}", self._resource, *args)

    def enter(self) -> Tuple[int, Tuple[str, Optional[int]]]:
        """A new ticket and its admission."""
        ticket, admission = self._call("enter")
        return ticket, admission

    def admission(self, ticket: int) -> Optional[Tuple[str, Optional[int]]]:
        """Where ``ticket`` stands; None if the gate does not hold it."""
        return self._call("admission", ticket)

    def leave(self, ticket: int) -> Optional[List[int]]:
        """Ends a running ticket or withdraws a queued one; the tickets admitted as a result
        (None if the gate does not hold it)."""
        return self._call("leave", ticket)

    def set_plan(self, plan_threads: int) -> Union[List[int], Failure]:
        """Applies a new plan size; the tickets newly admitted."""
        tag, value = self._call("set-plan", plan_threads)
        return _failure(value) if tag == "err" else value

    @property
    def capacity(self) -> int:
        return self._call("capacity")

    @property
    def running(self) -> int:
        return self._call("running")

    @property
    def queued(self) -> int:
        return self._call("queued")

    def drop(self) -> None:
        """Frees the gate."""
        resource, self._resource = self._resource, None
        if resource is not None:
            self._engine._instance.drop(resource)


def _keyed(handle: SolveHandle) -> None:
    if isinstance(handle, KeylessSolveHandle):
        raise TypeError("a keyless solve has no snapshot parts: use snapshot()")


def _method(handle: SolveHandle, name: str) -> str:
    return f"[method]{handle._RESOURCE}.{name}"


def _key(key: Any) -> str:
    if not isinstance(key, str):
        raise TypeError(f"the API key must be a str, not {type(key).__name__}")
    return key
