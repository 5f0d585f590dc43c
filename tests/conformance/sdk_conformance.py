#!/usr/bin/env python3
"""Conformance: the official CaptchaAI SDK (PyPI `captchaai` 1.0.1, unmodified, real time)
solves every captcha type it supports against the emulator binary, once in the default mode and
once with `--busy-threads silent-queue`, and meets the emulator's account answers with the
exception classes its source promises. Exits non-zero on any failure; prints progress.

The SDK is pointed at the emulator through its supported `base_url` argument (no patching).
Every answer is checked against what the emulator says the task's answer is
(`GET /_emulator/tasks/ID`). Talks only to the 127.0.0.1 emulator it starts itself.

Usage: python sdk_conformance.py [--emulator PATH]   (run.sh makes the venv and builds the binary)
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import importlib.metadata
import json
import secrets
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import captchaai
from captchaai import AsyncCaptchaAI, CaptchaAI

SDK_VERSION = "1.0.1"
ROOT = Path(__file__).resolve().parents[2]
GOOGLEKEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
PAGE = "https://portal.example.com/login"
PROXY = {"proxy": "user:pass@203.0.113.7:3128", "proxytype": "HTTP"}
STARTUP_TIMEOUT_S = 20
# Emulator solve times (real ms at time scale 1): short, so the SDK's own initial waits
# (1-15 s plus jitter) dominate.
SOLVE_TIME = "all=300:1200"

_print_lock = threading.Lock()


def say(msg: str) -> None:
    with _print_lock:
        print(msg, flush=True)


def png(side: int = 60, size: int = 400) -> bytes:
    """A PNG signature and IHDR of `side` x `side`, padded to `size` bytes (the emulator and the
    SDK read only the header)."""
    head = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + side.to_bytes(4, "big") * 2 + b"\x08\x02\x00\x00\x00"
    return head + b"\x00" * (size - len(head))


class Emulator:
    """The emulator binary on 127.0.0.1, port 0; stopped with SIGTERM (then killed)."""

    def __init__(self, binary: Path, args: list[str]):
        self.proc = subprocess.Popen(
            [str(binary), "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line_box: list[str] = []
        reader = threading.Thread(target=lambda: line_box.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(STARTUP_TIMEOUT_S)
        line = line_box[0] if line_box else ""
        prefix = "emulator listening on "
        if not line.startswith(prefix):
            self.stop()
            raise RuntimeError(f"the emulator did not start (first line {line!r})")
        self.base_url = line[len(prefix):].strip()

    def control(self, path: str) -> dict:
        with urllib.request.urlopen(self.base_url + path, timeout=10) as r:
            return json.loads(r.read())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def cases() -> list[tuple[str, str, dict]]:
    """(label, client method, kwargs) for every type in the SDK's registry (14 rows)."""
    return [
        ("normal", "normal", {"image": png(), "numeric": 1, "min_len": 4, "max_len": 6}),
        ("grid", "grid", {"image": png(), "instructions": "buses", "grid_size": "3x3"}),
        ("bls", "bls", {"images": [png(100)] * 9, "instructions": "664"}),
        ("recaptcha_v2", "recaptcha_v2", {"sitekey": GOOGLEKEY, "url": PAGE}),
        ("recaptcha_v2_invisible", "recaptcha_v2", {"sitekey": GOOGLEKEY, "url": PAGE, "invisible": True}),
        ("recaptcha_v2_enterprise", "recaptcha_v2", {"sitekey": GOOGLEKEY, "url": PAGE, "enterprise": True}),
        ("recaptcha_v3", "recaptcha_v3", {"sitekey": GOOGLEKEY, "url": PAGE, "action": "login", "min_score": 0.3}),
        (
            "recaptcha_v3_enterprise",
            "recaptcha_v3",
            {"sitekey": GOOGLEKEY, "url": PAGE, "action": "login", "enterprise": True},
        ),
        ("turnstile", "turnstile", {"sitekey": "0x4AAAAAAABkMYinukE8nzY", "url": PAGE}),
        ("cloudflare_challenge", "cloudflare_challenge", {"url": PAGE, **PROXY}),
        (
            "geetest",
            "geetest",
            {"gt": "81388ea1fc187e0c335c0a8907ff2625", "challenge": "12345678abc90123d45678ef90123a456b", "url": PAGE},
        ),
        ("captchafox", "captchafox", {"sitekey": "sk_11111111111111111111", "url": PAGE, **PROXY}),
        ("friendly_captcha", "friendly_captcha", {"sitekey": "FCMGEMUD2KTDSQ5H", "url": PAGE, "version": "v2"}),
        ("lemin", "lemin", {"captcha_id": "CROPPED_3dfdd5c_d1872b526b794d83", "div_id": "lemin-cropped", "url": PAGE}),
    ]


WANTS_UA = {"recaptcha_v2_enterprise", "recaptcha_v3_enterprise", "cloudflare_challenge", "captchafox"}
STRUCTURED = {"grid": list, "bls": list, "geetest": dict, "lemin": dict}


def check_result(label: str, result, emulator: Emulator) -> None:
    """The SDK's SolveResult holds exactly the answer the emulator gave, in the SDK's shape."""
    task = emulator.control(f"/_emulator/tasks/{int(result.task_id)}")
    if task["state"] != "solved":
        raise AssertionError(f"{label}: the emulator's task is {task['state']}")
    want = task["answer"]
    kind = STRUCTURED.get(label)
    if kind is None:
        if result.solution != want:
            raise AssertionError(f"{label}: answer differs from the emulator's")
    else:
        if not isinstance(result.solution, kind) or result.solution != json.loads(want):
            raise AssertionError(f"{label}: structured answer {type(result.solution).__name__} differs")
    has_ua = bool(result.user_agent)
    if has_ua != (label in WANTS_UA):
        raise AssertionError(f"{label}: user_agent present={has_ua}")
    if has_ua and result.user_agent != task["user_agent"]:
        raise AssertionError(f"{label}: user_agent differs from the emulator's")


def solve_every_type(mode: str, binary: Path, extra: list[str], threads: int) -> list[str]:
    """Solves all 14 types at once, one sync client per type. Returns failure lines."""
    key = secrets.token_hex(16)
    emulator = Emulator(binary, ["--seed", "5", "--solve-time", SOLVE_TIME, "--key", f"{key}:{threads}", *extra])
    failures: list[str] = []
    try:
        def one(case):
            label, method, kwargs = case
            started = time.monotonic()
            client = CaptchaAI(key, base_url=emulator.base_url)
            try:
                result = getattr(client, method)(**kwargs)
                check_result(label, result, emulator)
            finally:
                client.close()
            return f"[{mode}] ok   {label:<24} {time.monotonic() - started:5.1f} s"

        # The async client shares the engine; one solve proves its driver against the emulator.
        async def async_solve():
            started = time.monotonic()
            client = await AsyncCaptchaAI.create(api_key=key, base_url=emulator.base_url)
            try:
                result = await client.turnstile(sitekey="0x4AAAAAAABkMYinukE8nzY", url=PAGE)
                check_result("turnstile", result, emulator)
            finally:
                await client.aclose()
            return f"[{mode}] ok   {'turnstile (async client)':<24} {time.monotonic() - started:5.1f} s"

        jobs = [(label, lambda c=c: one(c)) for c in cases() for label in [c[0]]]
        jobs.append(("turnstile (async client)", lambda: asyncio.run(async_solve())))
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(jobs)) as pool:
            futures = {pool.submit(job): label for label, job in jobs}
            for fut in concurrent.futures.as_completed(futures):
                try:
                    say(fut.result())
                except Exception as e:  # noqa: BLE001 - every failure is reported, then counted
                    line = f"[{mode}] FAIL {futures[fut]:<24} {type(e).__name__}: {e}"
                    say(line)
                    failures.append(line)

        stats = emulator.control("/_emulator/stats")
        requests = emulator.control("/_emulator/requests")
        zero_balance = sum(1 for r in requests if r.get("reply_code") == "ERROR_ZERO_BALANCE")
        say(
            f"[{mode}] emulator: {stats['tasks_created']} tasks, {stats['tasks_queued']} queued, "
            f"{zero_balance} ERROR_ZERO_BALANCE, {stats['requests']} requests"
        )
        if stats["tasks_created"] != len(cases()) + 1:
            failures.append(f"[{mode}] FAIL expected {len(cases()) + 1} tasks, got {stats['tasks_created']}")
        if "silent-queue" in extra:
            # The mode was exercised: tasks over the cap queued, and the SDK never saw a refusal.
            if stats["tasks_queued"] == 0 or zero_balance:
                failures.append(f"[{mode}] FAIL silent queue not exercised ({stats['tasks_queued']} queued)")
    finally:
        emulator.stop()
    return failures


def account_answers(binary: Path) -> list[str]:
    """The emulator's (unconfirmed) answers for accounts without a plan and for busy threads,
    met by the SDK with the exception classes its source maps them to."""
    busy, dead, gone, empty = (secrets.token_hex(16) for _ in range(4))
    emulator = Emulator(
        binary,
        [
            "--solve-time", "all=6000:6000",
            "--key", f"{busy}:1",
            "--no-plan-key", f"{dead}:3:zero-balance",
            "--no-plan-key", f"{gone}:3:key-does-not-exist",
            "--no-plan-key", f"{empty}:3:zero-threads",
        ],
    )  # fmt: skip
    failures: list[str] = []

    def expect(label: str, exc: type, fn) -> None:
        """`fn` raises `exc` (appends a failure line otherwise)."""
        started = time.monotonic()
        try:
            fn()
        except exc:
            say(f"[accounts] ok   {label}: {exc.__name__} after {time.monotonic() - started:.1f} s")
            return
        except Exception as e:  # noqa: BLE001
            failures.append(f"[accounts] FAIL {label}: {type(e).__name__} instead of {exc.__name__}: {e}")
            say(failures[-1])
            return
        failures.append(f"[accounts] FAIL {label}: no {exc.__name__}")
        say(failures[-1])

    def solve(key: str, **client_args):
        client = CaptchaAI(key, base_url=emulator.base_url, **client_args)
        try:
            return client.turnstile(sitekey="0x4AAAAAAABkMYinukE8nzY", url=PAGE)
        finally:
            client.close()

    def busy_threads() -> None:
        """Default mode, a 1-thread plan: the second solve is refused with ERROR_ZERO_BALANCE,
        diagnosed with threadsinfo, waits ~8-11 s for the first task's thread (6 s solve),
        resubmits and is solved."""
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            first = pool.submit(solve, busy)
            time.sleep(0.5)
            second = pool.submit(solve, busy)
            results = [first.result(timeout=120), second.result(timeout=120)]
        if not all(r.solution for r in results):
            raise AssertionError("an empty solution")
        say("[accounts] ok   busy threads (zero-balance mode): both solved")

    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            jobs = [
                pool.submit(expect, "no plan, ERROR_KEY_DOES_NOT_EXIST", captchaai.InvalidKeyError, lambda: solve(gone)),
                pool.submit(
                    expect, "no plan, ERROR_ZERO_BALANCE with free threads", captchaai.NoThreadsError, lambda: solve(dead)
                ),
                # A 0-thread plan reads as "all busy" to the SDK (working >= threads): it waits out
                # thread_busy_timeout (shortened here from 120 s) before giving up.
                pool.submit(
                    expect, "no plan, 0 threads", captchaai.ThreadLimitError, lambda: solve(empty, thread_busy_timeout=5)
                ),
                pool.submit(busy_threads),
            ]
            for job in jobs:
                job.result()
        refusals = [
            r for r in emulator.control("/_emulator/requests")
            if r["path"] == "/in.php" and r.get("reply_code") == "ERROR_ZERO_BALANCE"
        ]  # fmt: skip
        # dead: 1, empty: 2 (first try, one retry after the wait), busy: at least 1.
        if len(refusals) < 4:
            raise AssertionError(f"only {len(refusals)} ERROR_ZERO_BALANCE refusals were served")
    except Exception as e:  # noqa: BLE001
        failures.append(f"[accounts] FAIL {type(e).__name__}: {e}")
        say(failures[-1])
    finally:
        emulator.stop()
    return failures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--emulator", type=Path, default=ROOT / "target" / "release" / "captchaai-emulator")
    args = ap.parse_args()
    version = importlib.metadata.version("captchaai")
    if version != SDK_VERSION:
        print(f"expected captchaai {SDK_VERSION}, found {version}", file=sys.stderr)
        return 2
    if not args.emulator.is_file():
        print(f"the emulator {args.emulator} is missing (cargo build --release -p captchaai-emulator)", file=sys.stderr)
        return 2
    say(f"captchaai {version} against {args.emulator.relative_to(ROOT) if args.emulator.is_relative_to(ROOT) else args.emulator}")
    started = time.monotonic()
    # The three runs are independent (own emulator, own key): run them at once.
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        runs = [
            pool.submit(solve_every_type, "default", args.emulator, [], 20),
            pool.submit(solve_every_type, "silent-queue", args.emulator, ["--busy-threads", "silent-queue"], 2),
            pool.submit(account_answers, args.emulator),
        ]
        failures = [line for run in runs for line in run.result()]
    took = time.monotonic() - started
    if failures:
        say(f"\n{len(failures)} failure(s) in {took:.0f} s:")
        for line in failures:
            say("  " + line)
        return 1
    say(f"\nall passed in {took:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
