"""Exceptions. A solve that ends without an answer raises a :class:`CaptchaAIError` subclass chosen
by the engine's failure class (never by matching code strings). None of them ever holds the key:
the engine's messages never contain it, and these classes add only the engine's fields."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any


class FailureClass(str, Enum):
    """What a failure means for the caller (the WIT ``failure-class``)."""

    PERMANENT = "permanent"
    """Fix the key, plan, account or task first; retrying unchanged cannot help."""
    TRANSIENT = "transient"
    """Worth trying again later (see ``retry_after``)."""
    UNSOLVABLE = "unsolvable"
    """The service gave up on the captcha; a fresh task may succeed."""


class FailureOrigin(str, Enum):
    """Where a failure comes from (the WIT ``failure-origin``)."""

    INPUT = "input"
    """The task, config or key was refused before anything was sent."""
    SERVICE = "service"
    """CaptchaAI answered with this code (or kept every thread busy)."""
    NO_ANSWER = "no_answer"
    """Transport errors, unreadable replies, or the deadline passed."""


@dataclass(frozen=True)
class Failure:
    """The engine's failure record, as the WIT gives it."""

    code: str
    failure_class: FailureClass
    origin: FailureOrigin
    message: str
    retry_after_ms: int | None = None
    field: str | None = None
    task_id: str | None = None

    def to_exception(self) -> CaptchaAIError:
        """The exception for this failure: its class decides the type."""
        return _BY_CLASS[self.failure_class](self)

    def to_dict(self) -> dict[str, Any]:
        """``{"code", "class", "origin", "message", "retry_after_ms", "field", "task_id"}``."""
        return {
            "code": self.code,
            "class": self.failure_class.value,
            "origin": self.origin.value,
            "message": self.message,
            "retry_after_ms": self.retry_after_ms,
            "field": self.field,
            "task_id": self.task_id,
        }


class CaptchaAIError(Exception):
    """A solve ended without an answer. ``code`` is the raw API or engine code, ``message`` the
    engine's explanation, ``task_id`` the CaptchaAI task id once one was assigned, ``origin`` a
    :class:`FailureOrigin`, ``field`` the task or config field at fault for validation failures."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(f"{failure.code}: {failure.message}")
        self.failure = failure
        self.code = failure.code
        self.message = failure.message
        self.task_id = failure.task_id
        self.origin = failure.origin
        self.field = failure.field
        self.failure_class = failure.failure_class

    @property
    def retry_after(self) -> float | None:
        """When retrying may help, after how many seconds (None: no hint)."""
        ms = self.failure.retry_after_ms
        return None if ms is None else ms / 1000.0

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(code={self.code!r}, message={self.message!r}, "
                f"task_id={self.task_id!r}, origin={self.origin.value!r})")

    def __reduce__(self) -> tuple[type[CaptchaAIError], tuple[Failure]]:
        # Picklable: Airflow, Dagster and Prefect move exceptions between processes.
        return (type(self), (self.failure,))


class PermanentError(CaptchaAIError):
    """Fix the key, plan, account or task first; retrying unchanged cannot help."""


class TransientError(CaptchaAIError):
    """Worth trying again later: ``retry_after`` seconds, or None for no hint."""


class UnsolvableError(CaptchaAIError):
    """The service could not solve the captcha (after the configured fresh resubmissions)."""


_BY_CLASS = {
    FailureClass.PERMANENT: PermanentError,
    FailureClass.TRANSIENT: TransientError,
    FailureClass.UNSOLVABLE: UnsolvableError,
}


class EngineMisuse(Exception):
    """The host broke the engine's driving contract (a bug in the driver, not a solve failure);
    the solve is unchanged. ``kind`` is ``time_went_backwards``, ``unknown_request``,
    ``stale_response`` or ``not_due``; ``value`` the WIT payload (a time or a request id)."""

    def __init__(self, kind: str, value: int) -> None:
        super().__init__(f"engine misuse: {kind} ({value})")
        self.kind = kind
        self.value = value


class SnapshotError(ValueError):
    """A snapshot could not be restored. ``kind`` is ``malformed``, ``truncated``, ``foreign``,
    ``unsupported_version``, ``invalid`` or ``invalid_key``; ``detail`` the engine's detail."""

    def __init__(self, kind: str, detail: str | None) -> None:
        super().__init__(f"cannot restore the snapshot: {kind}" + (f" ({detail})" if detail is not None else ""))
        self.kind = kind
        self.detail = detail


class SolveTimesError(ValueError):
    """A solve-times model's text form was refused. ``kind`` is ``malformed``, ``foreign``,
    ``unsupported_version`` or ``invalid``; ``detail`` the engine's detail."""

    def __init__(self, kind: str, detail: str | None) -> None:
        super().__init__(f"cannot use the solve times: {kind}" + (f" ({detail})" if detail is not None else ""))
        self.kind = kind
        self.detail = detail


class WithKeyError(ValueError):
    """``Engine.with_key`` refused: ``kind`` is ``invalid_key`` (not 32 letters and digits;
    ``detail`` says what it got, never the key) or ``not_keyless`` (the body holds no
    placeholder: not a keyless solve's request, or one changed since)."""

    def __init__(self, kind: str, detail: str | None) -> None:
        super().__init__(f"cannot insert the key: {kind}" + (f" ({detail})" if detail is not None else ""))
        self.kind = kind
        self.detail = detail


class EngineTrap(RuntimeError):
    """The engine instance trapped (a bug in the engine, or memory exhausted); that instance is
    unusable. Solvers replace it and restore their solves from their checkpoints."""
