#!/usr/bin/env python3
"""Polling-schedule benchmark: polls per solve and the delay between the answer being ready
and the client seeing it, per captcha type, for

- this engine's fixed tables (the native engine, driven with a virtual clock by `polling-bench`),
- the same engine adapting: one `SolveTimes` model per type that observes every finished solve,
  measured after a warm-up of N solves, and after mix shifts (solves until it settles),
- the official CaptchaAI SDK (`captchaai` 1.0.1, its own sans-IO generators driven with a
  virtual clock: its per-type first waits and 5 s polls, with its 0-1 s jitter on every wait),
- 2captcha-python 2.1.2 (its real `TwoCaptcha.solve` loop, with `time` and the API client
  replaced by a virtual clock and a fake service: first poll at once, then every 10 s).

All see the same solve times (seeded draws per type and mix), a service that answers at once
(zero network latency) and never fails. The mixes come from `--mixes` (default mixes.json beside
this file: `modelled`, the emulator's defaults, `CaptchaKind::default_solve_time`, modelled on
the docs' and the SDK comments' figures; `fast`, `slow` and `bimodal`). None is measured on the
live service. It ends with issue 22's goal checks and the engine-cost numbers
(`polling-bench cost`).

Usage: benches/polling/run.sh [--mixes FILE] [--solves N] [--warmup N] [--shift BEFORE AFTER] [--seed S]
(prints Markdown tables, the goal checks and the engine-cost numbers)
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import random
import statistics
import subprocess
import sys
from pathlib import Path

from captchaai.core import orchestrator
from captchaai.core.config import Config as SdkConfig
from captchaai.core.orchestrator import ApiCall, Sleep
from captchaai.core.registry import get_entry
from captchaai.transport.base import UniformResponse
import twocaptcha.solver as twocaptcha_solver
from twocaptcha import TwoCaptcha

HERE = Path(__file__).resolve().parent
KEY = "0123456789abcdef0123456789abcdef"  # a placeholder; nothing leaves the process
PAGE = "https://portal.example.com/login"
GOOGLEKEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"


def png(side: int = 60, size: int = 400) -> bytes:
    head = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + side.to_bytes(4, "big") * 2 + b"\x08\x02\x00\x00\x00"
    return head + b"\x00" * (size - len(head))


IMG = base64.b64encode(png()).decode()

# (our type, solve-time range s (the emulator's default), our task JSON, SDK registry row,
#  SDK params as its client methods build them, 2captcha `method` and params)
TYPES = [
    ("image", (0.3, 1.0), {"type": "image", "image": IMG}, "normal", {"image": png()}, "base64", {"body": IMG}),
    (
        "grid", (3, 10), {"type": "grid", "image": IMG, "instructions": "buses"}, "grid",
        {"image": png(), "instructions": "buses", "grid_size": "3x3", "img_type": "recaptcha"},
        "base64", {"body": IMG, "recaptcha": 1, "textinstructions": "buses"},
    ),
    (
        "bls", (3, 10), {"type": "bls", "instructions": "664", "images": [base64.b64encode(png(100)).decode()] * 9},
        "bls", {"images": [png(100)] * 9, "instructions": "664"}, "bls", {"instructions": "664"},
    ),
    (
        "recaptcha_v2", (20, 60), {"type": "recaptcha_v2", "sitekey": GOOGLEKEY, "pageurl": PAGE}, "recaptcha_v2",
        {"googlekey": GOOGLEKEY, "pageurl": PAGE}, "userrecaptcha", {"googlekey": GOOGLEKEY, "pageurl": PAGE},
    ),
    (
        "recaptcha_v3", (5, 10), {"type": "recaptcha_v3", "sitekey": GOOGLEKEY, "pageurl": PAGE, "action": "login"},
        "recaptcha_v3", {"googlekey": GOOGLEKEY, "pageurl": PAGE, "version": "v3", "action": "login"},
        "userrecaptcha", {"googlekey": GOOGLEKEY, "pageurl": PAGE, "version": "v3", "action": "login"},
    ),
    (
        "turnstile", (10, 15), {"type": "turnstile", "sitekey": "0x4AAAAAAABkMYinukE8nzY", "pageurl": PAGE},
        "turnstile", {"sitekey": "0x4AAAAAAABkMYinukE8nzY", "pageurl": PAGE},
        "turnstile", {"sitekey": "0x4AAAAAAABkMYinukE8nzY", "pageurl": PAGE},
    ),
    (
        "cloudflare_challenge", (20, 90),
        {"type": "cloudflare_challenge", "pageurl": PAGE, "proxy": "user:pass@203.0.113.7:3128", "proxytype": "HTTP"},
        "cloudflare_challenge", {"pageurl": PAGE}, "cloudflare_challenge", {"pageurl": PAGE},
    ),
    (
        "geetest_v3", (10, 25),
        {"type": "geetest_v3", "gt": "81388ea1fc187e0c335c0a8907ff2625", "challenge": "12345678abc", "pageurl": PAGE},
        "geetest", {"gt": "81388ea1fc187e0c335c0a8907ff2625", "challenge": "12345678abc", "pageurl": PAGE},
        "geetest", {"gt": "81388ea1fc187e0c335c0a8907ff2625", "challenge": "12345678abc", "pageurl": PAGE},
    ),
    (
        "captchafox", (8, 20),
        {"type": "captchafox", "sitekey": "sk_11111111111111111111", "pageurl": PAGE,
         "proxy": "user:pass@203.0.113.7:3128", "proxytype": "HTTP"},
        "captchafox", {"sitekey": "sk_11111111111111111111", "pageurl": PAGE},
        "captchafox", {"sitekey": "sk_11111111111111111111", "pageurl": PAGE},
    ),
    (
        "friendly_captcha", (8, 20), {"type": "friendly_captcha", "sitekey": "FCMGEMUD2KTDSQ5H", "pageurl": PAGE},
        "friendly_captcha", {"sitekey": "FCMGEMUD2KTDSQ5H", "pageurl": PAGE},
        "friendly_captcha", {"sitekey": "FCMGEMUD2KTDSQ5H", "pageurl": PAGE},
    ),
    (
        "lemin", (8, 20), {"type": "lemin", "captcha_id": "CROPPED_3dfdd5c_d1872b526b794d83", "div_id": "d", "pageurl": PAGE},
        "lemin", {"captcha_id": "CROPPED_3dfdd5c_d1872b526b794d83", "div_id": "d", "pageurl": PAGE},
        "lemin", {"captcha_id": "CROPPED_3dfdd5c_d1872b526b794d83", "div_id": "d", "pageurl": PAGE},
    ),
]  # fmt: skip

STRUCTURED_ANSWER = {"grid": "[1,4]", "bls": "[1,4]", "geetest": '{"challenge":"c"}', "lemin": '{"answer":"a"}'}


def draw(rng: random.Random, dist: dict, n: int) -> list[float]:
    """`n` solve times (s, ms granularity) from a mixes-file distribution."""
    return [round(max(0.001, one(rng, dist)), 3) for _ in range(n)]


def one(rng: random.Random, dist: dict) -> float:
    (kind, p), = dist.items()
    if kind == "uniform":
        return rng.uniform(p[0], p[1])
    if kind == "triangular":
        return rng.triangular(p[0], p[2], p[1])
    if kind == "lognormal":
        return min(p["max"], max(p["min"], rng.lognormvariate(math.log(p["median"]), p["sigma"])))
    if kind == "mixture":
        pick = rng.uniform(0, sum(w for w, _ in p))
        for weight, sub in p:
            pick -= weight
            if pick <= 0:
                return one(rng, sub)
        return one(rng, p[-1][1])
    raise ValueError(f"unknown distribution {kind!r}")


def describe(dist: dict) -> str:
    (kind, p), = dist.items()
    if kind == "uniform":
        return f"U {p[0]:g}-{p[1]:g}"
    if kind == "triangular":
        return f"tri {p[0]:g}-{p[2]:g}"
    if kind == "lognormal":
        return f"logn {p['median']:g}±{p['sigma']:g}"
    return " + ".join(f"{w:g}×({describe(sub)})" for w, sub in p)


def run_sdk(row: str, params: dict, solve_s: float) -> tuple[int, float]:
    """The official SDK's `solve_captcha` generator on a virtual clock: (polls, delay s)."""
    config = SdkConfig(api_key=KEY, proxy="user:pass@203.0.113.7:3128", proxytype="HTTP")
    entry = get_entry(row)
    gen = orchestrator.solve_captcha(config, entry, dict(params))
    now, ready, polls = 0.0, None, 0
    effect = next(gen)
    for _ in range(10_000):
        try:
            if isinstance(effect, Sleep):
                now += effect.seconds
                effect = gen.send(None)
            elif isinstance(effect, ApiCall) and effect.url.endswith("in.php"):
                ready = now + solve_s
                effect = gen.send(UniformResponse(200, {"status": 1, "request": "73000000001"}))
            elif isinstance(effect, ApiCall) and effect.data.get("action") == "get":
                polls += 1
                if now >= ready:
                    answer = STRUCTURED_ANSWER.get(row, "03AFcWeA-token")
                    body = {"status": 1, "request": answer, "result": answer, "user_agent": "Mozilla/5.0"}
                else:
                    body = {"status": 0, "request": "CAPCHA_NOT_READY"}
                effect = gen.send(UniformResponse(200, body))
            else:
                raise RuntimeError(f"unexpected effect {effect!r}")
        except StopIteration:
            return polls, now - ready
    raise RuntimeError("the SDK did not finish within 10,000 effects")


class VirtualTime:
    """Stands in for the `time` module inside twocaptcha.solver: time() and sleep() only."""

    def __init__(self) -> None:
        self.now = 0.0

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class FakeService:
    """Stands in for twocaptcha's ApiClient: OK|id at once, then not-ready until solved."""

    def __init__(self, clock: VirtualTime, solve_s: float) -> None:
        self.clock, self.solve_s, self.ready, self.polls = clock, solve_s, None, 0

    def in_(self, files=None, **params) -> str:
        self.ready = self.clock.now + self.solve_s
        return "OK|73000000001"

    def res(self, **params) -> str:
        self.polls += 1
        return "OK|answer" if self.clock.now >= self.ready else "CAPCHA_NOT_READY"


def run_2captcha(method: str, params: dict, solve_s: float) -> tuple[int, float]:
    """2captcha-python's own `solve` loop on a virtual clock: (polls, delay s)."""
    clock = VirtualTime()
    twocaptcha_solver.time = clock  # the module-level `time` its wait_result calls
    solver = TwoCaptcha(KEY)
    service = FakeService(clock, solve_s)
    solver.api_client = service
    # Its reCAPTCHA timeout (600 s) for every type: its 120 s default would end some slow-mix
    # solves with a timeout; the timeout never changes when it polls.
    solver.solve(timeout=solver.recaptcha_timeout, method=method, **params)
    return service.polls, clock.now - service.ready


def summarise(rows: list[tuple[int, float]]) -> dict:
    polls = [p for p, _ in rows]
    delays = sorted(d for _, d in rows)
    return {
        "polls": statistics.fmean(polls),
        "delay": statistics.fmean(delays),
        "p95": delays[min(len(delays) - 1, int(0.95 * len(delays)))],
    }


def verdict(ours: dict, other: dict, tie: float = 0.005) -> str:
    """Pareto comparison on (mean polls, mean delay); differences within `tie` (relative) count
    as equal."""
    def cmp(a: float, b: float) -> int:
        return 0 if abs(a - b) <= tie * max(abs(a), abs(b), 1e-9) else (-1 if a < b else 1)

    p, d = cmp(ours["polls"], other["polls"]), cmp(ours["delay"], other["delay"])
    if p <= 0 and d <= 0:
        return "better" if (p, d) != (0, 0) else "equal"
    if p >= 0 and d >= 0:
        return "worse"
    return "trade-off"


def ranges(seconds: list[int]) -> str:
    """`[4, 7, 8]` -> `4, 7-8 s`; empty -> `none`."""
    if not seconds:
        return "none"
    runs: list[list[int]] = []
    for s in seconds:
        if runs and s == runs[-1][-1] + 1:
            runs[-1].append(s)
        else:
            runs.append([s])
    return ", ".join(f"{r[0]}" if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs) + " s"


TIE = 0.005  # relative differences within 0.5% count as equal
GOAL_CUT = 0.30  # fast, slow, bimodal: at least 30% fewer polls or 30% less mean delay than the table
GOAL_NEAR = 0.02  # modelled: no worse than the table by more than 2% on either measure
SETTLE_WITHIN = 100  # solves of the type after a mix shift
REFERENCES = 5  # models warmed on the new mix (other draws each) a shifted model is held against
DEADLINE_S = {"image": 60, "grid": 60, "bls": 60, "cloudflare_challenge": 300}  # others: 120 s


def ms(seconds: list[float]) -> list[int]:
    return [round(s * 1000) for s in seconds]


def rel(a: float, b: float) -> float:
    return (a - b) / b if b else (0.0 if a == b else math.inf)


def sweep(name: str) -> list[int]:
    """First waits (s) tried with the table's 5 s polls: 1-60 s by 1 s, then by 5 s to the deadline."""
    top = DEADLINE_S.get(name, 120) - 5
    return list(range(1, min(60, top) + 1)) + list(range(65, top + 1, 5))


def settle(rows: list[tuple[int, float]], references: list[list[tuple[int, float]]], window: int = 50, step: int = 10) -> int | None:
    """Solves after a shift until the engine has settled: from there on, every `window` of solves
    has mean polls and mean delay no worse by more than 10% (plus 0.05 polls, 0.25 s) than the
    worst of `references`, models already warmed on the new mix (each on other warm-up draws),
    get on the very same solves: it does no worse than a model warmed there might. None if never."""
    def mean(part: list, i: int) -> float:
        return statistics.fmean(r[i] for r in part)

    def ok(j: int) -> bool:
        ours = rows[j : j + window]
        polls = max(mean(ref[j : j + window], 0) for ref in references)
        delay = max(mean(ref[j : j + window], 1) for ref in references)
        return (mean(ours, 0) <= polls * 1.10 + 0.05) and (mean(ours, 1) <= delay * 1.10 + 0.25)

    settled = None
    for j in reversed(range(0, len(rows) - window + 1, step)):
        if not ok(j):
            break
        settled = j
    return settled


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--solves", type=int, default=2_000, help="measured solves per type and mix")
    ap.add_argument("--warmup", type=int, default=200, help="solves the adaptive engine learns from first")
    ap.add_argument("--shift", type=int, nargs=2, default=[300, 600], metavar=("BEFORE", "AFTER"),
                    help="solves before and after each mix shift")  # fmt: skip
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--mixes", type=Path, default=HERE / "mixes.json", help="solve-time mixes (JSON)")
    ap.add_argument("--engine", type=Path, required=True, help="the polling-bench binary")
    args = ap.parse_args()

    mixes = {k: v for k, v in json.loads(args.mixes.read_text()).items() if not k.startswith("_")}
    rows_of = {row[0]: row for row in TYPES}
    for mix in mixes.values():
        unknown = set(mix["types"]) - set(rows_of)
        if unknown:
            raise SystemExit(f"{args.mixes}: unknown types {sorted(unknown)}")
    rng = random.Random(args.seed)
    random.seed(args.seed)  # the SDK's jitter uses the global generator

    samples = {m: {t: draw(rng, d, args.warmup + args.solves) for t, d in mix["types"].items()} for m, mix in mixes.items()}
    entries = []
    for m, mix in mixes.items():
        for t in mix["types"]:
            task, measured = rows_of[t][2], ms(samples[m][t][args.warmup :])
            entries.append({"name": f"{m}/{t}/fixed", "task": task, "solve_ms": measured})
            entries.append({"name": f"{m}/{t}/adaptive", "task": task, "solve_ms": ms(samples[m][t]), "adaptive": True})
            for w in sweep(t):
                entries.append({"name": f"{m}/{t}@{w}", "task": task, "solve_ms": measured, "initial_wait_ms": w * 1000})
    shifts = [(a, b) for a in mixes for b in mixes if a != b]
    for a, b in shifts:
        for t in mixes[a]["types"]:
            if t in mixes[b]["types"]:
                before = draw(rng, mixes[a]["types"][t], args.shift[0])
                after = draw(rng, mixes[b]["types"][t], args.shift[1])
                task = rows_of[t][2]
                entries.append({"name": f"{a}>{b}/{t}", "task": task, "solve_ms": ms(before + after), "adaptive": True})
                # The references: models warmed on the new mix, on the same solves after the shift.
                for k in range(REFERENCES):
                    warm = draw(rng, mixes[b]["types"][t], args.shift[0])
                    entries.append({"name": f"{b}>{b}/{a}/{t}/{k}", "task": task, "solve_ms": ms(warm + after), "adaptive": True})  # fmt: skip
    # Controls: no shift; one more model warmed on the same mix (other draws) held against
    # `REFERENCES` warmed ones, on the same solves: how often the settle test fails with nothing
    # to settle (the rule's own spread between warm-ups).
    for m, mix in mixes.items():
        for t, dist in mix["types"].items():
            after = draw(rng, dist, args.shift[1])
            for k in range(REFERENCES + 1):
                warm = draw(rng, dist, args.shift[0])
                entries.append({"name": f"control/{m}/{t}/{k}", "task": rows_of[t][2], "solve_ms": ms(warm + after), "adaptive": True})  # fmt: skip
    done = subprocess.run([str(args.engine)], input=json.dumps({"types": entries}), capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"polling-bench failed: {done.stderr.strip()}")
    out = json.loads(done.stdout)
    cost = subprocess.run([str(args.engine), "cost"], capture_output=True, text=True, check=True)
    cost = json.loads(cost.stdout)

    def seconds(rows: list) -> list[tuple[int, float]]:
        return [(r[0], r[1] / 1000) for r in rows]

    def after_shift(name: str) -> list[tuple[int, float]]:
        return seconds(out[name][args.shift[0] :])

    def stats(rows: list) -> dict:
        return summarise(seconds(rows))

    failures: list[str] = []
    checks = 0

    def check(ok: bool, what: str) -> None:
        nonlocal checks
        checks += 1
        if not ok:
            failures.append(what)

    cell = lambda r: f"{r['polls']:.2f}, {r['delay']:.2f} s ({r['p95']:.2f})"  # noqa: E731
    print(f"{args.solves} measured solves per type and mix (the adaptive engine first learns from {args.warmup}), "
          f"seed {args.seed}, mixes {args.mixes.name}. Cells: polls per solve, answer-to-client delay mean (p95).\n")  # fmt: skip
    steady = {}
    for m, mix in mixes.items():
        print(f"### {m}: {mix.get('description', '')}\n")
        print("| type | solve time (s) | fixed table | adaptive | official SDK 1.0.1 | 2captcha-python 2.1.2 "
              "| adaptive vs fixed: polls, delay | adaptive vs SDK, vs 2captcha |")  # fmt: skip
        print("|---|---|---|---|---|---|---|---|")
        for t, dist in mix["types"].items():
            _, _, _, sdk_row, sdk_params, tc_method, tc_params = rows_of[t]
            measured = samples[m][t][args.warmup :]
            fixed = stats(out[f"{m}/{t}/fixed"])
            adaptive = stats(out[f"{m}/{t}/adaptive"][args.warmup :])
            steady[(m, t)] = adaptive
            sdk = summarise([run_sdk(sdk_row, sdk_params, s) for s in measured])
            tc = summarise([run_2captcha(tc_method, tc_params, s) for s in measured])
            dp, dd = rel(adaptive["polls"], fixed["polls"]), rel(adaptive["delay"], fixed["delay"])
            vs = (verdict(adaptive, sdk, TIE), verdict(adaptive, tc, TIE))
            print(f"| {t} | {describe(dist)} | {cell(fixed)} | {cell(adaptive)} | {cell(sdk)} | {cell(tc)} "
                  f"| {dp:+.0%}, {dd:+.0%} | {vs[0]}, {vs[1]} |")  # fmt: skip
            check(vs == ("better", "better"), f"{m}/{t}: adaptive vs SDK {vs[0]}, vs 2captcha {vs[1]}")
            if m == "modelled":
                check(dp <= GOAL_NEAR and dd <= GOAL_NEAR, f"{m}/{t}: {dp:+.1%} polls, {dd:+.1%} delay vs the table")
            else:
                # Could any single first wait (with the table's 5 s polls) meet this goal?
                def meets(r: dict) -> bool:
                    p, d = rel(r["polls"], fixed["polls"]), rel(r["delay"], fixed["delay"])
                    return p <= TIE and d <= TIE and (p <= -GOAL_CUT or d <= -GOAL_CUT)

                feasible = [w for w in sweep(t) if meets(stats(out[f"{m}/{t}@{w}"]))]
                note = f"first waits that would: {ranges(feasible)}" if feasible else "no single first wait would"
                check(meets(adaptive), f"{m}/{t}: {dp:+.1%} polls, {dd:+.1%} delay vs the table ({note})")
        print()

    print(f"### Mix shifts: solves of the type until settled (from there on every window of 50 solves within 10% "
          f"of the worst of {REFERENCES} models warmed on the new mix, on the same solves; {args.shift[0]} solves "
          f"before the shift, {args.shift[1]} after)\n")  # fmt: skip
    types = list(dict.fromkeys(t for mix in mixes.values() for t in mix["types"]))
    print("| type | " + " | ".join(f"{a}→{b}" for a, b in shifts) + " |")
    print("|---|" + "---|" * len(shifts))
    settled_n = total_n = 0
    for t in types:
        cells = []
        for a, b in shifts:
            key = f"{a}>{b}/{t}"
            if key not in out:
                cells.append("")
                continue
            n = settle(after_shift(key), [after_shift(f"{b}>{b}/{a}/{t}/{k}") for k in range(REFERENCES)])
            total_n += 1
            ok = n is not None and n <= SETTLE_WITHIN
            settled_n += ok
            check(ok, f"shift {a}→{b}/{t}: {'not settled' if n is None else f'settled after {n}'}")
            cells.append("never" if n is None else str(n))
        print(f"| {t} | " + " | ".join(cells) + " |")
    print(f"\n{settled_n} of {total_n} shifts settled within {SETTLE_WITHIN} solves.\n")
    control_ok, control_n, control_bad = 0, 0, []
    for m, mix in mixes.items():
        for t in mix["types"]:
            runs = [after_shift(f"control/{m}/{t}/{k}") for k in range(REFERENCES + 1)]
            for k, ours in enumerate(runs):
                n = settle(ours, runs[:k] + runs[k + 1 :])
                control_n += 1
                ok = n is not None and n <= SETTLE_WITHIN
                control_ok += ok
                if not ok:
                    control_bad.append(f"{m}/{t}")
    print(f"Control (not a goal check): with no shift, each of {REFERENCES + 1} models warmed on a mix (other draws "
          f"each) held against the other {REFERENCES} passes the same test {control_ok} of {control_n} times"
          f"{'; it fails on ' + ', '.join(sorted(set(control_bad))) if control_bad else ''}: "
          f"failures here are the rule's own spread between warm-ups, not settling.\n")  # fmt: skip

    biggest = max(cost["model_bytes"].values())
    print("### Engine cost (native release build, wall-clock means; the component's budget is 8 µs per canned solve)\n")
    print(f"- canned solve (submit, 3 not-ready polls, answer): {cost['solve_ns'] / 1000:.2f} µs without a model, "
          f"{cost['solve_with_model_ns'] / 1000:.2f} µs created with a warmed model")  # fmt: skip
    print(f"- observe: {cost['observe_ns'] / 1000:.3f} µs; parsing a model's text: {cost['parse_ns'] / 1000:.2f} µs")
    print(f"- model text per type after 1,000 observations: at most {biggest} B "
          f"({', '.join(f'{k} {v}' for k, v in cost['model_bytes'].items())})\n")  # fmt: skip
    check(cost["solve_with_model_ns"] <= 8_000, f"a canned solve with a model takes {cost['solve_with_model_ns']:.0f} ns")
    check(biggest <= 1024, f"a model's text is {biggest} B")

    print(f"### Goal checks: {checks - len(failures)} of {checks} pass, {len(failures)} fail\n")
    for f in failures:
        print(f"- FAIL {f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
