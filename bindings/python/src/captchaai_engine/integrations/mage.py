"""Mage: a data-loader block built on the captchaai-engine package.

:data:`DATA_LOADER_BLOCK` is the block's source; :func:`write_data_loader` puts it in a Mage
project's ``data_loaders/``. The block solves the task dicts in the pipeline variable
``captchaai_tasks`` one after another and returns a DataFrame, one row per task from
``use_token`` (edit it:
post the protected form there, in the same block run, and return what the post produced; never
the token).

:func:`solver_for_block` makes the block's solver from the block's keyword arguments (the
pipeline's variables): the key from the Mage secret ``CAPTCHAAI_API_KEY`` (Secrets page), the
:class:`~captchaai_engine.Config` from the variable ``captchaai_config`` (a dict or JSON text),
``captchaai_time_scale`` only for tests against an emulator started with the same
``--time-scale``.

Mage's block ``retry_config`` retries every failed block run alike (it has no per-exception
opt-out), so a :class:`~captchaai_engine.PermanentError` is retried too: keep ``retries`` low;
the exception's class and code tell whoever is on call that it needs fixing, not rerunning.
Concurrency: one block run holds at most one CaptchaAI thread; cap concurrent runs with the
pipeline's ``concurrency_config`` (``pipeline_run_limit_all_triggers``) below the plan's threads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..solver import Solver
from ..types import Config
from ._common import clock_for

__all__ = ["DATA_LOADER_BLOCK", "SECRET_NAME", "MissingSecret", "solver_for_block", "write_data_loader"]

SECRET_NAME = "CAPTCHAAI_API_KEY"
"""The Mage secret holding the API key."""


class MissingSecret(LookupError):
    """The Mage secret with the API key is not set."""


def solver_for_block(kwargs: Mapping[str, Any], *, secret_name: str = SECRET_NAME,
                     api_key: str | None = None) -> Solver:
    """The solver for a block run: key from ``api_key`` or the Mage secret ``secret_name``;
    config from ``kwargs["captchaai_config"]``; time scale from ``kwargs["captchaai_time_scale"]``.
    Use it as a context manager (it closes its HTTP client)."""
    if api_key is None:
        from mage_ai.data_preparation.shared.secrets import get_secret_value

        api_key = get_secret_value(secret_name)
        if not api_key:
            raise MissingSecret(f"the Mage secret {secret_name} (the CaptchaAI API key) is not set")
    raw = kwargs.get("captchaai_config") or {}
    config = Config.from_dict(json.loads(raw) if isinstance(raw, str) else raw)
    return Solver(api_key, config, clock=clock_for(float(kwargs.get("captchaai_time_scale", 1.0))))


def write_data_loader(project: str | Path, name: str = "load_with_captchaai") -> Path:
    """Writes :data:`DATA_LOADER_BLOCK` as ``data_loaders/<name>.py`` of the Mage project at
    ``project`` and returns its path (refuses to overwrite an existing block)."""
    if not name.isidentifier():
        raise ValueError(f"a block name must be a Python identifier (got {name!r})")
    path = Path(project) / "data_loaders" / f"{name}.py"
    if path.exists():
        raise FileExistsError(f"{path} exists")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(DATA_LOADER_BLOCK, encoding="utf-8")
    return path


DATA_LOADER_BLOCK = '''\
"""Solves the CaptchaAI tasks in the pipeline variable `captchaai_tasks` (a list of task dicts)
through captchaai-engine and returns a DataFrame with one row per task from use_token()."""
import json

import pandas as pd

from captchaai_engine.integrations.mage import solver_for_block

if 'data_loader' not in globals():
    from mage_ai.data_preparation.decorators import data_loader
if 'test' not in globals():
    from mage_ai.data_preparation.decorators import test


def use_token(task: dict, solution) -> dict:
    """Edit: post the protected form with solution.answer (and solution.user_agent) here, at once,
    and return what it produced. Never return the token."""
    return {'type': solution.type, 'captcha_task_id': solution.task_id,
            'elapsed_ms': solution.elapsed_ms, 'attempts': solution.attempts}


@data_loader
def load_with_captchaai(*args, **kwargs):
    tasks = kwargs.get('captchaai_tasks') or []
    if isinstance(tasks, str):
        tasks = json.loads(tasks)
    rows = []
    with solver_for_block(kwargs) as solver:
        for task in tasks:  # one at a time: a block run holds at most one CaptchaAI thread
            rows.append(use_token(task, solver.solve(task)))
    return pd.DataFrame(rows)


@test
def test_output(output, *args) -> None:
    assert output is not None, 'the block returned nothing'
'''
