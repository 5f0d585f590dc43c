"""Prefect 3: a task decorator whose retries refuse configuration errors, and a global concurrency
limit as the thread budget, on the captchaai-engine package.

- :func:`captchaai_task` is ``prefect.task`` with retries whose ``retry_condition_fn``
  (:func:`retry_unless_permanent`) refuses a :class:`~captchaai_engine.PermanentError` (bad key,
  task or plan, as the engine classes it) and a :class:`ConfigurationError` (no Secret block, no
  concurrency limit): the task fails once. Transient failures are retried, and so are
  unsolvable captchas (the engine's class for them says a fresh task may succeed; a retry
  submits one).
- :func:`solve` solves one task while holding one slot of the global concurrency limit ``LIMIT``
  (one slot, one CaptchaAI thread in use). On a server without that limit, the first solve of
  the process creates it, sized to the plan: the plan's thread count from the engine's
  ``threadsinfo`` less ``spare`` (one log line says so). A limit that exists is used as it is;
  :func:`size_limit_to_plan` resizes it. With ``create_limit=False`` a missing limit raises
  :class:`ConfigurationError` instead (``strict=False`` would run unthrottled).
- The key comes from a Secret block (``SECRET_BLOCK``, default ``captchaai-api-key``) unless
  passed; it never reaches task parameters, results or logs.

Use the token inside the task that solved it (a token is short-lived and single-use): return
what the form post produced, never the token.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from prefect import task as prefect_task
from prefect.client.orchestration import get_client
from prefect.concurrency.asyncio import ConcurrencySlotAcquisitionError
from prefect.concurrency.sync import concurrency
from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

from ..errors import PermanentError
from ..solver import Solver
from ..tasks import TaskLike
from ..types import Config, Solution
from ._common import ConfigurationError, clock_for, plan_capacity

__all__ = ["LIMIT", "SECRET_BLOCK", "ConfigurationError", "captchaai_task", "ensure_limit",
           "retry_unless_permanent", "size_limit_to_plan", "solve"]

LIMIT = "captchaai"
"""The default global concurrency limit: one slot per CaptchaAI thread in use."""
SECRET_BLOCK = "captchaai-api-key"
"""The default Secret block holding the API key."""

F = TypeVar("F", bound=Callable[..., Any])
_log = logging.getLogger(__name__)


def retry_unless_permanent(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect's ``retry_condition_fn``: False for a permanent failure or a configuration error,
    True otherwise."""
    return not isinstance(state.result(raise_on_failure=False), (PermanentError, ConfigurationError))


def captchaai_task(fn: F | None = None, *, retries: int = 3,
                   retry_delay_seconds: float | list[float] | Callable[[int], list[float]] = 10,
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


def _api_key(api_key: str | None, secret_block: str) -> str:
    if api_key is not None:
        return api_key
    from prefect.blocks.system import Secret

    try:
        return str(Secret.load(secret_block).get())
    except ValueError:  # Prefect's "Unable to find block document named ..."
        raise ConfigurationError(
            f"the Secret block {secret_block!r} (the CaptchaAI API key) does not exist: save one with "
            f"Secret(value=...).save({secret_block!r}), or pass api_key") from None


def _solver(api_key: str | None, secret_block: str, config: Config | None, time_scale: float) -> Solver:
    """A solver for one solve (its slot of the global concurrency limit is the thread budget)."""
    return Solver(_api_key(api_key, secret_block), config, threads=1, clock=clock_for(time_scale))


def _say(message: str) -> None:
    """One line in the run's log (or this module's logger outside a run)."""
    from prefect.exceptions import MissingContextError
    from prefect.logging import get_run_logger

    try:
        get_run_logger().info(message)
    except MissingContextError:
        _log.info(message)


_known: set[tuple[str, str]] = set()
_known_lock = threading.Lock()


def _server_limit(limit: str) -> tuple[str, str]:
    """``limit`` on the Prefect server this process talks to now (tests switch servers)."""
    from prefect.settings import get_current_settings

    return (str(get_current_settings().api.url), limit)


def ensure_limit(solver: Solver, *, limit: str = LIMIT, spare: int = 1, create: bool = True) -> None:
    """Makes sure the global concurrency limit ``limit`` exists (checked once per process and
    server, and again if it disappears): if
    it does not, creates it with the plan's threads less ``spare`` (one ``threadsinfo`` request
    through ``solver``; a ``spare`` that leaves no thread raises :class:`ConfigurationError`),
    or, with ``create=False``, raises :class:`ConfigurationError`. A limit that exists is left as
    it is."""
    if spare < 0:
        raise ValueError("spare must be at least 0")
    with _known_lock:
        if _server_limit(limit) in _known:
            return
        with get_client(sync_client=True) as client:
            try:
                client.read_global_concurrency_limit_by_name(limit)
            except ObjectNotFound:
                if not create:
                    raise ConfigurationError(
                        f"the global concurrency limit {limit!r} does not exist: create it with "
                        f"size_limit_to_plan() or `prefect gcl create {limit} --limit N` (N: your plan's "
                        "threads), or let solve() create it (create_limit=True)") from None
                from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate

                threads = solver.threads_info().threads
                size = plan_capacity(threads, spare)
                try:
                    client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=limit, limit=size))
                    _say(f"captchaai: created the global concurrency limit {limit!r} with {size} slots "
                         f"(the plan's {threads} threads less {spare} spare)")
                except ObjectAlreadyExists:  # another process created it meanwhile
                    pass
        _known.add(_server_limit(limit))


def solve(task: TaskLike, *, api_key: str | None = None, secret_block: str = SECRET_BLOCK,
          config: Config | None = None, limit: str = LIMIT, create_limit: bool = True, spare: int = 1,
          strict: bool = True, timeout_seconds: float | None = None, time_scale: float = 1.0) -> Solution:
    """Solves ``task`` holding one slot of the global concurrency limit ``limit`` (waiting up to
    ``timeout_seconds`` for it; None: no bound). The key is ``api_key``, else the Secret block
    ``secret_block``. A missing limit is created from the plan's threads less ``spare``
    (:func:`ensure_limit`) unless ``create_limit=False``. ``time_scale`` is only for tests
    against an emulator started with the same ``--time-scale``. Raises the package's typed
    errors and :class:`ConfigurationError`."""
    with _solver(api_key, secret_block, config, time_scale) as solver:
        ensure_limit(solver, limit=limit, spare=spare, create=create_limit)
        try:
            with concurrency(limit, occupy=1, strict=strict, timeout_seconds=timeout_seconds):
                return solver.solve(task)
        except ConcurrencySlotAcquisitionError:
            # Raised before the body runs: the limit was deleted since it was checked. Once more.
            with _known_lock:
                _known.discard(_server_limit(limit))
            ensure_limit(solver, limit=limit, spare=spare, create=create_limit)
            with concurrency(limit, occupy=1, strict=strict, timeout_seconds=timeout_seconds):
                return solver.solve(task)


def size_limit_to_plan(*, api_key: str | None = None, secret_block: str = SECRET_BLOCK,
                       config: Config | None = None, limit: str = LIMIT, spare: int = 1,
                       time_scale: float = 1.0) -> int:
    """Creates or updates the global concurrency limit ``limit`` to the plan's thread count less
    ``spare`` and returns it (one ``threadsinfo`` request; a ``spare`` that leaves no thread
    raises :class:`ConfigurationError`)."""
    if spare < 0:
        raise ValueError("spare must be at least 0")
    with _solver(api_key, secret_block, config, time_scale) as solver:
        size = plan_capacity(solver.threads_info().threads, spare)
    with get_client(sync_client=True) as client:
        client.upsert_global_concurrency_limit_by_name(limit, size)
    with _known_lock:
        _known.add(_server_limit(limit))
    return size
