# unchecked: needs Temporal and a Temporal server; tests/integrations/test_temporal_example.py runs this file
import asyncio
import os
import sys
import uuid

from temporalio import workflow
from temporalio.client import Client

from captchaai_engine import Config, TurnstileTask
from captchaai_engine.integrations.temporal import CaptchaAI, solve

SITEKEY = "0x4AAAAAAABkMYinukE8nzY"  # the widget's data-sitekey
QUEUE = "portal-logins"


@workflow.defn
class PortalLogin:
    """Solves the login page's captcha inside the workflow: the waits are durable timers, the
    requests are activities, and a worker that dies mid-solve loses nothing."""

    @workflow.run
    async def run(self, region: str) -> dict:
        solution = await solve(TurnstileTask(SITEKEY, f"https://portal.example.com/{region}/login"))
        # Post the login form with solution.answer here, in an activity, at once: the token is single-use.
        return {"region": region, "captcha_task_id": solution.task_id, "solved_in_ms": solution.elapsed_ms}


async def main() -> None:
    client = await Client.connect(os.environ.get("TEMPORAL_ADDRESS", "localhost:7233"))
    # The key stays on the worker: it is inserted into each request as the request is sent.
    captchaai = CaptchaAI(os.environ["CAPTCHAAI_KEY"], Config(base_url=os.environ.get("CAPTCHAAI_BASE_URL")))
    async with captchaai.worker(client, task_queue=QUEUE, workflows=[PortalLogin]):
        results = await asyncio.gather(*(
            client.execute_workflow(PortalLogin.run, region, id=f"login-{region}-{uuid.uuid4()}", task_queue=QUEUE)
            for region in ["north", "south"]))
    for result in results:
        print(f"{result['region']}: CaptchaAI task {result['captcha_task_id']} in {result['solved_in_ms']} ms")


if __name__ == "__main__":
    asyncio.run(main())
    # The Temporal SDK's Rust threads can crash CPython's own exit (temporalio/sdk-python#300).
    sys.stdout.flush()
    os._exit(0)
