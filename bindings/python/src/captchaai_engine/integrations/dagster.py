"""Dagster: a ConfigurableResource, a concurrency pool sized to the plan's threads, and the
unsolvable-ratio asset check, on the captchaai-engine package.

- :class:`CaptchaAIResource` solves tasks. Its solver is built in ``setup_for_execution`` and
  closed in ``teardown_after_execution`` (one solver per step, shared by the step's threads:
  it is thread-safe). A permanent failure (bad key, task or plan) becomes
  ``dg.Failure(allow_retries=False)``: the step fails once instead of spending its RetryPolicy.
  Transient failures propagate unchanged, so RetryPolicy applies; :class:`UnsolvableError`
  propagates for the asset to count (``SolveStats``).
- :func:`plan_pool_limit` is the pool limit the plan allows: ``(threads - spare) //
  solves_per_step`` steps at once (one ``threadsinfo`` request). :func:`size_pool_to_plan` sets
  it on the instance through Dagster's public CLI, ``dagster instance concurrency set <pool>
  <limit>`` (Dagster has no public Python API for pool limits; the UI's Concurrency page sets
  them too). Give the assets that solve ``pool=POOL``.
- :class:`SolveStats` gathers solves, unsolvable captchas and latency into materialization
  metadata; :func:`unsolvable_ratio_check` builds the blocking check that fails a partition with
  too many unsolvable captchas.

The key is a resource field: set it with ``dg.EnvVar("CAPTCHAAI_API_KEY")`` so Dagster resolves it
at run time and never shows it. No exception raised here carries a request (or the key).
"""


import contextlib
import math
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import PrivateAttr

from ..errors import CaptchaAIError, PermanentError
from ..solver import Solver
from ..tasks import TaskLike
from ..types import Config, Solution, ThreadsInfo
from ._common import ConfigurationError, clock_for, plan_capacity

__all__ = ["POOL", "CaptchaAIResource", "ConfigurationError", "SolveStats", "plan_pool_limit", "size_pool_to_plan",
           "unsolvable_ratio_check"]

POOL = "captchaai"
"""The default concurrency pool for assets that solve captchas."""


def _failure(error: PermanentError) -> dg.Failure:
    """``dg.Failure(allow_retries=False)`` from the engine's fields only (no request, no key)."""
    metadata = {"code": error.code, "origin": error.origin.value}
    if error.task_id:
        metadata["captcha_task_id"] = error.task_id
    if error.field:
        metadata["field"] = error.field
    return dg.Failure(description=f"{type(error).__name__}: {error}", metadata=metadata, allow_retries=False)


class CaptchaAIResource(dg.ConfigurableResource):
    """CaptchaAI through the engine. ``api_key``: the 32-character key (use ``dg.EnvVar``);
    ``base_url``, ``deadline_ms``, ``request_timeout_ms``, ``unsolvable_retries``: the
    :class:`~captchaai_engine.Config` fields of the same names (None: the engine's defaults);
    ``threads``: most solves in flight at once within one step (None: the plan's threads, read
    with one ``threadsinfo`` request at the step's first solve);
    ``time_scale``: only for tests against an emulator started with the same ``--time-scale``."""

    api_key: str
    base_url: str | None = None
    deadline_ms: int | None = None
    request_timeout_ms: int | None = None
    unsolvable_retries: int | None = None
    threads: int | None = None
    time_scale: float = 1.0

    _solver: Solver | None = PrivateAttr(default=None)

    def __repr_args__(self) -> list[tuple[str | None, Any]]:
        # The key never reaches a repr (pydantic's, and so Dagster's).
        return [(name, "<hidden>" if name == "api_key" else value) for name, value in super().__repr_args__()]

    def _config(self) -> Config:
        return Config(base_url=self.base_url, deadline_ms=self.deadline_ms,
                      request_timeout_ms=self.request_timeout_ms, unsolvable_retries=self.unsolvable_retries)

    def _new_solver(self) -> Solver:
        return Solver(self.api_key, self._config(), threads=self.threads, clock=clock_for(self.time_scale))

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """Builds the step's solver (Dagster calls this before the step uses the resource)."""
        self._solver = self._new_solver()

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        """Closes the step's solver (and its HTTP client); Dagster calls this even if the step failed."""
        solver, self._solver = self._solver, None
        if solver is not None:
            solver.close()

    def solver(self) -> Solver:
        """The step's solver (built in ``setup_for_execution``). Outside a Dagster execution
        there is none: use ``solve``/``threads_info`` (they open one for the call) or a
        :class:`~captchaai_engine.Solver` of your own."""
        if self._solver is None:
            raise dg.DagsterInvariantViolationError(
                "CaptchaAIResource.solver() is available only while Dagster executes the resource "
                "(after setup_for_execution)")
        return self._solver

    @contextlib.contextmanager
    def _solver_for_call(self) -> Iterator[Solver]:
        """The step's solver, or outside an execution one for this call only."""
        if self._solver is not None:
            yield self._solver
        else:
            with self._new_solver() as solver:
                yield solver

    def solve(self, task: TaskLike) -> Solution:
        """Solves ``task``. Raises ``dg.Failure(allow_retries=False)`` for a permanent failure,
        :class:`~captchaai_engine.TransientError` (RetryPolicy retries) or
        :class:`~captchaai_engine.UnsolvableError` (count it with :class:`SolveStats`)."""
        with self._solver_for_call() as solver:
            try:
                return solver.solve(task)
            except PermanentError as error:
                raise _failure(error) from None

    def threads_info(self) -> ThreadsInfo:
        """The plan's thread cap and busy threads; a permanent failure raises ``dg.Failure``."""
        with self._solver_for_call() as solver:
            try:
                return solver.threads_info()
            except PermanentError as error:
                raise _failure(error) from None


def plan_pool_limit(captchaai: CaptchaAIResource, *, solves_per_step: int = 1, spare: int = 1) -> int:
    """``(threads - spare) // solves_per_step`` (at least 1), with ``threads`` the plan's thread
    count (one ``threadsinfo`` request): how many steps of ``solves_per_step`` solves each may
    run at once. Keep ``spare`` threads for manual runs and timed-out tasks still held on
    CaptchaAI's side; a ``spare`` that leaves no thread raises :class:`ConfigurationError`."""
    if solves_per_step < 1 or spare < 0:
        raise ValueError("solves_per_step must be at least 1 and spare at least 0")
    threads = captchaai.threads_info().threads
    return max(1, plan_capacity(threads, spare) // solves_per_step)


def size_pool_to_plan(captchaai: CaptchaAIResource, *, pool: str = POOL, solves_per_step: int = 1, spare: int = 1,
                      dagster_home: str | Path | None = None) -> int:
    """Sets ``pool``'s limit to :func:`plan_pool_limit` and returns it, through Dagster's public
    CLI: ``dagster instance concurrency set <pool> <limit>`` on the instance of ``dagster_home``
    (default ``$DAGSTER_HOME``). Run it when you deploy or the plan changes (or run that command
    yourself, or set the limit on the UI's Concurrency page). A refusal (no ``$DAGSTER_HOME``,
    storage without pool support) raises :class:`ConfigurationError` with Dagster's message."""
    limit = plan_pool_limit(captchaai, solves_per_step=solves_per_step, spare=spare)
    env = dict(os.environ)
    if dagster_home is not None:
        env["DAGSTER_HOME"] = str(dagster_home)
    if not env.get("DAGSTER_HOME"):
        raise ConfigurationError("size_pool_to_plan needs the Dagster instance: set $DAGSTER_HOME or pass "
                                 "dagster_home")
    done = subprocess.run([sys.executable, "-m", "dagster", "instance", "concurrency", "set", pool, str(limit)],
                          env=env, capture_output=True, text=True)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise ConfigurationError(f"`dagster instance concurrency set {pool} {limit}` failed: "
                                 f"{lines[-1] if lines else f'exit status {done.returncode}'}")
    return limit


class SolveStats:
    """Counts one materialization's solves (thread-safe): ``add(solution)`` for each answer,
    ``add_unsolvable(error)`` for each captcha that stayed unsolvable; ``metadata()`` is
    ``{"solves", "unsolvable", "p95_solve_seconds"}`` for ``dg.MaterializeResult``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seconds: list[float] = []
        self.unsolvable = 0

    @property
    def solves(self) -> int:
        return len(self._seconds)

    def add(self, solution: Solution) -> None:
        with self._lock:
            self._seconds.append(solution.elapsed_ms / 1000)

    def add_unsolvable(self, error: CaptchaAIError) -> None:
        with self._lock:
            self.unsolvable += 1

    def metadata(self) -> dict[str, Any]:
        with self._lock:
            ordered = sorted(self._seconds)
            p95 = ordered[math.ceil(0.95 * len(ordered)) - 1] if ordered else 0.0
            return {"solves": len(ordered), "unsolvable": self.unsolvable, "p95_solve_seconds": round(p95, 3)}


def unsolvable_ratio_check(asset: dg.AssetsDefinition | dg.AssetKey | Sequence[str] | str, *,
                           max_ratio: float = 0.25, blocking: bool = True,
                           name: str = "unsolvable_ratio") -> dg.AssetChecksDefinition:
    """A check on ``asset`` that passes while ``unsolvable / (solves + unsolvable)`` in the
    metadata of the materialization of this run's partition (``SolveStats``) is at most
    ``max_ratio``. Blocking by default: a failing check stops downstream assets in the run."""
    if not 0 <= max_ratio <= 1:
        raise ValueError("max_ratio must be between 0 and 1")
    key = asset.key if isinstance(asset, dg.AssetsDefinition) else dg.AssetKey.from_coercible(asset)

    @dg.asset_check(asset=key, name=name, blocking=blocking,
                    description=f"At most {max_ratio:.0%} of the captchas stayed unsolvable")
    def _check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        partition = context.run.tags.get("dagster/partition")
        records = context.instance.fetch_materializations(
            dg.AssetRecordsFilter(key, asset_partitions=[partition] if partition else None), limit=1).records
        if not records:
            return dg.AssetCheckResult(passed=False, description="no materialization to check")
        metadata = records[0].asset_materialization.metadata
        if "solves" not in metadata or "unsolvable" not in metadata:
            return dg.AssetCheckResult(passed=False, description="the materialization has no SolveStats metadata")
        solves, unsolvable = metadata["solves"].value, metadata["unsolvable"].value
        ratio = unsolvable / max(solves + unsolvable, 1)
        return dg.AssetCheckResult(passed=ratio <= max_ratio,
                                   metadata={"unsolvable_ratio": round(ratio, 3), "max_ratio": max_ratio})

    return _check
