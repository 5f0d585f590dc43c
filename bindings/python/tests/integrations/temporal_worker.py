"""A worker process for tests/integrations/test_temporal.py (and benches/temporal.py): the
README's setup, ``CaptchaAI(...).worker(client, ...)``, with the key from ``$CAPTCHAAI_KEY``.

    python temporal_worker.py ADDRESS TASK_QUEUE BASE_URL [--time-scale S] [--budget ID]
        [--reserve N] [--heartbeat-s S] [--sticky-s S]

It prints ``worker ready`` once it polls, logs at INFO to stderr (the tests read those lines for
the key), and runs until killed (SIGTERM: a graceful stop; SIGKILL: the crash the tests make)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))

from temporal_workflows import SolveEach  # noqa: E402

from captchaai_engine import Config  # noqa: E402
from captchaai_engine.integrations.temporal import CaptchaAI  # noqa: E402


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("address")
    parser.add_argument("task_queue")
    parser.add_argument("base_url")
    parser.add_argument("--time-scale", type=float, default=1.0)
    parser.add_argument("--budget", default="captchaai-budget")
    parser.add_argument("--reserve", type=int, default=0)
    parser.add_argument("--heartbeat-s", type=float, default=10.0)
    parser.add_argument("--sticky-s", type=float, default=10.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(process)d %(name)s %(levelname)s %(message)s")
    captchaai = CaptchaAI(os.environ["CAPTCHAAI_KEY"], Config(base_url=args.base_url),
                          budget=args.budget or None, reserve=args.reserve, time_scale=args.time_scale,
                          heartbeat_timeout=timedelta(seconds=args.heartbeat_s))
    client = await Client.connect(args.address)
    worker = captchaai.worker(client, task_queue=args.task_queue, workflows=[SolveEach],
                              sticky_queue_schedule_to_start_timeout=timedelta(seconds=args.sticky_s),
                              max_concurrent_activities=1000)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with worker:
        print("worker ready", flush=True)
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main())
