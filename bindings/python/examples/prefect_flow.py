# unchecked: needs Prefect 3 and the Secret block above; tests/integrations/test_prefect_example.py runs this file
import os

from prefect import flow

from captchaai_engine import Config, TurnstileTask
from captchaai_engine.integrations.prefect import captchaai_task, solve

SITEKEY = "0x4AAAAAAABkMYinukE8nzY"  # the widget's data-sitekey
CONFIG = Config(base_url=os.environ.get("CAPTCHAAI_BASE_URL"))  # None: https://ocr.captchaai.com


@captchaai_task(retries=2, retry_delay_seconds=30)
def log_in(region: str) -> dict:
    solution = solve(TurnstileTask(SITEKEY, f"https://portal.example.com/{region}/login"), config=CONFIG)
    # Post the login form with solution.answer here, at once: the token is single-use.
    return {"region": region, "captcha_task_id": solution.task_id, "solved_in_ms": solution.elapsed_ms}


@flow(log_prints=True)
def portal_logins(regions: list[str]) -> list[dict]:
    results = [future.result() for future in [log_in.submit(region) for region in regions]]
    for result in results:
        print(f"{result['region']}: CaptchaAI task {result['captcha_task_id']} in {result['solved_in_ms']} ms")
    return results


if __name__ == "__main__":
    portal_logins(["north", "south", "east", "west"])
