# unchecked: needs Airflow 3, the connection and pool; tests/integrations/test_airflow_example.py runs this file
from datetime import timedelta

from airflow.sdk import dag, task

from captchaai_engine import Solution, TurnstileTask
from captchaai_engine.integrations.airflow import CaptchaAISolveOperator

SITEKEY = "0x4AAAAAAABkMYinukE8nzY"  # the widget's data-sitekey
REGIONS = ["north", "south"]


class PortalLogin(CaptchaAISolveOperator):
    """Solves the login page's captcha (submitted by the worker, awaited on the triggerer), then logs in."""

    def use_token(self, context, solution: Solution) -> dict:
        # Post the login form with solution.answer here, at once: the token is single-use.
        # The return value goes to XCom: never the token.
        return {"captcha_task_id": solution.task_id, "solved_in_ms": solution.elapsed_ms}


@dag(schedule=None, catchup=False, tags=["captchaai"])
def portal_logins():
    logins = [
        PortalLogin(
            task_id=f"log_in_{region}",
            task=TurnstileTask(SITEKEY, f"https://portal.example.com/{region}/login"),
            deferrable=True,
            max_token_age=60,
            pool="captchaai",
            retries=2,
            retry_delay=timedelta(seconds=30),
        )
        for region in REGIONS
    ]

    @task
    def report(results: list[dict]) -> None:
        for region, result in zip(REGIONS, results, strict=True):
            print(f"{region}: CaptchaAI task {result['captcha_task_id']} in {result['solved_in_ms']} ms")

    report([login.output for login in logins])


portal_logins_dag = portal_logins()

if __name__ == "__main__":
    portal_logins_dag.test()
