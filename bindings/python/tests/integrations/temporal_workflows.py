"""A workflow of the kind users write around ``solve()`` (several solves at once, each failure
reported by its class), for tests/integrations/test_temporal.py and its worker processes
(temporal_worker.py). Loaded again inside Temporal's sandbox for every run, as user code is."""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from captchaai_engine.integrations.temporal import captchaai_error, solve


@workflow.defn(name="solve-each")
class SolveEach:
    """Solves every task at once; returns, per task, the solution's fields or the failure's code
    and class (the exception class name)."""

    @workflow.run
    async def run(self, tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return list(await asyncio.gather(*(self._one(task) for task in tasks)))

    async def _one(self, task: dict[str, Any]) -> dict[str, Any]:
        try:
            solution = await solve(task)
        except ApplicationError as failure:
            error = captchaai_error(failure)
            if error is None:
                raise
            return {"failed": type(error).__name__, "code": error.code, "type": failure.type}
        return {"type": solution.type, "task_id": solution.task_id, "answered": bool(solution.answer),
                "polls": solution.polls, "elapsed_ms": solution.elapsed_ms}
