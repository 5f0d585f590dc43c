"""AsyncSolver at scale: N solves (default 10,000) in flight at once through one AsyncSolver in one
process (one engine instance, one httpx.AsyncClient), against the emulator.

    python benches/async_scale.py [--solves N] [--time-scale S] [--type recaptcha_v2|turnstile]
                                  [--tracemalloc] [--profile FILE]

The emulator (``$CAPTCHAAI_EMULATOR`` or target/release/captchaai-emulator) is started on a free
127.0.0.1 port with one key holding 2*N threads, the given time scale and seed 1, and is killed at
exit. Every solve is started (``solver.start``) and then all are driven at once with
``asyncio.gather``; the bench fails unless every solve is solved. It reports:

- in flight: the most solves that were at once accepted by the service and not yet answered,
  from the solutions' ``submitted_at``/``solved_at`` (virtual time, the emulator's clock), and the
  most driver coroutines running at once;
- wall time, polls per solve and HTTP requests per solve (the emulator's request counter);
- peak RSS per solve: (ru_maxrss after the run - ru_maxrss of the same process with the solver
  created, its component compiled and instantiated, and no solve made) / N. ru_maxrss is a
  high-water mark, so this is the peak growth the solves caused (Python objects, the engine
  instance's linear memory, sockets and buffers), divided over the solves;
- CPU per solve: this process's user+system CPU time over the run / N (the emulator is another
  process and not counted). It includes creating the N tasks and solves, every engine call,
  httpx and asyncio. Of it, the engine calls' share (every ``Engine._call``, argument and
  result conversion included, timed with ``time.thread_time``) is reported on its own: the
  cost of running the one .wasm from Python, against the rest (HTTP client, event loop, solver).

``--tracemalloc`` also reports Python-heap bytes per solve at the most-in-flight point (slows the
run; its CPU figure is then not comparable). ``--profile FILE`` writes a cProfile of the run.
The machine's load (/proc/loadavg) is printed before and after: CPU time is the figure to
compare, wall time depends on the load.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import gc
import json
import os
import queue
import resource
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from captchaai_engine import AsyncSolver, Clock, Config, RecaptchaV2Task, TurnstileTask
from captchaai_engine.engine import Engine

ROOT = Path(__file__).resolve().parents[3]
KEY = "0123456789abcdef0123456789abcdef"
STARTUP_TIMEOUT_S = 15


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


class Emulator:
    def __init__(self, args: list) -> None:
        path = Path(os.environ.get("CAPTCHAAI_EMULATOR") or ROOT / "target" / "release" / "captchaai-emulator")
        if not path.is_file():
            sys.exit(f"no emulator at {path}: `cargo build --release -p captchaai-emulator` or set CAPTCHAAI_EMULATOR")
        self.process = subprocess.Popen([str(path), "--port", "0", *args], stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
        atexit.register(self.stop)
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in self.process.stdout], daemon=True).start()
        try:
            line = lines.get(timeout=STARTUP_TIMEOUT_S)
        except queue.Empty:
            sys.exit("the emulator did not report its address in time")
        prefix = "emulator listening on "
        if not line.startswith(prefix):
            sys.exit(f"unexpected emulator output: {line!r}")
        self.base_url = line[len(prefix):].strip()

    def get(self, path: str) -> dict:
        with urllib.request.urlopen(self.base_url + path, timeout=10) as reply:
            return json.loads(reply.read())

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def max_overlap(intervals) -> int:
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    best = cur = 0
    for _, d in events:
        cur += d
        best = max(best, cur)
    return best


class EngineTimer:
    """Counts the calls into the engine and their CPU time (the calling thread's), by wrapping
    ``Engine._call`` while it is installed."""

    def __init__(self) -> None:
        self.calls = 0
        self.cpu_s = 0.0
        self._original = Engine._call

    def __enter__(self) -> EngineTimer:
        original, timer = self._original, self

        def timed(engine, name, *args):
            start = time.thread_time()
            try:
                return original(engine, name, *args)
            finally:
                timer.cpu_s += time.thread_time() - start
                timer.calls += 1

        Engine._call = timed
        return self

    def __exit__(self, *exc) -> None:
        Engine._call = self._original


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def run(args, emulator: Emulator) -> int:
    n = args.solves
    make = {"recaptcha_v2": lambda i: RecaptchaV2Task("6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-",
                                                      f"https://portal.example.com/{i}"),
            "turnstile": lambda i: TurnstileTask("0x4AAAAAAAB-scale", f"https://portal.example.com/{i}")}[args.type]
    solver = AsyncSolver(KEY, Config(base_url=emulator.base_url), clock=Clock(args.time_scale))
    gc.collect()
    baseline_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    requests_before = emulator.get("/_emulator/stats")["requests"]

    if args.tracemalloc:
        import tracemalloc
        tracemalloc.start()
        heap_before = tracemalloc.get_traced_memory()[0]
    profiler = None
    if args.profile:
        import cProfile
        profiler = cProfile.Profile()
        profiler.enable()

    running = peak_running = 0
    heap_at_peak = 0

    async def one(pending):
        nonlocal running, peak_running, heap_at_peak
        running += 1
        if running > peak_running:
            peak_running = running
        try:
            return await solver.run(pending)
        finally:
            if args.tracemalloc and running == n:
                heap_at_peak = max(heap_at_peak, tracemalloc.get_traced_memory()[0])
            running -= 1

    cpu0, wall0 = cpu_s(), time.perf_counter()
    with EngineTimer() as engine:
        pendings = [await solver.start(make(i)) for i in range(n)]
        results = await asyncio.wait_for(asyncio.gather(*(one(p) for p in pendings), return_exceptions=True),
                                         args.timeout)
    cpu, wall = cpu_s() - cpu0, time.perf_counter() - wall0
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(args.profile)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    requests = emulator.get("/_emulator/stats")["requests"] - requests_before
    await solver.aclose()

    failures = [r for r in results if isinstance(r, BaseException)]
    solutions = [r for r in results if not isinstance(r, BaseException)]
    in_flight = max_overlap([(s.submitted_at, s.solved_at) for s in solutions])
    polls = sum(s.polls for s in solutions) / max(len(solutions), 1)
    print(f"solves: {n} ({args.type}, time scale {args.time_scale}), solved {len(solutions)}, failed {len(failures)}")
    if failures:
        kinds = {}
        for f in failures:
            kinds[repr(f)[:160]] = kinds.get(repr(f)[:160], 0) + 1
        for k, c in sorted(kinds.items(), key=lambda kv: -kv[1])[:5]:
            print(f"  {c} x {k}")
    print(f"in flight at once: {in_flight} accepted by the service and not yet answered "
          f"(from submitted_at/solved_at); {peak_running} driver coroutines running at once")
    print(f"wall: {wall:.1f} s; polls per solve {polls:.2f}; HTTP requests per solve {requests / n:.2f} ({requests})")
    print(f"peak RSS: baseline {baseline_kb / 1024:.1f} MiB (solver created, component instantiated, no solve), "
          f"peak {peak_kb / 1024:.1f} MiB -> {(peak_kb - baseline_kb) * 1024 / n / 1000:.1f} KB per solve "
          f"(peak growth / solves)")
    print(f"CPU: {cpu:.2f} s process user+sys over the run -> {cpu / n * 1e6:.0f} µs per solve "
          f"({cpu / max(requests, 1) * 1e6:.0f} µs per HTTP request)")
    print(f"  of which engine calls: {engine.cpu_s / n * 1e6:.0f} µs per solve ({engine.calls / n:.1f} calls per "
          f"solve, {engine.cpu_s / max(engine.calls, 1) * 1e6:.1f} µs each); everything else (HTTP client, "
          f"event loop, solver): {(cpu - engine.cpu_s) / n * 1e6:.0f} µs per solve")
    if args.tracemalloc:
        print(f"tracemalloc: Python heap at the all-in-flight point {(heap_at_peak - heap_before) / n / 1000:.1f} KB "
              f"per solve (tracing slows the run: ignore its CPU figure)")
    return 0 if not failures and len(solutions) == n else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--solves", type=int, default=10_000)
    parser.add_argument("--time-scale", type=float, default=2.0,
                        help="virtual time per real time, both sides (default 2: reCAPTCHA v2 solves of "
                             "20-60 s virtual, polled from 26 s every 5 s, take 10-30 s real)")
    parser.add_argument("--type", choices=["recaptcha_v2", "turnstile"], default="recaptcha_v2")
    parser.add_argument("--timeout", type=float, default=900.0, help="bound on the whole run, seconds")
    parser.add_argument("--tracemalloc", action="store_true")
    parser.add_argument("--profile", metavar="FILE")
    args = parser.parse_args()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    from importlib.metadata import version

    import httpx
    print(f"python {sys.version.split()[0]}, httpx {httpx.__version__}, wasmtime-py {version('wasmtime')}, "
          f"fd limit {soft} (hard {hard}), load {loadavg()}")
    emulator = Emulator(["--seed", "1", "--time-scale", str(args.time_scale), "--key", f"{KEY}:{2 * args.solves}"])
    try:
        code = asyncio.run(run(args, emulator))
    finally:
        emulator.stop()
    print(f"load after: {loadavg()}")
    return code


if __name__ == "__main__":
    sys.exit(main())
