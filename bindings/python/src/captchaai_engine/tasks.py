"""Task dataclasses, one per captcha type of the engine's type table. Each has a JSON form
(:meth:`Task.to_dict`); plain dicts in the same form are accepted everywhere a task is.

Required fields are positional, optional ones keyword-only. Validation (lengths, URLs, proxies,
image formats, ranges) is the engine's: a bad task fails with a permanent error from the engine
naming the field, before anything is sent. ``extra`` passes further parameters through
(``soft_id``, ``pingback``, ...); the engine refuses any that would override a field or the key.
"""

from __future__ import annotations

import base64
import json
from dataclasses import KW_ONLY, dataclass, field, fields
from typing import Any, ClassVar, Dict, List, Mapping, Optional, Union

Image = Union[str, bytes]
"""A base64 string (a ``data:`` URI prefix is allowed) or the raw image bytes."""


@dataclass(frozen=True)
class Task:
    """Base class: ``type`` is the engine's type name."""

    type: ClassVar[str] = ""

    def to_dict(self) -> Dict[str, Any]:
        """The task JSON object: ``{"type": ..., <set fields>, "extra": {...}}``."""
        out: Dict[str, Any] = {"type": self.type}
        for f in fields(self):
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


def _hidden() -> Any:
    return field(default=None, repr=False)


@dataclass(frozen=True)
class RecaptchaV2Task(Task):
    type: ClassVar[str] = "recaptcha_v2"
    sitekey: str
    pageurl: str
    _: KW_ONLY
    invisible: Optional[bool] = None
    data_s: Optional[str] = None
    cookies: Optional[str] = _hidden()
    user_agent: Optional[str] = None
    proxy: Optional[str] = _hidden()
    proxytype: Optional[str] = None
    extra: Optional[Dict[str, Any]] = None


@dataclass(frozen=True)
class RecaptchaV2EnterpriseTask(Task):
    type: ClassVar[str] = "recaptcha_v2_enterprise"
    sitekey: str
    pageurl: str
    _: KW_ONLY
    invisible: Optional[bool] = None
    action: Optional[str] = None
    data_s: Optional[str] = None
    cookies: Optional[str] = _hidden()
    user_agent: Optional[str] = None
    proxy: Optional[str] = _hidden()
    proxytype: Optional[str] = None
    extra: Optional[Dict[str, Any]] = None


@dataclass(frozen=True)
class RecaptchaV3Task(Task):
    type: ClassVar[str] = "recaptcha_v3"
    sitekey: str
    pageurl: str
    action: str
    _: KW_ONLY
    min_score: Optional[float] = None
    cookies: Optional[str] = _hidden()
    user_agent: Optional[str] = None
    proxy: Optional[str] = _hidden()
    proxytype: Optional[str] = None
    extra: Optional[Dict[str, Any]] = None


@dataclass(frozen=True)
class RecaptchaV3EnterpriseTask(RecaptchaV3Task):
    type: ClassVar[str] = "recaptcha_v3_enterprise"


@dataclass(frozen=True)
class TurnstileTask(Task):
    type: ClassVar[str] = "turnstile"
    sitekey: str
    pageurl: str
    _: KW_ONLY
    action: Optional[str] = None
    data: Optional[str] = None
    pagedata: Optional[str] = None
    cookies: Optional[str] = _hidden()
    user_agent: Optional[str] = None
    proxy: Optional[str] = _hidden()
    proxytype: Optional[str] = None
    extra: Optional[Dict[str, Any]] = None


@dataclass(frozen=True)
class CloudflareChallengeTask(Task):
    type: ClassVar[str] = "cloudflare_challenge"
    pageurl: str
    proxy: str = field(repr=False)
    proxytype: str
    _: KW_ONLY
    sitekey: Optional[str] = None
    user_agent: Optional[str] = None
    cookies: Optional[str] = _hidden()
    extra: Optional[Dict[str, Any]] = None


@dataclass(frozen=True)
class GeeTestTask(Task):
    """GeeTest v3; the answer is JSON ``{challenge, validate, seccode}``."""

    type: ClassVar[str] = "geetest_v3"
    gt: str
    challenge: str
    pageurl: str
    _: KW_ONLY
    api_server: Optional[str] = None
    cookies: Optional[str] = _hidden()
    user_agent: Optional[str] = None
    proxy: Optional[str] = _hidden()
    proxytype: Optional[str] = None
    extra: Optional[Dict[str, Any]] = None


GeeTestV3Task = GeeTestTask


@dataclass(frozen=True)
class GeeTestV4Task(Task):
    """GeeTest v4; the answer is a JSON object."""

    type: ClassVar[str] = "geetest_v4"
    captcha_id: str
    pageurl: str
    _: KW_ONLY
    api_server: Optional[str] = None
    cookies: Optional[str] = _hidden()
    user_agent: Optional[str] = None
    proxy: Optional[str] = _hidden()
    proxytype: Optional[str] = None
    extra: Optional[Dict[str, Any]] = None


@dataclass(frozen=True)
class CaptchaFoxTask(Task):
    type: ClassVar[str] = "captchafox"
    sitekey: str
    pageurl: str
    proxy: str = field(repr=False)
    proxytype: str
    _: KW_ONLY
    cookies: Optional[str] = _hidden()
    user_agent: Optional[str] = None
    extra: Optional[Dict[str, Any]] = None


@dataclass(frozen=True)
class FriendlyCaptchaTask(Task):
    type: ClassVar[str] = "friendly_captcha"
    sitekey: str
    pageurl: str
    _: KW_ONLY
    version: Optional[str] = None
    proxy: Optional[str] = _hidden()
    proxytype: Optional[str] = None
    extra: Optional[Dict[str, Any]] = None


@dataclass(frozen=True)
class LeminTask(Task):
    """Lemin; the answer is JSON ``{answer, challenge_uuid}``."""

    type: ClassVar[str] = "lemin"
    captcha_id: str
    div_id: str
    pageurl: str
    _: KW_ONLY
    api_server: Optional[str] = None
    proxy: Optional[str] = _hidden()
    proxytype: Optional[str] = None
    extra: Optional[Dict[str, Any]] = None


@dataclass(frozen=True)
class ImageTask(Task):
    """An image captcha (jpg/png/gif, 100 B to 1 MiB); the answer is its text."""

    type: ClassVar[str] = "image"
    image: Image = field(repr=False)
    _: KW_ONLY
    upload: Optional[str] = None
    """``base64`` (default) or ``multipart``."""
    sync: Optional[bool] = None
    phrase: Optional[bool] = None
    case_sensitive: Optional[bool] = None
    numeric: Optional[int] = None
    min_len: Optional[int] = None
    max_len: Optional[int] = None
    calc: Optional[bool] = None
    language: Optional[int] = None
    lang: Optional[str] = None
    instructions: Optional[str] = None
    extra: Optional[Dict[str, Any]] = None


@dataclass(frozen=True)
class GridTask(Task):
    """A reCAPTCHA-style grid; the answer is a JSON cell list."""

    type: ClassVar[str] = "grid"
    image: Image = field(repr=False)
    instructions: str
    _: KW_ONLY
    grid_size: Optional[str] = None
    extra: Optional[Dict[str, Any]] = None


@dataclass(frozen=True)
class BlsTask(Task):
    """Nine images and an instruction; the answer is a JSON list of 1-based cells."""

    type: ClassVar[str] = "bls"
    instructions: str
    images: List[Image] = field(repr=False)
    _: KW_ONLY
    extra: Optional[Dict[str, Any]] = None


TASK_TYPES: Dict[str, type] = {
    cls.type: cls
    for cls in (RecaptchaV2Task, RecaptchaV2EnterpriseTask, RecaptchaV3Task, RecaptchaV3EnterpriseTask,
                TurnstileTask, CloudflareChallengeTask, GeeTestTask, GeeTestV4Task, CaptchaFoxTask,
                FriendlyCaptchaTask, LeminTask, ImageTask, GridTask, BlsTask)
}
"""Every task class by its type name."""

TaskLike = Union[Task, Mapping[str, Any], str]
"""A Task, a task JSON object (dict), or task JSON text."""


def task_json(task: TaskLike) -> str:
    """The compact task JSON text (keys sorted, as the Rust side prints JSON values)."""
    if isinstance(task, str):
        return task
    if isinstance(task, Task):
        task = task.to_dict()
    if not isinstance(task, Mapping):
        raise TypeError(f"a task is a Task, a dict or JSON text, not {type(task).__name__}")
    try:
        return json.dumps(task, separators=(",", ":"), sort_keys=True, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise TypeError(f"the task is not JSON-serializable: {e}") from None


def task_type(task: TaskLike) -> Optional[str]:
    """The task's type name, if it has a string one."""
    if isinstance(task, Task):
        return task.type
    if isinstance(task, str):
        try:
            task = json.loads(task)
        except ValueError:
            return None
    kind = task.get("type") if isinstance(task, Mapping) else None
    return kind if isinstance(kind, str) else None
