"""Prefect 3: a task helper whose retries refuse permanent failures, and a global concurrency
limit as the thread budget, on the captchaai-engine package.

- :func:`captchaai_task` is ``prefect.task`` with retries whose ``retry_condition_fn``
  (:func:`retry_unless_permanent`) refuses a :class:`~captchaai_engine.PermanentError` (bad key,
  task or plan): the task fails once. Transient and unsolvable failures are retried (a retry
  submits a fresh task).
- :func:`solve` solves one task while holding one slot of the global concurrency limit ``LIMIT``
  (one slot, one CaptchaAI thread). :func:`size_limit_to_plan` creates or updates that limit
  from the plan's thread count. ``strict=True`` by default: a missing limit raises instead of
  running unthrottled.
- The key comes from a Secret block (``SECRET_BLOCK``, default ``captchaai-api-key``) unless
  passed; it never reaches task parameters, results or logs.

Use the token inside the task that solved it (a token is short-lived and single-use): return
what the form post produced, never the token.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, TypeVar, Union

from prefect import task as prefect_task
from prefect.concurrency.sync import concurrency

from ..errors import PermanentError
from ..solver import Solver
from ..tasks import TaskLike
from ..types import Config, Solution
from ._common import clock_for

__all__ = ["LIMIT", "SECRET_BLOCK", "captchaai_task", "retry_unless_permanent", "size_limit_to_plan", "solve"]

LIMIT = "captchaai"
"""The default global concurrency limit: one slot per CaptchaAI thread in use."""
SECRET_BLOCK = "captchaai-api-key"
"""The default Secret block holding the API key."""

F = TypeVar("F", bound=Callable[..., Any])


def retry_unless_permanent(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect's ``retry_condition_fn``: False for a permanent failure, True otherwise."""
    return not isinstance(state.result(raise_on_failure=False), PermanentError)


def captchaai_task(fn: Optional[F] = None, *, retries: int = 3,
                   retry_delay_seconds: Union[float, list, Callable[[int], list]] = 10,
                   **task_options: Any) -> Any:
    """``@captchaai_task`` or ``@captchaai_task(retries=..., ...)``: ``prefect.task`` with
    ``retry_condition_fn=retry_unless_permanent`` (other options pass through)."""
    if "retry_condition_fn" in task_options:
        raise TypeError("captchaai_task sets retry_condition_fn itself (retry_unless_permanent)")
    options = dict(retries=retries, retry_delay_seconds=retry_delay_seconds,
                   retry_condition_fn=retry_unless_permanent, **task_options)
    if fn is not None:
        return prefect_task(fn, **options)
    return lambda f: prefect_task(f, **options)


def _api_key(api_key: Optional[str], secret_block: str) -> str:
    if api_key is not None:
        return api_key
    from prefect.blocks.system import Secret

    return Secret.load(secret_block).get()


def _solver(api_key: Optional[str], secret_block: str, config: Optional[Config], time_scale: float) -> Solver:
    return Solver(_api_key(api_key, secret_block), config, clock=clock_for(time_scale))


def solve(task: TaskLike, *, api_key: Optional[str] = None, secret_block: str = SECRET_BLOCK,
          config: Optional[Config] = None, limit: str = LIMIT, strict: bool = True,
          timeout_seconds: Optional[float] = None, time_scale: float = 1.0) -> Solution:
    """Solves ``task`` holding one slot of the global concurrency limit ``limit`` (waiting up to
    ``timeout_seconds`` for it; None: no bound). The key is ``api_key``, else the Secret block
    ``secret_block``. ``time_scale`` is only for tests against an emulator started with the same
    ``--time-scale``. Raises the package's typed errors."""
    with _solver(api_key, secret_block, config, time_scale) as solver:
        with concurrency(limit, occupy=1, strict=strict, timeout_seconds=timeout_seconds):
            return solver.solve(task)


def size_limit_to_plan(*, api_key: Optional[str] = None, secret_block: str = SECRET_BLOCK,
                       config: Optional[Config] = None, limit: str = LIMIT, spare: int = 1,
                       time_scale: float = 1.0) -> int:
    """Creates or updates the global concurrency limit ``limit`` to the plan's thread count less
    ``spare`` (at least 1) and returns it (one ``threadsinfo`` request)."""
    if spare < 0:
        raise ValueError("spare must be at least 0")
    from prefect.client.orchestration import get_client

    with _solver(api_key, secret_block, config, time_scale) as solver:
        size = max(1, solver.threads_info().threads - spare)
    with get_client(sync_client=True) as client:
        client.upsert_global_concurrency_limit_by_name(limit, size)
    return size
