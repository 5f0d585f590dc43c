"""What the framework modules share: a per-process clock per time scale, the plain-JSON forms of
solutions and failures that frameworks store between processes (trigger events, metadata), and
:class:`ConfigurationError`. Imports no framework."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping
from typing import Any

from ..engine import Engine
from ..errors import CaptchaAIError, Failure, FailureClass, FailureOrigin
from ..solver import Clock
from ..types import Solution


class ConfigurationError(Exception):
    """The integration is set up wrong (a missing secret or concurrency limit, a malformed
    setting): fix the setup; retrying unchanged cannot help, so the integrations never retry it.
    Its message names what is missing and how to provide it, never a key."""


def plan_capacity(threads: int, spare: int) -> int:
    """Solves a plan of ``threads`` threads runs at once with ``spare`` kept free: the engine's
    thread gate decides (``threads - spare``); :class:`ConfigurationError` when ``spare`` leaves
    no thread."""
    capacity = Engine().thread_capacity(threads, spare)
    if isinstance(capacity, Failure):
        raise ConfigurationError(f"{capacity.message}: lower spare")
    return capacity


_clocks: dict[float, Clock] = {}
_clocks_lock = threading.Lock()


def clock_for(time_scale: float = 1.0) -> Clock:
    """The process's :class:`Clock` for ``time_scale``: one per scale, so every solver of a process
    (an operator and the trigger that resumes its snapshot, say) reads the same time. Scale 1 is
    real time (consistent across processes); any other scale is for tests against an emulator
    started with the same ``--time-scale``, and is consistent only within one process."""
    scale = float(time_scale)
    with _clocks_lock:
        clock = _clocks.get(scale)
        if clock is None:
            clock = _clocks[scale] = Clock(scale)
        return clock


def solution_to_json(solution: Solution) -> dict[str, Any]:
    """Every field of ``solution`` as a JSON object (for trigger events); the inverse is
    :func:`solution_from_json`. It holds the answer, so it is for the step that uses it."""
    return dataclasses.asdict(solution)


def solution_from_json(data: Mapping[str, Any]) -> Solution:
    """The :class:`Solution` that :func:`solution_to_json` gave ``data`` for."""
    names = {f.name for f in dataclasses.fields(Solution)}
    missing = sorted(names - set(data))
    if missing:
        raise ValueError(f"not a solution: missing {', '.join(missing)}")
    return Solution(**{name: data[name] for name in names})


def failure_to_json(error: CaptchaAIError) -> dict[str, Any]:
    """The engine's failure record of ``error`` as a JSON object (never the key: the engine's
    fields only)."""
    return error.failure.to_dict()


def error_from_json(data: Mapping[str, Any]) -> CaptchaAIError:
    """The typed exception for a failure record from :func:`failure_to_json`."""
    failure = Failure(
        code=data["code"],
        failure_class=FailureClass(data["class"]),
        origin=FailureOrigin(data["origin"]),
        message=data["message"],
        retry_after_ms=data.get("retry_after_ms"),
        field=data.get("field"),
        task_id=data.get("task_id"),
    )
    return failure.to_exception()
