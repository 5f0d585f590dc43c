#!/usr/bin/env python3
"""Polling-schedule benchmark: polls per solve, the delay between the answer being ready and
the client seeing it, and their cost to a user who prices a poll at `c` seconds of waiting
(mean delay + c x mean polls), per captcha type and solve-time mix, for

- this engine's fixed tables (the native engine, driven with a virtual clock by `polling-bench`),
- the same engine adapting: one `SolveTimes` model per type that observes every finished solve,
  created with the config's `poll_cost_ms` = c, measured after a warm-up of N solves, and after
  mix shifts (solves until it settles),
- the official CaptchaAI SDK (`captchaai` 1.0.1, its own sans-IO generators driven with a
  virtual clock: its per-type first waits and 5 s polls, with its 0-1 s jitter on every wait),
- 2captcha-python 2.1.2 (its real `TwoCaptcha.solve` loop, with `time` and the API client
  replaced by a virtual clock and a fake service: first poll at once, then every 10 s),
- the oracle: the best schedule of adaptive polling's family for the same solves, chosen in
  hindsight (`polling-bench`: every first wait and longer wait tried).

All see the same solve times (seeded draws per type and mix), a service that answers at once
(zero network latency) and never fails. The mixes: the shipped file (`--mixes`, default
mixes.json beside this file: `modelled`, the emulator's defaults; `fast`, `slow`, `bimodal`)
and `--generated N` mixes nobody picked, drawn from `--gen-seed`: per type a uniform,
triangular, lognormal or two-mode distribution with parameters drawn log-uniformly across
0.3-150 s (at most the type's deadline less one poll interval and a second), or a narrow one
(uniform or lognormal within 0.5-5% of such a point). None is measured
on the live service. It ends with issue 35's goal checks and the engine-cost numbers
(`polling-bench cost`), and exits 1 when a goal check fails; with `--gate FILE`, instead when a
check fails the bound FILE's `guards` give it (scripts/test.sh's short run: short-run-guards.json).

Usage: benches/polling/run.sh [--mixes FILE] [--generated N] [--gen-seed S] [--seed S]
       [--solves N] [--warmup N] [--shift BEFORE AFTER] [--costs C,C,..] [--shifts-per-mix K]
       [--gate FILE]
(prints Markdown tables, the goal checks and the engine-cost numbers)
"""

from __future__ import annotations

import argparse
import base64
import itertools
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


def cost(r: dict, c: float) -> float:
    """What a user who prices a poll at `c` seconds of waiting pays per solve."""
    return r["delay"] + c * r["polls"]


TIE = 0.005  # relative differences within 0.5% count as equal
WIDER_TIES = (0.01, 0.02)  # the share's diagnostic: were these counted as equal
GOAL_SHARE = 0.95  # adaptive no costlier than the table, the SDK and 2captcha-python on this share of pairs
GOAL_ORACLE = 0.10  # adaptive within 10% of the oracle's cost on the median pair
GOAL_NEAR = 0.02  # default c, modelled mix: no worse than the table by more than 2% on either measure
GOAL_EXPLORE = 0.02  # exploration: at most 2% more polls than the chosen schedules on a stationary mix
SETTLE_WITHIN = 100  # solves of the type after a mix shift
SWEEP = [0, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 4, 6, 8, 12, 20]  # prices of a poll (s) the modelled mix's oracle is swept over
BASELINES = ("fixed", "sdk", "2captcha")  # what adaptive polling's cost is held to: the table and the two SDKs
KNOWN_DRAWS = 20_000  # other draws of the mix the best schedule with the distribution known is chosen on
# The best schedule from a memory's worth of exact solve times: chosen on WINDOW other draws,
# WINDOWS times, its cost the mean of theirs. WINDOW is what the rule's memory weighs: weights
# that lose 1/80 (rounded down) per observation until under an eighth weigh as much as 144 equal
# ones (Kish's effective sample size, (sum w)^2 / sum w^2, over the engine's integer decay).
# The same from twice as many: what a memory twice as long could reach at best.
WINDOW, WINDOWS = 144, 5
WINDOW_SIZES = (WINDOW, 2 * WINDOW)
REFERENCES = 5  # models warmed on the new mix (other draws each) a shifted model is held against
INTERVAL_S = 5  # every type polls every 5 s
DEADLINE_S = {"image": 60, "grid": 60, "bls": 60, "cloudflare_challenge": 300}  # others: 120 s


def ms(seconds: list[float]) -> list[int]:
    return [round(s * 1000) for s in seconds]


def rel(a: float, b: float) -> float:
    return (a - b) / b if b else (0.0 if a == b else math.inf)


def loguniform(rng: random.Random, lo: float, hi: float) -> float:
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def generated_dist(rng: random.Random, top: float) -> dict:
    """One type's solve times nobody picked: a uniform, triangular, lognormal or two-mode
    distribution, its parameters drawn log-uniformly across 0.3 s to `top`; or a narrow one (a
    service that answers within a second or so every time): uniform or lognormal around a point
    drawn the same way, its half-width or sigma drawn log-uniformly from 0.5% to 5% of it."""
    kind = rng.choice(["uniform", "triangular", "lognormal", "mixture", "narrow"])
    point = lambda: round(loguniform(rng, 0.3, top), 1)  # noqa: E731

    def simple() -> dict:
        if rng.random() < 0.5:
            return {"uniform": sorted([point(), point()])}
        lo, mode, hi = sorted([point(), point(), point()])
        return {"triangular": [lo, mode, hi]}

    if kind == "uniform":
        return {"uniform": sorted([point(), point()])}
    if kind == "triangular":
        lo, mode, hi = sorted([point(), point(), point()])
        return {"triangular": [lo, mode, hi]}
    if kind == "lognormal":
        return {"lognormal": {"median": point(), "sigma": round(rng.uniform(0.1, 1.0), 2), "min": 0.3, "max": top}}
    if kind == "narrow":
        center, spread = point(), loguniform(rng, 0.005, 0.05)
        if rng.random() < 0.5:
            return {"uniform": [round(center * (1 - spread), 2), round(min(center * (1 + spread), top), 2)]}
        return {"lognormal": {"median": center, "sigma": round(spread, 3), "min": 0.3, "max": top}}
    modes = sorted([simple(), simple()], key=lambda d: statistics.fmean(next(iter(d.values()))))
    weight = round(rng.uniform(0.5, 0.9), 2)
    return {"mixture": [[weight, modes[0]], [round(1 - weight, 2), modes[1]]]}


def generate(seed: int, count: int, types: list[str]) -> dict:
    """`count` mixes of every type, from `seed`."""
    rng = random.Random(seed)
    mixes = {}
    for i in range(count):
        top = lambda t: min(150.0, DEADLINE_S.get(t, 120) - INTERVAL_S - 1)  # noqa: E731
        mixes[f"gen{i:02d}"] = {"description": f"generated (seed {seed}, #{i})",
                                "types": {t: generated_dist(rng, top(t)) for t in types}}  # fmt: skip
    return mixes


def late_share(dist: dict) -> float:
    """The share of the later mode of a two-mode distribution (0 for one mode)."""
    (kind, p), = dist.items()
    return p[-1][0] / sum(w for w, _ in p) if kind == "mixture" else 0.0


def settle(rows: list[tuple[int, float]], references: list[list[tuple[int, float]]], phase: float = 0.0,
           on_cost: float | None = None, window: int = 50, step: int = 10) -> int | None:
    """Solves after a shift until the engine has settled: from there on, every `window` of solves
    has mean polls and mean delay no worse by more than 10% (plus 0.05 polls, 0.25 s) than the
    worst of `references`, models already warmed on the new mix (each on other warm-up draws),
    get on the very same solves: it does no worse than a model warmed there might. On a two-mode
    mix, `phase` is the later mode's share: one poll interval of phase is allowed for those
    solves (`phase` more polls, `phase` x 5 s more delay). With `on_cost` (a price of a poll, s),
    the cost at that price instead of each measure (10% plus 0.25 s, and the phase's polls and
    delay at that price). None if never."""  # fmt: skip
    def mean(part: list, i: int) -> float:
        return statistics.fmean(r[i] for r in part)

    def price(part: list) -> float:
        return cost({"polls": mean(part, 0), "delay": mean(part, 1)}, on_cost)

    def ok(j: int) -> bool:
        ours = rows[j : j + window]
        if on_cost is not None:
            worst = max(price(ref[j : j + window]) for ref in references)
            return price(ours) <= worst * 1.10 + 0.25 + phase * (on_cost + INTERVAL_S)
        polls = max(mean(ref[j : j + window], 0) for ref in references)
        delay = max(mean(ref[j : j + window], 1) for ref in references)
        return (mean(ours, 0) <= polls * 1.10 + 0.05 + phase) and (mean(ours, 1) <= delay * 1.10 + 0.25 + phase * INTERVAL_S)

    settled = None
    for j in reversed(range(0, len(rows) - window + 1, step)):
        if not ok(j):
            break
        settled = j
    return settled


def in_time(settled: int | None) -> bool:
    """Whether `settle`'s answer meets the goal: settled within `SETTLE_WITHIN` solves."""
    return settled is not None and settled <= SETTLE_WITHIN


def held_out(runs: list[list[tuple[int, float]]], phase: float, on_cost: float | None = None) -> list[bool]:
    """Each of `runs` (models warmed alike, on the same solves) held against the others by
    `settle`: whether it settles in time. What a rule whose models after a shift could not be
    told from warmed ones would score on the settle test."""
    return [in_time(settle(run, runs[:k] + runs[k + 1 :], phase, on_cost)) for k, run in enumerate(runs)]


def run_schedule(wait: int, after: int, until: int, solve_s: list[float]) -> dict:
    """A schedule of adaptive polling's family as `polling-bench`'s oracle gives it (first poll
    `wait` s after the submit, then one every interval; with `after` > 0, the poll after regular
    poll `after` at `until` s, then one every interval) on these solve times: polls, delay. A poll
    at t s finds an answer ready at t s or before, in whole ms, as the oracle counts."""
    last_regular_ms = (wait + (after - 1) * INTERVAL_S) * 1000 if after else math.inf
    rows = []
    for s in solve_s:
        ready_ms = round(s * 1000)
        start, polls_before = (wait, 0) if ready_ms <= last_regular_ms else (until, after)
        waits = max(0, math.ceil((ready_ms - start * 1000) / (INTERVAL_S * 1000)))
        rows.append((polls_before + waits + 1, start + waits * INTERVAL_S - ready_ms / 1000))
    return summarise(rows)


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else math.nan


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--solves", type=int, default=2_000, help="measured solves per type and mix")
    ap.add_argument("--warmup", type=int, default=200, help="solves the adaptive engine learns from first")
    ap.add_argument("--shift", type=int, nargs=2, default=[300, 600], metavar=("BEFORE", "AFTER"),
                    help="solves before and after each mix shift")  # fmt: skip
    ap.add_argument("--seed", type=int, default=1, help="solve-time draws")
    ap.add_argument("--mixes", type=Path, default=HERE / "mixes.json", help="shipped solve-time mixes (JSON)")
    ap.add_argument("--generated", type=int, default=50, help="mixes drawn from --gen-seed besides the shipped ones")
    ap.add_argument("--gen-seed", type=int, default=35, help="the generator's seed")
    ap.add_argument("--costs", default="0.25,1,4", help="prices of a poll tried, in seconds (the default is added)")
    ap.add_argument("--shifts-per-mix", type=int, default=1,
                    help="shifts from each generated mix (to the next ones, in order)")  # fmt: skip
    ap.add_argument("--engine", type=Path, required=True, help="the polling-bench binary")
    ap.add_argument("--gate", type=Path,
                    help="exit 1 only when a check fails the bound this JSON file's `guards` give it (instead of its goal)")  # fmt: skip
    args = ap.parse_args()

    shipped = {k: v for k, v in json.loads(args.mixes.read_text()).items() if not k.startswith("_")}
    rows_of = {row[0]: row for row in TYPES}
    for mix in shipped.values():
        unknown = set(mix["types"]) - set(rows_of)
        if unknown:
            raise SystemExit(f"{args.mixes}: unknown types {sorted(unknown)}")
    generated = generate(args.gen_seed, args.generated, list(rows_of))
    mixes = {**shipped, **generated}
    cost_probe = subprocess.run([str(args.engine), "cost"], capture_output=True, text=True, check=True)
    engine_cost = json.loads(cost_probe.stdout)
    default_c = engine_cost["default_poll_cost_ms"] / 1000
    costs = sorted({float(c) for c in args.costs.split(",")} | {default_c})
    rng = random.Random(args.seed)
    random.seed(args.seed)  # the SDK's jitter uses the global generator

    known_rng = random.Random(f"known {args.seed}")  # its own draws: the others stay as they were
    # One generator per window size (the first's seed as it always was: its draws stay the same).
    window_rngs = {size: random.Random(f"window {args.seed}" + ("" if size == WINDOW else f" {size}")) for size in WINDOW_SIZES}
    samples = {m: {t: draw(rng, d, args.warmup + args.solves) for t, d in mix["types"].items()} for m, mix in mixes.items()}
    entries = []
    for m, mix in mixes.items():
        for t in mix["types"]:
            task, measured = rows_of[t][2], ms(samples[m][t][args.warmup :])
            entries.append({"name": f"{m}/{t}/fixed", "task": task, "solve_ms": measured})
            # The modelled mix's oracle is also swept over SWEEP's prices, after `costs`.
            priced = costs + (SWEEP if m == "modelled" else [])
            entries.append({"name": f"{m}/{t}/oracle", "task": task, "solve_ms": measured, "oracle": [round(c * 1000) for c in priced]})  # fmt: skip
            # The best schedule with the distribution known: chosen in hindsight on other draws.
            other = ms(draw(known_rng, mix["types"][t], KNOWN_DRAWS))
            entries.append({"name": f"{m}/{t}/known", "task": task, "solve_ms": other, "oracle": [round(c * 1000) for c in costs]})  # fmt: skip
            for size, k in itertools.product(WINDOW_SIZES, range(WINDOWS)):
                few = ms(draw(window_rngs[size], mix["types"][t], size))
                entries.append({"name": f"{m}/{t}/window/{size}/{k}", "task": task, "solve_ms": few, "oracle": [round(c * 1000) for c in costs]})  # fmt: skip
            for c in costs:
                entries.append({"name": f"{m}/{t}/adaptive/{c:g}", "task": task, "solve_ms": ms(samples[m][t]),
                                "adaptive": True, "poll_cost_ms": round(c * 1000)})  # fmt: skip
    # Shifts at the default price: every ordered pair of shipped mixes, and from each generated
    # mix to the next `--shifts-per-mix` (cyclically).
    shifts = [(a, b) for a in shipped for b in shipped if a != b]
    names = list(generated)
    shifts += [(names[i], names[(i + k) % len(names)]) for i in range(len(names)) for k in range(1, args.shifts_per_mix + 1)
               if len(names) > k]  # fmt: skip
    default_ms = round(default_c * 1000)
    for a, b in shifts:
        for t in mixes[a]["types"]:
            if t in mixes[b]["types"]:
                before = draw(rng, mixes[a]["types"][t], args.shift[0])
                after = draw(rng, mixes[b]["types"][t], args.shift[1])
                task = rows_of[t][2]
                entries.append({"name": f"{a}>{b}/{t}", "task": task, "solve_ms": ms(before + after), "adaptive": True,
                                "poll_cost_ms": default_ms})  # fmt: skip
                # The references: models warmed on the new mix, on the same solves after the shift.
                for k in range(REFERENCES):
                    warm = draw(rng, mixes[b]["types"][t], args.shift[0])
                    entries.append({"name": f"{b}>{b}/{a}/{t}/{k}", "task": task, "solve_ms": ms(warm + after),
                                    "adaptive": True, "poll_cost_ms": default_ms})  # fmt: skip
    # Controls (shipped mixes): no shift; one more model warmed on the same mix (other draws)
    # held against `REFERENCES` warmed ones, on the same solves: how often the settle test fails
    # with nothing to settle (the rule's own spread between warm-ups).
    for m, mix in shipped.items():
        for t, dist in mix["types"].items():
            after = draw(rng, dist, args.shift[1])
            for k in range(REFERENCES + 1):
                warm = draw(rng, dist, args.shift[0])
                entries.append({"name": f"control/{m}/{t}/{k}", "task": rows_of[t][2], "solve_ms": ms(warm + after),
                                "adaptive": True, "poll_cost_ms": default_ms})  # fmt: skip
    done = subprocess.run([str(args.engine)], input=json.dumps({"types": entries}), capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"polling-bench failed: {done.stderr.strip()}")
    out = json.loads(done.stdout)

    def seconds(rows: list) -> list[tuple[int, float]]:
        return [(r[0], r[1] / 1000) for r in rows]

    def after_shift(name: str) -> list[tuple[int, float]]:
        return seconds(out[name][args.shift[0] :])

    def stats(rows: list) -> dict:
        return summarise(seconds(rows))

    # Goal checks: (key, measured value, the goal's bound, whether the value must be at least the
    # bound (else at most), what it says). `--gate FILE` holds each key to the file's bound instead.
    checks: list[tuple[str, float, float, bool, str]] = []

    def check(key: str, value: float, goal: float, what: str, at_least: bool = False) -> None:
        checks.append((key, value, goal, at_least, what))

    # Per (mix, type): every schedule's polls, delay and cost at each price.
    results = {}
    explore = {}  # (mix, type) -> extra polls of exploring solves over the chosen schedules', at the default price
    for m, mix in mixes.items():
        for t in mix["types"]:
            _, _, _, sdk_row, sdk_params, tc_method, tc_params = rows_of[t]
            measured = samples[m][t][args.warmup :]
            r = {
                "fixed": stats(out[f"{m}/{t}/fixed"]),
                "sdk": summarise([run_sdk(sdk_row, sdk_params, s) for s in measured]),
                "2captcha": summarise([run_2captcha(tc_method, tc_params, s) for s in measured]),
            }
            for c in costs:
                rows = out[f"{m}/{t}/adaptive/{c:g}"][args.warmup :]
                r[("adaptive", c)] = stats(rows)
                r[("chosen", c)] = summarise([(row[3], row[5] / 1000) for row in rows])
                # How often the chosen first wait differs from the previous solve's.
                r[("changes", c)] = sum(a[4] != b[4] for a, b in zip(rows, rows[1:])) / max(len(rows) - 1, 1)
                if c == default_c:
                    explore[(m, t)] = r[("adaptive", c)]["polls"] / r[("chosen", c)]["polls"] - 1
            for c, (_, wait, after, until, polls, delay) in zip(costs, out[f"{m}/{t}/oracle"]):
                r[("oracle", c)] = {"polls": polls, "delay": delay / 1000, "p95": math.nan,
                                    "schedule": f"{wait}" + (f"+{until}@{after}" if after else "")}  # fmt: skip
            for c, (_, wait, after, until, _, _) in zip(costs, out[f"{m}/{t}/known"]):
                r[("known", c)] = run_schedule(wait, after, until, measured)
            for (i, c), size in itertools.product(enumerate(costs), WINDOW_SIZES):
                each = [run_schedule(*out[f"{m}/{t}/window/{size}/{k}"][i][1:4], measured) for k in range(WINDOWS)]
                r[("window", size, c)] = {key: statistics.fmean(w[key] for w in each) for key in ("polls", "delay")}
            results[(m, t)] = r

    print(f"{args.solves} measured solves per type and mix (the adaptive engine first learns from {args.warmup}), "
          f"seed {args.seed}; mixes: {args.mixes.name} ({len(shipped)}) and {len(generated)} generated from seed "
          f"{args.gen_seed}. Cost: mean delay + c x mean polls, in seconds; c = the price of a poll "
          f"(the engine's default: {default_c:g} s).\n")  # fmt: skip

    print("### Every mix and type, per price of a poll\n")
    print("| c (s) | pairs | adaptive ≤ fixed table | ≤ official SDK | ≤ 2captcha-python | ≤ all three (of feasible pairs) | "
          "adaptive / oracle: median | p90 | worst |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    pairs = list(results)
    room, known, margins, chosen, changes, wider = [], [], [], [], [], []
    window = {size: [] for size in WINDOW_SIZES}
    for c in costs:
        def no_costlier(pair, other, who=("adaptive", c), tie=TIE) -> bool:
            ours, theirs = cost(results[pair][who], c), cost(results[pair][other], c)
            return ours <= theirs * (1 + tie)

        wins = {o: [p for p in pairs if no_costlier(p, o)] for o in BASELINES}
        # A baseline that polls sooner than the floors allow (a first poll under 1 s after the
        # submit, polls under 5 s apart) can cost less than every schedule of the family, even the
        # one chosen in hindsight on the very solves: no rule within the floors can match it, so
        # that pair is not a goal (the owner's answer 1). The share counts the other pairs.
        feasible = [p for p in pairs if all(no_costlier(p, o, ("oracle", c)) for o in BASELINES)]

        def ahead(who: tuple = ("adaptive", c), tie: float = TIE) -> list:
            """The feasible pairs where `who` is no costlier than all three baselines (within `tie`)."""
            return [p for p in feasible if all(no_costlier(p, o, who, tie) for o in BASELINES)]

        def standing(who: tuple) -> tuple[list, float]:
            """[`ahead`] of `who`, and its cost over the oracle's on the median pair."""
            return ahead(who), statistics.median(cost(results[p][who], c) / cost(results[p][("oracle", c)], c) - 1 for p in pairs)

        all_three = ahead()
        ratios = {p: cost(results[p][("adaptive", c)], c) / cost(results[p][("oracle", c)], c) - 1 for p in pairs}
        worst = max(ratios, key=ratios.get)
        median = statistics.median(ratios.values())
        share = len(all_three) / max(len(feasible), 1)
        print(f"| {c:g} | {len(pairs)} ({len(feasible)} feasible) | {len(wins['fixed'])} | {len(wins['sdk'])} | {len(wins['2captcha'])} | "
              f"{len(all_three)} ({share:.1%}) | {median:+.1%} | {quantile(list(ratios.values()), 0.9):+.1%} | "
              f"{ratios[worst]:+.0%} ({worst[0]}/{worst[1]}) |")  # fmt: skip
        lost = [p for p in feasible if p not in all_three]
        losers = [f"{m}/{t}" for m, t in lost]
        # How much room a pair leaves: the best of the three baselines within 1% of the best
        # schedule in hindsight (on the very solves) leaves adaptive polling under 1.5% for its
        # estimate's error and its exploration together.
        best_baseline = {p: min(cost(results[p][o], c) for o in BASELINES) for p in feasible}
        tight = [p for p in feasible if best_baseline[p] <= cost(results[p][("oracle", c)], c) * 1.01]
        beaten, over = standing(("known", c))
        known.append(f"c = {c:g} s: {len(beaten)} ({len(beaten) / max(len(feasible), 1):.1%} of feasible pairs; oracle {over:+.1%} on the median pair)")
        for size in WINDOW_SIZES:
            few, over = standing(("window", size, c))
            window[size].append(f"c = {c:g} s: {len(few) / max(len(feasible), 1):.1%}, {over:+.1%} over the oracle")
        # The share were wider differences counted as equal: how much of the gap is pairs lost by
        # less than the estimate's noise.
        wider.append(f"c = {c:g} s: " + ", ".join(f"{len(ahead(tie=tie)) / max(len(feasible), 1):.1%} within {tie:.0%}" for tie in WIDER_TIES))
        room.append(f"c = {c:g} s: {len(tight)} ({len(tight) / max(len(feasible), 1):.1%} of feasible pairs; adaptive loses {sum(p not in all_three for p in tight)})")
        # The share without exploration's own cost: each measured solve priced at the chosen
        # schedule (the model learning as it did, from the solves that explored too).
        won, over = standing(("chosen", c))
        chosen.append(f"c = {c:g} s: {len(won) / max(len(feasible), 1):.1%}, {over:+.1%} over the oracle")
        # What the pairs adaptive loses are lost by, against what they offer: its cost over the best
        # baseline's, and the best schedule in hindsight's gain under it.
        if lost:
            by = statistics.median(cost(results[p][("adaptive", c)], c) / best_baseline[p] - 1 for p in lost)
            gain = statistics.median(1 - cost(results[p][("oracle", c)], c) / best_baseline[p] for p in lost)
            margins.append(f"c = {c:g} s: {len(lost)}, by {by:+.1%} over the best baseline, where the best schedule in hindsight gains {gain:.1%}")
        flips = lambda ps: statistics.median(results[p][("changes", c)] for p in ps) if ps else math.nan  # noqa: E731
        changes.append(f"c = {c:g} s: {flips(lost):.1%} of the solves of the pairs it loses, {flips(all_three):.1%} of those it wins")
        check(f"share@{c:g}", share, GOAL_SHARE, f"c = {c:g} s: adaptive is no costlier than the table, the SDK and 2captcha-python "
              f"on {share:.1%} of the {len(feasible)} feasible pairs (goal {GOAL_SHARE:.0%}); not on {', '.join(losers[:12])}{' ...' if len(losers) > 12 else ''}",
              at_least=True)  # fmt: skip
        check(f"oracle@{c:g}", median, GOAL_ORACLE, f"c = {c:g} s: adaptive costs {median:+.1%} over the oracle on the median pair (goal ≤ {GOAL_ORACLE:+.0%})")
    print(f"\nWith the distribution known (not a goal check): the best schedule of the family for {KNOWN_DRAWS:,} other draws of "
          f"the pair's distribution, no exploration, is no costlier than all three baselines on {'; '.join(known)}. "
          f"What a rule that estimates the distribution exactly would reach.")  # fmt: skip
    print(f"\nFrom {WINDOW} exact solve times (not a goal check): the best schedule of the family for {WINDOW} other draws, "
          f"as many as the rule's memory weighs, but seen exactly (no censoring, no exploration), the mean of {WINDOWS} such "
          f"draws; the share of feasible pairs no costlier than all three baselines, and the median pair: {'; '.join(window[WINDOW])}. "
          f"The same from {WINDOW_SIZES[1]} (what a memory twice as long could reach at best): "
          f"{'; '.join(window[WINDOW_SIZES[1]])}.")  # fmt: skip
    print(f"\nPairs where a baseline is within 1% of the best schedule in hindsight (not a goal check): {'; '.join(room)}.")
    print(f"\nWider ties (not a goal check): the share of feasible pairs where adaptive costs at most "
          f"{' or '.join(f'{tie:.0%}' for tie in WIDER_TIES)} more than each baseline (the goal's tie is {TIE:.1%}): {'; '.join(wider)}.")  # fmt: skip
    print(f"\nPairs adaptive loses (not a goal check; medians): {'; '.join(margins) or 'none'}.")
    print(f"\nChoice changes (not a goal check; medians): the chosen first wait differs from the previous solve's on {'; '.join(changes)}.")
    print(f"\nWithout exploration's own cost (not a goal check): each measured solve priced at the schedule the model chose, "
          f"the model learning as it did; the share of feasible pairs no costlier than all three baselines, and the median pair: "
          f"{'; '.join(chosen)}.")  # fmt: skip
    extra = list(explore.values())
    print(f"\nExploration at c = {default_c:g} s: exploring solves add {statistics.fmean(extra):+.2%} polls over the chosen "
          f"schedules' on the mean pair ({quantile(extra, 0.5):+.2%} median, {quantile(extra, 0.95):+.2%} p95, "
          f"{max(extra):+.2%} most).\n")  # fmt: skip
    check("explore", statistics.fmean(extra), GOAL_EXPLORE, f"exploration adds {statistics.fmean(extra):+.2%} polls on the mean pair (goal ≤ {GOAL_EXPLORE:+.0%})")

    cell = lambda r: f"{r['polls']:.2f}, {r['delay']:.2f} s"  # noqa: E731
    for m in shipped:
        mix = mixes[m]
        print(f"### {m}: {mix.get('description', '')}\n")
        print(f"Cells: polls per solve, mean delay; cost at c = {', '.join(f'{c:g}' for c in costs)} s.\n")
        print("| type | solve time (s) | fixed table | official SDK 1.0.1 | 2captcha-python 2.1.2 | "
              f"adaptive (c = {default_c:g} s) | oracle (c = {default_c:g} s; first wait+longer wait@after poll) | "
              "cost: fixed / SDK / 2captcha / adaptive / oracle |")  # fmt: skip
        print("|---|---|---|---|---|---|---|---|")
        for t, dist in mix["types"].items():
            r = results[(m, t)]
            by_c = " · ".join("/".join(f"{cost(r[k], c):.2f}" for k in (*BASELINES, ("adaptive", c), ("oracle", c)))
                              for c in costs)  # fmt: skip
            o = r[("oracle", default_c)]
            print(f"| {t} | {describe(dist)} | {cell(r['fixed'])} | {cell(r['sdk'])} | {cell(r['2captcha'])} | "
                  f"{cell(r[('adaptive', default_c)])} | {cell(o)} ({o['schedule']}) | {by_c} |")  # fmt: skip
            if m == "modelled":
                a, f = r[("adaptive", default_c)], r["fixed"]
                dp, dd = rel(a["polls"], f["polls"]), rel(a["delay"], f["delay"])
                check(f"{m}/{t}", max(dp, dd), GOAL_NEAR, f"{m}/{t} at the default c: {dp:+.1%} polls, {dd:+.1%} delay "
                      f"vs the table (oracle: {rel(o['polls'], f['polls']):+.1%}, {rel(o['delay'], f['delay']):+.1%})")  # fmt: skip
        print()
        if m == "modelled":
            # Whether any price makes the best schedule in hindsight itself near the table on both
            # measures (what the modelled-mix goal asks of adaptive polling at the default price).
            near = {c: [] for c in SWEEP}
            for t in mix["types"]:
                f = results[(m, t)]["fixed"]
                for c, (_, _, _, _, polls, delay) in zip(SWEEP, out[f"{m}/{t}/oracle"][len(costs) :]):
                    if max(rel(polls, f["polls"]), rel(delay / 1000, f["delay"])) <= GOAL_NEAR:
                        near[c].append(t)
            print(f"The best schedule in hindsight within {GOAL_NEAR:.0%} of the table on polls and on delay, per price of a "
                  f"poll (s): {', '.join(f'{c:g}: {len(v)}' for c, v in near.items())} of {len(mix['types'])} types.\n")  # fmt: skip

    print(f"### Mix shifts at c = {default_c:g} s: solves of the type until settled\n")
    print(f"From there on every window of 50 solves within 10% of the worst of {REFERENCES} models warmed on the new mix, "
          f"on the same solves; on a two-mode mix one poll interval of phase allowed for its later mode. "
          f"{args.shift[0]} solves before the shift, {args.shift[1]} after.\n")  # fmt: skip
    settled_n = total_n = 0
    unsettled = []
    shipped_shifts = [(a, b) for a, b in shifts if a in shipped]
    types = list(dict.fromkeys(t for mix in shipped.values() for t in mix["types"]))
    print("| type | " + " | ".join(f"{a}→{b}" for a, b in shipped_shifts) + " |")
    print("|---|" + "---|" * len(shipped_shifts))
    table = {t: [] for t in types}
    excess = {"early": [], "late": []}
    ceiling = []  # each reference held against the other references of its shift
    by_cost = {"shifts": [], "ceiling": [], "control": []}  # the same test on cost at the default price
    for a, b in shifts:
        for t in mixes[a]["types"]:
            key = f"{a}>{b}/{t}"
            if key not in out:
                continue
            ours, refs = after_shift(key), [after_shift(f"{b}>{b}/{a}/{t}/{k}") for k in range(REFERENCES)]
            phase = late_share(mixes[b]["types"][t])
            n = settle(ours, refs, phase)
            ceiling += held_out(refs, phase)
            by_cost["shifts"].append(in_time(settle(ours, refs, phase, default_c)))
            by_cost["ceiling"] += held_out(refs, phase, default_c)
            # What the shift costs users (not a goal check): the shifted model's cost at the
            # default c over the references' mean cost on the same solves, in the first
            # SETTLE_WITHIN solves after the shift and in the rest.
            for part, span in (("early", slice(0, SETTLE_WITHIN)), ("late", slice(SETTLE_WITHIN, None))):
                theirs = statistics.fmean(cost(summarise(ref[span]), default_c) for ref in refs)
                excess[part].append(cost(summarise(ours[span]), default_c) / theirs - 1)
            total_n += 1
            ok = in_time(n)
            settled_n += ok
            if not ok:
                unsettled.append(f"{a}→{b}/{t} ({'never' if n is None else n})")
            if a in shipped and t in table:
                table[t].append("never" if n is None else str(n))
    for t in types:
        print(f"| {t} | " + " | ".join(table[t]) + " |")
    share = settled_n / total_n if total_n else 1.0
    print(f"\n{settled_n} of {total_n} shifts ({share:.1%}; {len(shipped_shifts)} between shipped mixes, "
          f"the rest between generated ones) settled within {SETTLE_WITHIN} solves"
          f"{'; not: ' + ', '.join(unsettled[:20]) + (' ...' if len(unsettled) > 20 else '') if unsettled else ''}.\n")  # fmt: skip
    check("shifts", share, GOAL_SHARE, f"{share:.1%} of shifts settle within {SETTLE_WITHIN} solves (goal {GOAL_SHARE:.0%})",
          at_least=True)
    print(f"After a shift (not a goal check): the shifted model costs {statistics.fmean(excess['early']):+.1%} "
          f"(median {statistics.median(excess['early']):+.1%}) over the mean of the references in the first "
          f"{SETTLE_WITHIN} solves, {statistics.fmean(excess['late']):+.1%} (median "
          f"{statistics.median(excess['late']):+.1%}) in the rest.\n")  # fmt: skip
    print(f"The test's ceiling (not a goal check): on the same shifts, each of the {REFERENCES} references (a model "
          f"warmed on the new mix) held against the other {REFERENCES - 1} settles within {SETTLE_WITHIN} solves on "
          f"{sum(ceiling)} of {len(ceiling)} ({sum(ceiling) / len(ceiling):.1%}): about what a rule whose models after a "
          f"shift cannot be told from warmed ones would score (one reference fewer makes the test a little stricter).\n")  # fmt: skip
    control_ok, control_n, control_bad = 0, 0, []
    for m, mix in shipped.items():
        for t, dist in mix["types"].items():
            runs = [after_shift(f"control/{m}/{t}/{k}") for k in range(REFERENCES + 1)]
            for ok in held_out(runs, late_share(dist)):
                control_n += 1
                control_ok += ok
                if not ok:
                    control_bad.append(f"{m}/{t}")
            by_cost["control"] += held_out(runs, late_share(dist), default_c)
    print(f"Control (not a goal check): with no shift, each of {REFERENCES + 1} models warmed on a shipped mix (other "
          f"draws each) held against the other {REFERENCES} passes the same test {control_ok} of {control_n} times"
          f"{'; it fails on ' + ', '.join(sorted(set(control_bad))) if control_bad else ''}: "
          f"failures here are the rule's own spread between warm-ups, not settling.\n")  # fmt: skip
    rate = {k: f"{sum(v)} of {len(v)} ({sum(v) / max(len(v), 1):.1%})" for k, v in by_cost.items()}
    print(f"On cost instead (not a goal check): the same test on each window's cost at c = {default_c:g} s (within 10% "
          f"plus 0.25 s of the worst reference's) instead of on polls and delay each: shifts {rate['shifts']}, the "
          f"test's ceiling {rate['ceiling']}, control {rate['control']}. A model that trades a few more polls for "
          f"less delay (or the reverse) at no higher cost passes it.\n")  # fmt: skip

    biggest = max(engine_cost["model_bytes"].values())
    print("### Engine cost (native release build, wall-clock means; the component's budget is 8 µs per canned solve)\n")
    print(f"- canned solve (submit, 3 not-ready polls, answer): {engine_cost['solve_ns'] / 1000:.2f} µs without a model, "
          f"{engine_cost['solve_with_model_ns'] / 1000:.2f} µs created with a warmed model")  # fmt: skip
    print(f"- observe: {engine_cost['observe_ns'] / 1000:.3f} µs; parsing a model's text: {engine_cost['parse_ns'] / 1000:.2f} µs")
    print(f"- model text per type after 1,000 observations: at most {biggest} B "
          f"({', '.join(f'{k} {v}' for k, v in engine_cost['model_bytes'].items())})\n")  # fmt: skip
    check("solve_with_model_ns", engine_cost["solve_with_model_ns"], 8_000,
          f"a canned solve with a model takes {engine_cost['solve_with_model_ns']:.0f} ns (native; goal ≤ 8 µs)")
    check("observe_ns", engine_cost["observe_ns"], 5_000, f"observe takes {engine_cost['observe_ns']:.0f} ns (native; goal ≤ 5 µs)")
    check("model_bytes", biggest, 1024, f"a model's text is at most {biggest} B (goal ≤ 1 KiB)")

    def holds(value: float, bound: float, at_least: bool) -> bool:
        return value >= bound if at_least else value <= bound

    failed = [c for c in checks if not holds(c[1], c[2], c[3])]
    print(f"### Goal checks: {len(checks) - len(failed)} of {len(checks)} pass, {len(failed)} fail\n")
    for key, value, goal, at_least, what in checks:
        print(f"- {'PASS' if holds(value, goal, at_least) else 'FAIL'} `{key}`: {what}")
    if args.gate is None:
        return 1 if failed else 0
    return gate(args.gate, checks, holds)


def gate(path: Path, checks: list, holds) -> int:
    """Holds each check to the bound `path`'s `guards` give its key (`null`: not gated, for the
    reason the file states); exits 1 when one fails. The file names every key, no other."""
    guards = json.loads(path.read_text())["guards"]
    keys = [c[0] for c in checks]
    if sorted(guards) != sorted(keys):
        raise SystemExit(f"{path}: guards must name exactly the checks {keys}; "
                         f"missing {sorted(set(keys) - set(guards))}, unknown {sorted(set(guards) - set(keys))}")  # fmt: skip
    failed = []
    print(f"\n### Gate ({path.name}): each check held to the file's bound\n")
    for key, value, goal, at_least, _ in checks:
        bound = guards[key]
        if bound is None:
            print(f"- not gated `{key}`: {value:.4g}")
            continue
        ok = holds(value, bound, at_least)
        kind = "goal" if bound == goal else "regression guard"
        print(f"- {'PASS' if ok else 'FAIL'} `{key}`: {value:.4g} {'≥' if at_least else '≤'} {bound:g} ({kind})")
        if not ok:
            failed.append(key)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
