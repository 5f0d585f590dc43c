# unchecked: needs Dagster; tests/integrations/test_dagster_example.py runs this file
import os
from concurrent.futures import ThreadPoolExecutor

import dagster as dg

from captchaai_engine import TurnstileTask, UnsolvableError
from captchaai_engine.integrations.dagster import POOL, CaptchaAIResource, SolveStats, unsolvable_ratio_check

SITEKEY = "0x4AAAAAAABkMYinukE8nzY"  # the widget's data-sitekey
REGIONS = ["north", "south", "east", "west"]


@dg.asset(pool=POOL, retry_policy=dg.RetryPolicy(max_retries=2, delay=30))
def portal_logins(context: dg.AssetExecutionContext, captchaai: CaptchaAIResource) -> dg.MaterializeResult:
    stats = SolveStats()

    def log_in(region: str) -> None:
        try:
            solution = captchaai.solve(TurnstileTask(SITEKEY, f"https://portal.example.com/{region}/login"))
        except UnsolvableError as error:
            stats.add_unsolvable(error)
            context.log.warning(f"{region}: unsolvable (CaptchaAI task {error.task_id})")
            return
        # Post the login form with solution.answer here, at once: the token is single-use.
        stats.add(solution)
        context.log.info(f"{region}: CaptchaAI task {solution.task_id} in {solution.elapsed_ms} ms")

    with ThreadPoolExecutor(max_workers=len(REGIONS)) as pool:
        list(pool.map(log_in, REGIONS))
    return dg.MaterializeResult(metadata=stats.metadata())


defs = dg.Definitions(
    assets=[portal_logins],
    asset_checks=[unsolvable_ratio_check(portal_logins, max_ratio=0.25)],
    resources={
        "captchaai": CaptchaAIResource(
            api_key=dg.EnvVar("CAPTCHAAI_API_KEY"),
            base_url=os.environ.get("CAPTCHAAI_BASE_URL"),  # None: https://ocr.captchaai.com
        ),
    },
)
