"""Typed values of the engine's WIT (captchaai:engine@0.3.0), as Python dataclasses."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any

from ._component import call_shared

_U64 = 0xFFFF_FFFF_FFFF_FFFF
_U32 = 0xFFFF_FFFF


@dataclass(frozen=True)
class Config:
    """Solve settings (the WIT ``config``). ``None`` takes the engine's default, or the captcha
    type's value for timings. Ranges are checked by the engine: an invalid value makes the solve
    fail with a permanent error from the engine naming the field."""

    base_url: str | None = None
    """Default ``https://ocr.captchaai.com``."""
    request_timeout_ms: int | None = None
    """Per-request timeout, 1,000-120,000 ms; default 30,000."""
    deadline_ms: int | None = None
    """Overall deadline from the original submit, 10 s to 1 h; default per type."""
    initial_wait_ms: int | None = None
    """Wait before the first poll, at least 1,000 ms; default per type."""
    poll_interval_ms: int | None = None
    """Wait between polls, at least 5,000 ms; default per type."""
    max_submit_retries: int | None = None
    """Submit retries after transient errors, 0-10; default 5."""
    max_poll_errors: int | None = None
    """Consecutive failed polls before giving up, 1-100; default 10."""
    unsolvable_retries: int | None = None
    """Fresh resubmissions after the service reports a captcha unsolvable, 0-5; default 1."""
    jitter_seed: int | None = None
    """Seed for wait jitter; None means no jitter."""
    max_jitter_ms: int | None = None
    """Largest jitter per wait when seeded, 0-10,000 ms; default 1,000."""
    poll_cost_ms: int | None = None
    """What one poll is worth in ms of waiting, 0-60,000; default 250. Solves created with a
    learned solve-times model poll on the schedule of least expected wait from the answer being
    ready to the poll that finds it, plus this per poll."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            if f.name == "base_url":
                if not isinstance(value, str):
                    raise TypeError(f"Config.base_url must be a str, not {type(value).__name__}")
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"Config.{f.name} must be an int or None, not {type(value).__name__}")
            limit = _U32 if f.name in _U32_FIELDS else _U64
            if not 0 <= value <= limit:
                raise ValueError(f"Config.{f.name} must be from 0 to {limit} (got {value})")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Config:
        """From the config JSON object (the same snake_case names); unknown keys are refused."""
        if not isinstance(data, Mapping):
            raise TypeError(f"a config must be a mapping, not {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown config field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return cls(**dict(data))

    def to_dict(self) -> dict[str, Any]:
        """The fields that are set, as a config JSON object."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    def _to_wit(self) -> dict[str, Any]:
        return {f.name.replace("_", "-"): getattr(self, f.name) for f in fields(self)}


_U32_FIELDS = {"max_submit_retries", "max_poll_errors", "unsolvable_retries"}


class RequestKind(str, Enum):
    """What a request is for (for logs and metrics; every kind is sent the same way)."""

    SUBMIT = "submit"
    POLL = "poll"
    THREADS_INFO = "threads_info"
    BALANCE = "balance"
    REPORT = "report"


class TransportErrorKind(str, Enum):
    """How a request failed without a reply (the WIT ``transport-error``)."""

    TIMEOUT = "timeout"
    """No reply within the request's ``timeout_ms``."""
    CONNECT = "connect"
    """Could not connect: the request was not delivered."""
    BROKEN = "broken"
    """The connection broke after sending: the request may have been processed."""


@dataclass(frozen=True)
class Request:
    """An HTTP ``POST`` for the host to send exactly as given, at ``at`` (epoch ms). The body holds
    the API key, so it is left out of ``repr``."""

    id: int
    kind: RequestKind
    at: int
    url: str
    content_type: str
    body: str | bytes = field(repr=False)
    """Form text (``str``) or multipart bytes (``bytes``)."""
    timeout_ms: int

    @property
    def body_bytes(self) -> bytes:
        """The body to send on the wire."""
        return self.body.encode("utf-8") if isinstance(self.body, str) else self.body


@dataclass(frozen=True)
class KeylessRequest:
    """A keyless solve's request (the WIT ``keyless-request``): a :class:`Request` with the
    placeholder ``{captchaai-key}`` in the body where the key goes. It holds no key, so it may be
    stored and logged; it is never sent as it is: ``Engine.with_key`` makes the
    :class:`Request` to send, at send time, where the key is."""

    id: int
    kind: RequestKind
    at: int
    url: str
    content_type: str
    body: str | bytes
    """Form text (``str``) or multipart bytes (``bytes``), with the placeholder."""
    timeout_ms: int


@dataclass(frozen=True)
class Response:
    """A reply as received: the status and the body as text (invalid UTF-8 replaced with U+FFFD;
    :meth:`from_bytes` does that)."""

    status: int
    body: str

    @classmethod
    def from_bytes(cls, status: int, body: bytes) -> Response:
        return cls(status, body.decode("utf-8", errors="replace"))


@dataclass(frozen=True)
class Solution:
    """A solved captcha. Times are Unix epoch milliseconds.

    ``answer`` is the token or text; for structured answers (GeeTest, Lemin, grid, BLS) it is the
    compact JSON text and ``answer_json`` its parsed value (else None)."""

    answer: str
    answer_json: Any
    is_structured: bool
    task_id: str | None
    type: str | None
    """The task's captcha type (``turnstile``, ...), when known."""
    user_agent: str | None
    submitted_at: int
    solved_at: int
    elapsed_ms: int
    polls: int
    attempts: int
    expires_at: int | None
    """When the token stops being usable, where the type's lifetime is known."""

    @property
    def token(self) -> str:
        """The answer text (alias of ``answer``)."""
        return self.answer

    def is_fresh(self, now: float | None = None, max_age: float | None = None) -> bool:
        """Whether the answer may still be used at ``now`` (epoch seconds, default the current
        time): no older than ``max_age`` seconds (None: no age limit) and not past
        ``expires_at``. Decided by the engine's ``is-fresh``."""
        now_ms = int(round((time.time() if now is None else now) * 1000))
        max_age_ms = _U64 if max_age is None else int(round(max_age * 1000))
        return bool(call_shared("is-fresh", self._to_wit(), max(now_ms, 0), max(0, min(max_age_ms, _U64))))

    def to_dict(self) -> dict[str, Any]:
        """The engine's client JSON form: ``{"answer", "user_agent", "task_id", "submitted_at",
        "solved_at", "elapsed_ms", "polls", "attempts", "expires_at"}`` with ``answer`` the text or
        the structured value (the engine's ``solution-json``), plus ``"type"``."""
        return {**json.loads(call_shared("solution-json", self._to_wit())), "type": self.type}

    @classmethod
    def _from_wit(cls, s: dict[str, Any], task_type: str | None) -> Solution:
        tag, text = s["answer"]
        structured = tag == "json"
        return cls(
            answer=text,
            answer_json=json.loads(text) if structured else None,
            is_structured=structured,
            task_id=s["task-id"],
            type=task_type,
            user_agent=s["user-agent"],
            submitted_at=s["submitted-at"],
            solved_at=s["solved-at"],
            elapsed_ms=s["elapsed-ms"],
            polls=s["polls"],
            attempts=s["attempts"],
            expires_at=s["expires-at"],
        )

    def _to_wit(self) -> dict[str, Any]:
        return {
            "answer": ("json" if self.is_structured else "text", self.answer),
            "user-agent": self.user_agent,
            "task-id": self.task_id,
            "submitted-at": self.submitted_at,
            "solved-at": self.solved_at,
            "elapsed-ms": self.elapsed_ms,
            "polls": self.polls,
            "attempts": self.attempts,
            "expires-at": self.expires_at,
        }


@dataclass(frozen=True)
class ThreadsInfo:
    """The plan's thread cap and how many threads are busy."""

    threads: int
    working_threads: int
    free: int
