"""The low-level engine: typed calls into the engine component (captchaai:engine@0.3.0).

An :class:`Engine` is one component instance (its own wasmtime Store); the compiled component is
shared by the whole process. It is not thread-safe: the solvers serialize calls with a lock.
Nothing here sends or waits; see :mod:`captchaai_engine.solver` for drivers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast, overload

from . import _component
from . import endpoint as _endpoint
from .errors import EngineMisuse, Failure, FailureClass, FailureOrigin, SnapshotError, SolveTimesError, WithKeyError
from .tasks import TaskLike, task_json
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

#: What a :class:`Send` carries: a :class:`Request`, or a keyless solve's :class:`KeylessRequest`.
R = TypeVar("R", Request, KeylessRequest)


@dataclass(frozen=True)
class Send(Generic[R]):
    """Send ``request`` at its ``at`` (sleep until then), then report the result. A keyless
    solve's request is a :class:`KeylessRequest`: send ``Engine.with_key`` of it."""

    request: R


@dataclass(frozen=True)
class Solved:
    """Terminal: the answer."""

    solution: Solution


@dataclass(frozen=True)
class Failed:
    """Terminal: the solve ended without an answer."""

    failure: Failure


Output = Send[Request] | Solved | Failed
#: A keyless solve's outputs.
KeylessOutput = Send[KeylessRequest] | Solved | Failed
Reply = Response | TransportErrorKind


class SolveHandle:
    """One in-flight solve inside an :class:`Engine` (a WIT ``solve`` resource). The key lives
    only inside the engine."""

    __slots__ = ("_resource", "task_type", "_engine")
    #: The WIT resource, which names its functions.
    _RESOURCE = "solve"

    def __init__(self, engine: Engine, resource: Any, task_type: str) -> None:
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


def _request(r: Mapping[str, Any]) -> Request:
    return Request(**_request_fields(r))


def _keyless_request(r: Mapping[str, Any]) -> KeylessRequest:
    return KeylessRequest(**_request_fields(r))


def _request_fields(r: Mapping[str, Any]) -> dict[str, Any]:
    tag, body = r["body"]
    return dict(
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

    def __init__(self, engine: Engine, resource: Any, task_type: str) -> None:
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
        return cast(int, _component.call_shared("[static]solve-times.min-observations"))


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

    def _output(self, result: Any, handle: SolveHandle) -> Output | KeylessOutput:
        tag, value = result
        if tag == "err":
            kind, payload = value
            raise EngineMisuse(kind.replace("-", "_"), payload)
        kind, payload = value
        if kind == "send":
            if isinstance(handle, KeylessSolveHandle):
                return Send(_keyless_request(payload))
            return Send(_request(payload))
        if kind == "solved":
            return Solved(Solution._from_wit(payload, handle.task_type))
        return Failed(_failure(payload))

    # -- solves --------------------------------------------------------------------------------

    def create(self, task: TaskLike, key: str, config: Config | None,
               now: int, times: SolveTimes | None = None) -> SolveHandle | Failure:
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

    def create_keyless(self, task: TaskLike, config: Config | None, now: int,
                       times: SolveTimes | None = None) -> KeylessSolveHandle | Failure:
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

    @overload
    def poll_output(self, handle: KeylessSolveHandle, now: int) -> KeylessOutput: ...  # type: ignore[overload-overlap]
    @overload
    def poll_output(self, handle: SolveHandle, now: int) -> Output: ...

    def poll_output(self, handle: SolveHandle, now: int) -> Output | KeylessOutput:
        """What to do at ``now``: the next request, or the terminal outcome (sticky)."""
        return self._output(self._call(_method(handle, "poll-output"), self._own(handle), now), handle)

    @overload
    def handle_response(  # type: ignore[overload-overlap]
        self, handle: KeylessSolveHandle, now: int, request_id: int,
                        response: Response) -> KeylessOutput: ...
    @overload
    def handle_response(self, handle: SolveHandle, now: int, request_id: int, response: Response) -> Output: ...

    def handle_response(self, handle: SolveHandle, now: int, request_id: int,
                        response: Response) -> Output | KeylessOutput:
        """Feeds back the reply to ``request_id`` received at ``now``; returns the next output."""
        wit = {"status": response.status, "body": response.body}
        return self._output(self._call(_method(handle, "handle-response"), self._own(handle), now, request_id, wit),
                            handle)

    @overload
    def handle_transport_error(  # type: ignore[overload-overlap]
        self, handle: KeylessSolveHandle, now: int, request_id: int,
                               error: TransportErrorKind) -> KeylessOutput: ...
    @overload
    def handle_transport_error(self, handle: SolveHandle, now: int, request_id: int,
                               error: TransportErrorKind) -> Output: ...

    def handle_transport_error(self, handle: SolveHandle, now: int, request_id: int,
                               error: TransportErrorKind) -> Output | KeylessOutput:
        """Reports that ``request_id`` failed without a reply at ``now``; returns the next output."""
        kind = TransportErrorKind(error).value
        return self._output(
            self._call(_method(handle, "handle-transport-error"), self._own(handle), now, request_id, kind), handle)

    def snapshot(self, handle: SolveHandle) -> str:
        """The whole in-flight state as versioned JSON, without the key."""
        return cast(str, self._call(_method(handle, "snapshot"), self._own(handle)))

    def snapshot_base(self, handle: SolveHandle) -> str:
        """The part of the snapshot that never changes during a solve (task and config)."""
        _keyed(handle)
        return cast(str, self._call("[method]solve.snapshot-base", self._own(handle)))

    def snapshot_state(self, handle: SolveHandle) -> str:
        """The part that changes with each result (a few hundred bytes)."""
        _keyed(handle)
        return cast(str, self._call("[method]solve.snapshot-state", self._own(handle)))

    def task_id(self, handle: SolveHandle) -> str | None:
        """The current CaptchaAI task id, once a submit was accepted."""
        return cast("str | None", self._call(_method(handle, "task-id"), self._own(handle)))

    def deadline(self, handle: SolveHandle) -> int | None:
        """When the deadline passes (epoch ms), once the first submit was sent."""
        return cast("int | None", self._call(_method(handle, "deadline"), self._own(handle)))

    def ends_by(self, handle: SolveHandle) -> int | None:
        """The latest time the solve can still wait on CaptchaAI (epoch ms): its deadline plus
        one request timeout."""
        return cast("int | None", self._call(_method(handle, "ends-by"), self._own(handle)))

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
        return cast(str, self._call("[method]solve-times.to-text", self._own_times(times)))

    def observe(self, times: SolveTimes, solution: Solution) -> bool:
        """Learns from a solution of the model's type; returns whether it was used."""
        return cast(bool, self._call("[method]solve-times.observe", self._own_times(times), solution._to_wit()))

    def first_wait_ms(self, times: SolveTimes) -> int | None:
        """The first wait the model gives a new solve, or None while the type's table applies."""
        return cast("int | None", self._call("[method]solve-times.first-wait-ms", self._own_times(times)))

    def observations(self, times: SolveTimes) -> int:
        """Solves the model learned from."""
        return cast(int, self._call("[method]solve-times.observations", self._own_times(times)))

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
        return cast(bool, self._call("is-fresh", solution._to_wit(), now, max_age_ms))

    def solution_json(self, solution: Solution) -> str:
        """The engine's client JSON for ``solution``."""
        return cast(str, self._call("solution-json", solution._to_wit()))

    # -- account -------------------------------------------------------------------------------

    def threads_info_request(self, key: str, config: Config | None = None) -> Request | Failure:
        """The ``threadsinfo`` request for the config's base URL and timeout."""
        return self._account_request("threads-info-request", key, config)

    def parse_threads_info(self, reply: Reply) -> ThreadsInfo | Failure:
        """Reads what came back for a ``threadsinfo`` request."""
        tag, value = self._call("parse-threads-info", _reply(reply))
        if tag == "err":
            return _failure(value)
        return ThreadsInfo(threads=value["threads"], working_threads=value["working-threads"], free=value["free"])

    def balance_request(self, key: str, config: Config | None = None) -> Request | Failure:
        """The ``getbalance`` request."""
        return self._account_request("balance-request", key, config)

    def parse_balance(self, reply: Reply) -> float | Failure:
        """Reads what came back for a ``getbalance`` request."""
        tag, value = self._call("parse-balance", _reply(reply))
        return _failure(value) if tag == "err" else float(value)

    def thread_gate(self, plan_threads: int, reserve: int = 0) -> ThreadGate | Failure:
        """The engine's thread gate: admits at most ``plan_threads - reserve`` solves at once and
        queues the rest in arrival order; a failure when the reserve leaves no thread."""
        tag, value = self._call("[static]thread-gate.create", plan_threads, reserve)
        if tag == "err":
            return _failure(value)
        return ThreadGate(self, value)

    def thread_capacity(self, plan_threads: int, reserve: int) -> int | Failure:
        """How many solves the engine's thread gate admits at once for a plan of
        ``plan_threads`` less ``reserve`` threads; a failure when the reserve leaves none."""
        tag, value = self._call("[static]thread-gate.create", plan_threads, reserve)
        if tag == "err":
            return _failure(value)
        try:
            return cast(int, self._call("[method]thread-gate.capacity", value))
        finally:
            self._instance.drop(value)

    # -- serving CaptchaAI's own in.php / res.php (captchaai_engine.endpoint) -------------------

    def read_request(
        self, path: str, params: Sequence[tuple[str, str]], uploads: Sequence[tuple[str, bytes]] = ()
    ) -> _endpoint.SubmitRequest | _endpoint.ResRequest | _endpoint.Refusal:
        """Reads a request to ``path`` (``"in.php"`` or ``"res.php"``): its text parameters in
        order (query string, then body; invalid UTF-8 replaced with U+FFFD) and its uploaded file
        parts. Gives the task or the question, or the refusal CaptchaAI would answer."""
        return _endpoint._request(self._call("read-request", _endpoint._path(path), _endpoint._params(params),
                                             _endpoint._uploads(uploads)))

    def read_format(self, path: str, params: Sequence[tuple[str, str]]) -> _endpoint.ReplyFormat:
        """How a request to ``path`` asks to be answered (``json``, ``header_acao``); plain text
        where those are malformed. For answering a refused request's unknown key:
        ``render_refusal(read_format(path, params), "unknown_key")``."""
        return _endpoint._format(self._call("read-format", _endpoint._path(path), _endpoint._params(params)))

    def render_submitted(self, fmt: _endpoint.ReplyFormat, task_type: str, task_id: str) -> _endpoint.EndpointReply:
        """The reply to an accepted submit whose solve has ``task_id`` (1-20 digits)."""
        return _endpoint._reply(self._call("render-submitted", fmt._to_wit(), task_type, task_id))

    def render_state(self, fmt: _endpoint.ReplyFormat, task_type: str,
                     state: _endpoint.State) -> _endpoint.EndpointReply:
        """The reply to a ``get`` of one solve of ``task_type``."""
        return _endpoint._reply(self._call("render-state", fmt._to_wit(), task_type, _endpoint._state(state)))

    def render_states(self, fmt: _endpoint.ReplyFormat,
                      states: Sequence[_endpoint.State]) -> _endpoint.EndpointReply:
        """The reply to a ``get`` of several solves."""
        return _endpoint._reply(self._call("render-states", fmt._to_wit(), [_endpoint._state(s) for s in states]))

    def render_threads(self, fmt: _endpoint.ReplyFormat, info: ThreadsInfo) -> _endpoint.EndpointReply:
        """The reply to ``threadsinfo`` (the caller's share of the plan)."""
        return _endpoint._reply(self._call("render-threads", fmt._to_wit(), _endpoint._threads(info)))

    def render_balance(self, fmt: _endpoint.ReplyFormat, balance: float) -> _endpoint.EndpointReply:
        """The reply to ``getbalance``."""
        return _endpoint._reply(self._call("render-balance", fmt._to_wit(), float(balance)))

    def render_reported(self, fmt: _endpoint.ReplyFormat) -> _endpoint.EndpointReply:
        """The reply to a report CaptchaAI recorded."""
        return _endpoint._reply(self._call("render-reported", fmt._to_wit()))

    def render_failure(self, fmt: _endpoint.ReplyFormat, failure: Failure) -> _endpoint.EndpointReply:
        """The reply for an account call or report that failed."""
        return _endpoint._reply(self._call("render-failure", fmt._to_wit(), _endpoint._failure_to_wit(failure)))

    def render_refusal(self, fmt: _endpoint.ReplyFormat | None, refusal: str) -> _endpoint.Refusal:
        """The refusal for a host's decision (``unknown_key``, ``unknown_id``, ``busy``,
        ``disabled``, ``too_large``); ``fmt`` None renders plain text."""
        wit_format = None if fmt is None else fmt._to_wit()
        return _endpoint._refusal(self._call("render-refusal", wit_format, _endpoint._host_refusal(refusal)))

    def report_request(self, key: str, task_id: str, good: bool,
                       config: Config | None = None) -> Request | Failure:
        """The ``reportgood`` (``good``) or ``reportbad`` request for CaptchaAI task ``task_id``."""
        tag, value = self._call("report-request", _key(key), (config or Config())._to_wit(), task_id, bool(good))
        return _failure(value) if tag == "err" else _request(value)

    def parse_report(self, reply: Reply) -> Failure | None:
        """Reads what came back for a report: None when it was recorded, else the failure."""
        tag, value = self._call("parse-report", _reply(reply))
        return _failure(value) if tag == "err" else None

    def _account_request(self, name: str, key: str, config: Config | None) -> Request | Failure:
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

    def enter(self) -> tuple[int, tuple[str, int | None]]:
        """A new ticket and its admission."""
        ticket, admission = self._call("enter")
        return ticket, admission

    def admission(self, ticket: int) -> tuple[str, int | None] | None:
        """Where ``ticket`` stands; None if the gate does not hold it."""
        return cast("tuple[str, int | None] | None", self._call("admission", ticket))

    def leave(self, ticket: int) -> list[int] | None:
        """Ends a running ticket or withdraws a queued one; the tickets admitted as a result
        (None if the gate does not hold it)."""
        return cast("list[int] | None", self._call("leave", ticket))

    def set_plan(self, plan_threads: int) -> list[int] | Failure:
        """Applies a new plan size; the tickets newly admitted."""
        tag, value = self._call("set-plan", plan_threads)
        return _failure(value) if tag == "err" else cast("list[int]", value)

    @property
    def capacity(self) -> int:
        return cast(int, self._call("capacity"))

    @property
    def running(self) -> int:
        return cast(int, self._call("running"))

    @property
    def queued(self) -> int:
        return cast(int, self._call("queued"))

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
