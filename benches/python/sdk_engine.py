#!/usr/bin/env python3
# pip install captchaai==1.0.1      (the official CaptchaAI Python SDK; brings httpx)
#
#   python3 benches/python/sdk_engine.py [--type recaptcha_v2|turnstile] [--repeat 7]
#
# CPU cost of the official SDK's own engine on one canned full solve, with no network and no
# sleeping: submit -> {"status":1,"request":"73846221"}, three {"status":0,"request":
# "CAPCHA_NOT_READY"}, then {"status":1,"request":"03AG..."} (the same replies as
# benches/solve.rs, the engine's native bench).
#
# The SDK (captchaai 1.0.1) has a real sans-IO engine: captchaai/core/orchestrator.py,
# `solve_captcha(config, entry, params)` is a generator that yields ApiCall(method, url, data) and
# Sleep(seconds) effects and takes back a transport.base.UniformResponse(status_code, body_dict).
# Its JSON parsing and form encoding live in the transport (httpx), not in the engine.
#
# Rows (each one full solve, microseconds of process CPU time, min over repeats):
#   engine, no parsing       the generator driven by a loop like the SDK's own
#                            CaptchaAI._drive_engine (isinstance dispatch, sleeps skipped), fed
#                            UniformResponse objects whose bodies are already-decoded dicts
#   engine + parse + encode  the same, plus per request what the transport does around the wire:
#                            urlencode the fields (query string for GET, form body for POST) and
#                            json.loads(reply bytes) into the UniformResponse
#   engine + httpx objects   the same, but with the transport's real objects: httpx.Request(method,
#                            url, params=/data=) built and read, httpx.Response(200,
#                            content=...).json(); i.e. SyncTransport.request_raw minus the socket
#   public client method     CaptchaAI(...).recaptcha_v2(sitekey, url) (or .turnstile) through the
#                            SDK's own _drive_engine and a canned transport doing the "parse +
#                            encode" work; time.sleep in captchaai.client is replaced by a no-op,
#                            and __init__'s threadsinfo key check is skipped (object.__new__)
# The engine's jitter (random.uniform on every Sleep) is part of its work and is kept.

import argparse
import json
import os
import platform
import sys
import time
import timeit
from urllib.parse import urlencode

import captchaai
import captchaai.client as sdk_client
from captchaai.core import orchestrator
from captchaai.core.config import Config
from captchaai.core.orchestrator import ApiCall, Sleep
from captchaai.core.registry import get_entry
from captchaai.transport.base import BaseTransport, UniformResponse

KEY = "0123456789abcdef0123456789abcdef"
SITEKEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
PAGEURL = "https://portal.example.com/export"
TOKEN = "03AGdBq24PBCbwiDRaS_MJ7Zxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
REPLIES = [
    b'{"status":1,"request":"73846221"}',
    b'{"status":0,"request":"CAPCHA_NOT_READY"}',
    b'{"status":0,"request":"CAPCHA_NOT_READY"}',
    b'{"status":0,"request":"CAPCHA_NOT_READY"}',
    ('{"status":1,"request":"%s"}' % TOKEN).encode(),
]
DECODED = [UniformResponse(200, json.loads(r)) for r in REPLIES]


def params_for(type_name: str) -> dict:
    # The dict the SDK's public methods build before calling the engine (client.py).
    if type_name.startswith("recaptcha_v2"):
        return {"googlekey": SITEKEY, "pageurl": PAGEURL}
    return {"sitekey": SITEKEY, "pageurl": PAGEURL}


def drive(engine, respond):
    """The SDK's _drive_engine loop, minus sleeping; `respond(effect, i)` answers ApiCall i."""
    i = 0
    try:
        effect = next(engine)
        while True:
            if isinstance(effect, ApiCall):
                response = respond(effect, i)
                i += 1
                effect = engine.send(response)
            elif isinstance(effect, Sleep):
                effect = engine.send(None)
            else:
                raise RuntimeError(f"unknown effect {effect!r}")
    except StopIteration as stop:
        return stop.value


def respond_decoded(effect, i):
    return DECODED[i]


def wire_request(effect):
    """What goes on the wire for an ApiCall: GET fields in the query string, POST fields as a form."""
    encoded = urlencode(effect.data)
    if effect.method.upper() == "GET":
        return effect.url + "?" + encoded, b""
    return effect.url, encoded.encode()


def respond_parsed(effect, i):
    wire_request(effect)
    return UniformResponse(200, json.loads(REPLIES[i]))


def respond_httpx(effect, i):
    import httpx

    if effect.method.upper() == "GET":
        request = httpx.Request(effect.method, effect.url, params=effect.data)
    else:
        request = httpx.Request(effect.method, effect.url, data=effect.data)
    request.read()
    response = httpx.Response(200, content=REPLIES[i], request=request)
    return UniformResponse(response.status_code, response.json())


class CannedTransport(BaseTransport):
    def __init__(self):
        self.i = 0

    def request_raw(self, method, url, data):
        response = respond_parsed(ApiCall(method, url, data), self.i)
        self.i += 1
        return response


def per_call_us(fn, repeat: int, budget_s: float = 0.3) -> float:
    t = timeit.Timer(fn, timer=time.process_time)
    number, elapsed = 1, t.timeit(1)
    while elapsed < budget_s / 10 and number < 10_000_000:
        number *= 10
        elapsed = t.timeit(number)
    number = max(1, int(number * (budget_s / max(elapsed, 1e-9))))
    return min(t.repeat(repeat=repeat, number=number)) / number * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--type", default="recaptcha_v2", choices=["recaptcha_v2", "turnstile"])
    ap.add_argument("--repeat", type=int, default=11)
    args = ap.parse_args()

    from importlib.metadata import version

    config = Config(api_key=KEY)
    entry = get_entry(args.type)
    new_engine = lambda: orchestrator.solve_captcha(config, entry, params_for(args.type))

    # Check each driver really completes the solve the way the SDK would.
    for respond in (respond_decoded, respond_parsed, respond_httpx):
        result = drive(new_engine(), respond)
        assert (result.task_id, result.solution) == ("73846221", TOKEN), result
    calls, sleeps = [], []
    engine = new_engine()
    effect = next(engine)
    try:
        while True:
            if isinstance(effect, ApiCall):
                calls.append(wire_request(effect))
                effect = engine.send(DECODED[len(calls) - 1])
            else:
                sleeps.append(effect.seconds)
                effect = engine.send(None)
    except StopIteration:
        pass

    client = object.__new__(sdk_client.CaptchaAI)
    client._config = config
    sdk_client.time.sleep = lambda s: None  # the only clock use in the sync driver

    def public_solve():
        client._transport = CannedTransport()
        method = client.recaptcha_v2 if args.type == "recaptcha_v2" else client.turnstile
        return method(SITEKEY, PAGEURL)

    assert public_solve().solution == TOKEN

    print(f"captchaai {version('captchaai')} (httpx {version('httpx')}), Python "
          f"{platform.python_version()}, {platform.machine()}, {os.cpu_count()} cpus, "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"type {args.type}: {len(calls)} requests ({entry.submit_http_method} submit, GET polls), "
          f"{len(sleeps)} sleeps asked for: " + ", ".join(f"{s:.1f}" for s in sleeps) + " s (with jitter)")
    print(f"first request: {calls[0][0]}")
    print(f"min of {args.repeat} repeats, microseconds of process CPU time per full solve\n")

    rows = [
        ("engine, no parsing (decoded dicts fed in)", lambda: drive(new_engine(), respond_decoded)),
        ("engine + urlencode requests + json.loads replies", lambda: drive(new_engine(), respond_parsed)),
        ("engine + httpx.Request / httpx.Response.json() (transport minus socket)",
         lambda: drive(new_engine(), respond_httpx)),
        (f"public client method CaptchaAI.{args.type}() with canned transport (parse + encode)", public_solve),
    ]
    print("| what | µs per full solve |")
    print("|---|---:|")
    for label, fn in rows:
        print(f"| {label} | {per_call_us(fn, args.repeat):.1f} |")

    # Pieces, for reference.
    loads = per_call_us(lambda: [json.loads(r) for r in REPLIES], args.repeat)
    enc = per_call_us(lambda: [urlencode(d) for _, d in [(0, {"key": KEY, "action": "get", "id": "73846221",
                                                             "json": 1})] * 5], args.repeat)
    print(f"\npieces: json.loads of the 5 replies {loads:.1f} µs; urlencode of 5 poll-sized field dicts {enc:.1f} µs")


if __name__ == "__main__":
    main()
