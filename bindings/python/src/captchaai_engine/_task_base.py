"""What every task has, by hand: the JSON form (:meth:`TaskBase.to_dict`) and the helpers that
accept a task in any of its forms. The task classes themselves are generated from the engine's
type table into :mod:`captchaai_engine.tasks` (``cargo xtask python-types``)."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import MISSING, fields
from typing import Any, ClassVar

Image = str | bytes
"""A base64 string (a ``data:`` URI prefix is allowed) or the raw image bytes."""


class TaskBase:
    """The methods of every task dataclass (:class:`captchaai_engine.Task` and its subclasses)."""

    type: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        """The task JSON object: ``{"type": ..., <set fields>, "extra": {...}}``; bytes become
        base64 text."""
        out: dict[str, Any] = {"type": self.type}
        for f in fields(self):  # type: ignore[arg-type]  # every subclass is a dataclass
            value = getattr(self, f.name)
            if value is None or (f.name == "extra" and not value):
                continue
            if isinstance(value, bytes):
                value = base64.b64encode(value).decode("ascii")
            elif isinstance(value, (list, tuple)):
                value = [base64.b64encode(v).decode("ascii") if isinstance(v, bytes) else v for v in value]
            out[f.name] = value
        return out

    def to_json(self) -> str:
        """The task JSON text the engine reads."""
        return task_json(self)

    def __repr__(self) -> str:
        """The required fields, then the optional ones that are set; never proxies, cookies or
        images (their fields say ``repr=False``)."""
        shown = [f for f in fields(self) if f.repr]  # type: ignore[arg-type]
        required = [f for f in shown if f.default is MISSING and f.default_factory is MISSING]
        optional = [f for f in shown if f not in required and getattr(self, f.name) is not None]
        return f"{type(self).__name__}({', '.join(f'{f.name}={getattr(self, f.name)!r}' for f in required + optional)})"


TaskLike = TaskBase | Mapping[str, Any] | str
"""A Task, a task JSON object (dict), or task JSON text."""


def task_json(task: TaskLike) -> str:
    """The compact task JSON text (keys sorted, as the Rust side prints JSON values)."""
    if isinstance(task, str):
        return task
    if isinstance(task, TaskBase):
        task = task.to_dict()
    if not isinstance(task, Mapping):
        raise TypeError(f"a task is a Task, a dict or JSON text, not {type(task).__name__}")
    try:
        return json.dumps(task, separators=(",", ":"), sort_keys=True, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise TypeError(f"the task is not JSON-serializable: {e}") from None


def task_type(task: TaskLike) -> str | None:
    """The task's type name, if it has a string one."""
    if isinstance(task, TaskBase):
        return task.type
    if isinstance(task, str):
        try:
            task = json.loads(task)
        except ValueError:
            return None
    kind = task.get("type") if isinstance(task, Mapping) else None
    return kind if isinstance(kind, str) else None
