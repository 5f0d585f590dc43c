"""Serving CaptchaAI's own ``in.php`` / ``res.php`` (the engine's WIT ``endpoint`` interface):
reading the requests CaptchaAI's clients send into tasks and questions, and rendering the replies
CaptchaAI would send them. A host that stands in for CaptchaAI (collecting a request's parameters,
sending replies) uses these through :class:`captchaai_engine.Engine` and knows no parameter name
and no code; docs/endpoint.md has the decisions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import Failure
from .types import Solution, ThreadsInfo

IN_PHP = "in.php"
"""The submit endpoint, for :meth:`Engine.read_request`."""
RES_PHP = "res.php"
"""The answers, threads, balance and reports endpoint."""
_PATHS = {IN_PHP: "in-php", RES_PHP: "res-php"}

HOST_REFUSALS = ("unknown_key", "unknown_id", "busy", "disabled", "too_large")
"""The refusals a host decides on (:meth:`Engine.render_refusal`)."""

PENDING = "pending"
"""A solve that has not finished, for :meth:`Engine.render_state`."""
NOT_FOUND = "not_found"
"""An id that is no solve of the caller's."""


@dataclass(frozen=True)
class ReplyFormat:
    """How a client asked to be answered: JSON (``json=1``) or plain text, and CORS."""

    json: bool = False
    cors: bool = False

    def _to_wit(self) -> dict[str, Any]:
        return {"json": self.json, "cors": self.cors}


@dataclass(frozen=True)
class EndpointReply:
    """A reply to send exactly as it is."""

    status: int
    content_type: str
    headers: tuple[tuple[str, str], ...]
    body: str


@dataclass(frozen=True)
class SubmitRequest:
    """An ``in.php`` request the engine accepts: the client's key (authenticate it first), the
    task as the canonical task JSON :meth:`Engine.create` takes, its type, and the format."""

    key: str
    task_json: str
    task_type: str
    format: ReplyFormat


@dataclass(frozen=True)
class ResRequest:
    """A ``res.php`` request the engine accepts. ``action`` is ``("get", id)``,
    ``("get_many", [ids])``, ``("threads_info", None)``, ``("balance", None)``,
    ``("report_good", id)`` or ``("report_bad", id)``."""

    key: str
    action: tuple[str, Any]
    format: ReplyFormat


@dataclass(frozen=True)
class Refusal:
    """A request refused as CaptchaAI would refuse it. ``key`` is the well-formed key the request
    carried, if any: a host answers an unknown one with the ``unknown_key`` refusal instead."""

    code: str
    message: str
    key: str | None
    reply: EndpointReply


State = str | Solution | Failure
"""A solve as a ``get`` sees it: :data:`PENDING`, :data:`NOT_FOUND`, its solution or its failure."""


def _format(f: Mapping[str, Any]) -> ReplyFormat:
    return ReplyFormat(json=f["json"], cors=f["cors"])


def _reply(r: Mapping[str, Any]) -> EndpointReply:
    headers = tuple((h["name"], h["value"]) for h in r["headers"])
    return EndpointReply(status=r["status"], content_type=r["content-type"], headers=headers, body=r["body"])


def _refusal(r: Mapping[str, Any]) -> Refusal:
    return Refusal(code=r["code"], message=r["message"], key=r["key"], reply=_reply(r["reply"]))


def _path(path: str) -> str:
    if path not in _PATHS:
        raise ValueError(f"the path is {IN_PHP!r} or {RES_PHP!r}, not {path!r}")
    return _PATHS[path]


def _params(params: Sequence[tuple[str, str]]) -> list[Any]:
    out = []
    for name, value in params:
        if not isinstance(name, str) or not isinstance(value, str):
            raise TypeError("parameters are (str, str) pairs")
        out.append({"name": name, "value": value})
    return out


def _uploads(uploads: Sequence[tuple[str, bytes]]) -> list[Any]:
    out = []
    for name, data in uploads:
        if not isinstance(name, str) or not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError("uploads are (str, bytes) pairs")
        out.append({"name": name, "bytes": bytes(data)})
    return out


def _request(result: Any) -> SubmitRequest | ResRequest | Refusal:
    tag, value = result
    if tag == "err":
        return _refusal(value)
    kind, r = value
    if kind == "submit":
        return SubmitRequest(key=r["key"], task_json=r["task-json"], task_type=r["task-type"],
                             format=_format(r["format"]))
    action, payload = r["action"]
    return ResRequest(key=r["key"], action=(action.replace("-", "_"), payload), format=_format(r["format"]))


def _failure_to_wit(f: Failure) -> dict[str, Any]:
    return {
        "code": f.code,
        "class": f.failure_class.value,
        "origin": f.origin.value.replace("_", "-"),
        "message": f.message,
        "retry-after-ms": f.retry_after_ms,
        "field": f.field,
        "task-id": f.task_id,
    }


def _state(state: State) -> Any:
    if isinstance(state, Solution):
        return ("solved", state._to_wit())
    if isinstance(state, Failure):
        return ("failed", _failure_to_wit(state))
    if state == PENDING:
        return ("pending", None)
    if state == NOT_FOUND:
        return ("not-found", None)
    raise ValueError(f"a solve state is {PENDING!r}, {NOT_FOUND!r}, a Solution or a Failure, not {state!r}")


def _threads(info: ThreadsInfo) -> dict[str, Any]:
    return {"threads": info.threads, "working-threads": info.working_threads, "free": info.free}


def _host_refusal(name: str) -> str:
    if name not in HOST_REFUSALS:
        raise ValueError(f"a host refusal is one of {', '.join(HOST_REFUSALS)}, not {name!r}")
    return name.replace("_", "-")
