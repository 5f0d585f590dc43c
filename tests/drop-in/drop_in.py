#!/usr/bin/env python3
"""Drop-in: real CaptchaAI clients, unmodified but for base URL and key, through the edge's
/in.php and /res.php (docs/drop-in.md), against the emulator. Exits non-zero on any failure.

Parts (each prints `ok` / `FAIL` lines):
- types, under real Spin (TLS by `spin up --tls-cert`) and under captchaai-serve (TLS by nginx
  in front): every type the official SDK (captchaai 1.0.1) supports, and every CaptchaAI type
  2captcha-python 2.1.2 has a method for, solve; each answer is one the emulator gave.
- errors: unsolvable, wrong token, bad parameters, unknown id raise in the SDK exactly what
  they raise against the emulator itself (CaptchaAI's stand-in), and in 2captcha-python the
  `ApiException` carrying CaptchaAI's code.
- hostile: oversized bodies and fields, non-UTF-8, duplicated parameters, a `key` smuggled in
  another name: a CaptchaAI-style error (HTTP 200, an `ERROR_` code), never a 5xx, and the
  emulator received nothing.
- load: three client processes (the SDK, 2captcha-python, a curl script), 20 tasks each, over a
  5-thread plan with two real Spin instances on one real redis-server and per-token shares
  (`client_threads = sdk=2,two=2`): no ERROR_ZERO_BALANCE upstream and at most 5 tasks in
  progress at the emulator, at most 2 per shared token, 60 tasks created upstream (none
  twice), every task solved with its emulator task's answer.
- seeds: the seeds' own Airflow operator, Dagster asset and Mage block (../shared/seeds, cut
  from the guides' text; seeds.py), at once through one Spin edge over a 5-thread plan, each by
  the commands its guide gives: each run succeeds, every token the portal got is an emulator
  answer used once, one upstream task per form post, at most 5 in progress.
- secrets: the CaptchaAI key appears in no reply, log line, SQLite file, Redis dump, or the
  frameworks' databases and logs.

A missing Spin, nginx or redis-server skips the parts that need it (printed SKIPPED); under
CI=true it is a failure. Usage: see run.sh (it makes the venv and passes the binaries).
"""

from __future__ import annotations

import argparse
import base64
import concurrent.futures
import importlib.metadata
import json
import os
import re
import secrets
import shutil
import socket
import ssl
import string
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT.parent / "shared" / "seeds"  # the two CaptchaAI guides the project starts from
sys.path.insert(0, str(ROOT / "tests" / "conformance"))
from captchaai import CaptchaAI  # noqa: E402
from sdk_conformance import GOOGLEKEY, PAGE, PROXY, png  # noqa: E402
from sdk_conformance import cases as sdk_cases  # noqa: E402
from twocaptcha import TwoCaptcha  # noqa: E402

import seeds  # noqa: E402  (tests/drop-in/seeds.py)

STARTUP_TIMEOUT_S = 120  # a first start compiles the component
CI = os.environ.get("CI") == "true"
# The CaptchaAI key every edge holds: it must never come back out.
API_KEY = "K3yOfCaptchaAINeverShown" + secrets.token_hex(4)
UNSOLVABLE_SITEKEY = "0x4AAAAAAAUnsolvableSiteKey"
TURNSTILE_SITEKEY = "0x4AAAAAAABkMYinukE8nzY"
LOAD_TASKS = 20
# captchaai-serve's own request-body limit (serve/src: 16 MiB), above the edge's 2 MiB.
SERVE_BODY_LIMIT = 16 << 20

_print_lock = threading.Lock()
failures: list[str] = []


def say(msg: str) -> None:
    with _print_lock:
        print(msg, flush=True)


def fail(msg: str) -> None:
    with _print_lock:
        failures.append(msg)
    say("FAIL " + msg)


def token() -> str:
    """A client token: 32 letters and digits, as the clients check a key's length."""
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(32))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Work:
    """The run's scratch directory (certificate, logs, state), removed at the end."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="drop-in."))
        self.procs: list[subprocess.Popen] = []
        self.cert = self.dir / "edge.crt"
        self.key = self.dir / "edge.key"
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
             "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
             "-keyout", str(self.key), "-out", str(self.cert)],
            check=True, capture_output=True,
        )  # fmt: skip
        # The clients' own trust settings: requests (2captcha-python) and httpx (the SDK).
        os.environ["REQUESTS_CA_BUNDLE"] = str(self.cert)
        os.environ["SSL_CERT_FILE"] = str(self.cert)
        self.tls = ssl.create_default_context(cafile=str(self.cert))

    def start(self, name: str, argv: list[str], env: dict | None = None, **kw) -> subprocess.Popen:
        log = open(self.dir / f"{name}.log", "wb")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
                                stdin=subprocess.DEVNULL, **kw)  # fmt: skip
        self.procs.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen) -> None:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)

    def close(self) -> None:
        for proc in reversed(self.procs):
            self.stop(proc)
        if os.environ.get("DROPIN_KEEP"):
            say(f"kept {self.dir}")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    def get(self, url: str, timeout: float = 10) -> bytes:
        with urllib.request.urlopen(url, timeout=timeout, context=self.tls) as r:
            return r.read()

    def wait_up(self, url: str, proc: subprocess.Popen, name: str) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited ({proc.returncode}); see its log:\n" + self.tail(name))
            try:
                self.get(url, timeout=2)
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"{name} did not answer {url} within {STARTUP_TIMEOUT_S} s")

    def tail(self, name: str) -> str:
        path = self.dir / f"{name}.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""


class Emulator:
    """The emulator on a free loopback port."""

    def __init__(self, work: Work, binary: Path, name: str, args: list[str]):
        port = free_port()
        self.proc = work.start(name, [str(binary), "--port", str(port), *args])
        self.base_url = f"http://127.0.0.1:{port}"
        work.wait_up(self.base_url + "/_emulator/health", self.proc, name)

    def control(self, path: str):
        with urllib.request.urlopen(self.base_url + path, timeout=10) as r:
            return json.loads(r.read())

    def answers(self) -> dict[str, dict]:
        """Every task the emulator created, by the canonical form of its answer."""
        out = {}
        for r in self.control("/_emulator/requests"):
            if r["path"] == "/in.php" and r.get("task_id"):
                task = self.control(f"/_emulator/tasks/{r['task_id']}")
                if task.get("answer") is not None:
                    out[canonical(task["answer"])] = {**task, "request": r}
        return out


def canonical(answer) -> str:
    """An answer as text: structured answers (JSON text or parsed) as sorted JSON."""
    if isinstance(answer, str):
        try:
            parsed = json.loads(answer)
        except ValueError:
            return answer
        if not isinstance(parsed, (dict, list)):
            return answer
        answer = parsed
    return json.dumps(answer, sort_keys=True, separators=(",", ":"))


class Edge:
    """The edge app: under real Spin with TLS, or under captchaai-serve behind nginx with TLS."""

    def __init__(self, work: Work, runtime: str, name: str, binaries: dict, variables: dict,
                 runtime_config: str | None = None):  # fmt: skip
        self.name = name
        self.state = work.dir / f"{name}-state"
        self.state.mkdir()
        port = free_port()
        env = {f"SPIN_VARIABLE_{k.upper()}": v for k, v in variables.items()}
        store = ["--state-dir", str(self.state)]
        if runtime_config:
            (self.state / "runtime-config.toml").write_text(runtime_config)
            store += ["--runtime-config-file", str(self.state / "runtime-config.toml")]
        if runtime == "spin":
            proc = work.start(name, [str(binaries["spin"]), "up", "--from", str(ROOT / "spin.toml"),
                                     "--listen", f"127.0.0.1:{port}", *store,
                                     "--tls-cert", str(work.cert), "--tls-key", str(work.key)],
                              env=env, cwd=ROOT)  # fmt: skip
        else:
            inner = free_port()
            proc = work.start(name, [str(binaries["serve"]), "--manifest", str(ROOT / "spin.toml"),
                                     "--listen", f"127.0.0.1:{inner}", *store,
                                     "--cache-dir", str(ROOT / "target" / "component-cache")], env=env)  # fmt: skip
            work.wait_up(f"http://127.0.0.1:{inner}/healthz", proc, name)
            self.direct_url = f"http://127.0.0.1:{inner}"
            conf = work.dir / f"{name}-nginx.conf"
            temp = work.dir / f"{name}-nginx"
            temp.mkdir()
            # One process as the current user; bodies up to 16 MiB reach the edge, which decides.
            conf.write_text(f"""
daemon off; master_process off; pid {temp}/nginx.pid; error_log {work.dir}/{name}-nginx.log;
events {{}}
http {{
  access_log {work.dir}/{name}-nginx.log;
  client_body_temp_path {temp}/body; proxy_temp_path {temp}/proxy; fastcgi_temp_path {temp}/fcgi;
  uwsgi_temp_path {temp}/uwsgi; scgi_temp_path {temp}/scgi;
  client_max_body_size 16m;
  server {{
    listen 127.0.0.1:{port} ssl;
    ssl_certificate {work.cert}; ssl_certificate_key {work.key};
    location / {{ proxy_pass http://127.0.0.1:{inner}; proxy_set_header Host $host; }}
  }}
}}
""")
            work.start(f"{name}-nginx-main", [str(binaries["nginx"]), "-c", str(conf), "-p", str(temp)])
        self.host = f"127.0.0.1:{port}"
        self.url = f"https://{self.host}"
        # Where the edge itself answers (hostile input is its to refuse, not nginx's).
        self.direct_url = getattr(self, "direct_url", self.url)
        work.wait_up(self.url + "/healthz", proc, name)


def tools(args) -> dict:
    """The real components present: {"spin": path, "nginx": path, "redis": path}."""
    found = {}
    if args.spin and Path(args.spin).is_file():
        found["spin"] = Path(args.spin)
    for name, binary in (("nginx", "nginx"), ("redis", "redis-server")):
        path = shutil.which(binary) or shutil.which(binary, path="/usr/sbin:/sbin")
        if path:
            found[name] = Path(path)
    found["serve"] = Path(args.serve)
    return found


# ---- the types ------------------------------------------------------------------------------

def twocaptcha_cases(image: Path) -> list[tuple[str, str, dict]]:
    """(label, TwoCaptcha method, kwargs): its methods for the types CaptchaAI solves."""
    proxy = {"type": "HTTP", "uri": PROXY["proxy"]}
    ua = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36"
    return [
        ("normal", "normal", {"file": str(image)}),
        ("normal base64", "normal", {"file": base64.b64encode(png()).decode()}),
        ("grid", "grid", {"file": str(image), "rows": 3, "cols": 3, "hintText": "buses"}),
        ("recaptcha v2", "recaptcha", {"sitekey": GOOGLEKEY, "url": PAGE}),
        ("recaptcha v2 invisible", "recaptcha", {"sitekey": GOOGLEKEY, "url": PAGE, "invisible": 1}),
        ("recaptcha v2 enterprise", "recaptcha", {"sitekey": GOOGLEKEY, "url": PAGE, "enterprise": 1}),
        ("recaptcha v3", "recaptcha", {"sitekey": GOOGLEKEY, "url": PAGE, "version": "v3", "action": "login",
                                       "score": 0.3}),  # fmt: skip
        ("turnstile", "turnstile", {"sitekey": TURNSTILE_SITEKEY, "url": PAGE}),
        ("geetest", "geetest", {"gt": "81388ea1fc187e0c335c0a8907ff2625",
                                "challenge": "12345678abc90123d45678ef90123a456b", "url": PAGE}),  # fmt: skip
        ("geetest_v4", "geetest_v4", {"captcha_id": "e392e1d7fd421dc63325744d5a2b9c73", "url": PAGE}),
        ("lemin", "lemin", {"captcha_id": "CROPPED_3dfdd5c_d1872b526b794d83", "div_id": "lemin-cropped",
                            "url": PAGE}),  # fmt: skip
        ("friendly_captcha", "friendly_captcha", {"sitekey": "FCMGEMUD2KTDSQ5H", "url": PAGE}),
        ("captchafox", "captchafox", {"sitekey": "sk_11111111111111111111", "pageurl": PAGE, "userAgent": ua,
                                      "proxy": proxy}),  # fmt: skip
    ]


def solve_types(work: Work, edge: Edge, emulator: Emulator, sdk_token: str, two_token: str) -> None:
    """Every type of both clients at once, one client per solve."""
    image = work.dir / "captcha.png"
    image.write_bytes(png())
    tag = edge.name

    def sdk(case):
        label, method, kwargs = case
        client = CaptchaAI(sdk_token, base_url=edge.url)
        try:
            return canonical(getattr(client, method)(**kwargs).solution)
        finally:
            client.close()

    def two(case):
        label, method, kwargs = case
        return canonical(getattr(TwoCaptcha(two_token, server=edge.host), method)(**kwargs)["code"])

    jobs = [(f"sdk {c[0]}", sdk, c) for c in sdk_cases()] + [(f"2captcha {c[0]}", two, c)
                                                              for c in twocaptcha_cases(image)]  # fmt: skip
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = {pool.submit(fn, case): label for label, fn, case in jobs}
        results = {}
        for fut in concurrent.futures.as_completed(futures):
            label = futures[fut]
            try:
                results[label] = fut.result()
            except Exception as e:  # noqa: BLE001 - every failure is reported, then counted
                fail(f"[{tag}] {label}: {type(e).__name__}: {e}")
    # The edge's upstream counters, for a failure's diagnosis (failed upstream requests).
    try:
        with urllib.request.urlopen(urllib.request.Request(edge.url + "/metrics", headers={
                "Authorization": f"Bearer {sdk_token}"}), timeout=10, context=work.tls) as r:  # fmt: skip
            upstream = [line for line in r.read().decode().splitlines()
                        if line.startswith("captchaai_edge_upstream") and not line.endswith(" 0")]  # fmt: skip
        say(f"[{tag}] edge upstream counters: {'; '.join(upstream)}")
    except OSError as e:
        say(f"[{tag}] edge metrics unread: {e}")
    answers = emulator.answers()
    for label, answer in sorted(results.items()):
        if answer in answers:
            say(f"[{tag}] ok   {label}")
        else:
            fail(f"[{tag}] {label}: the answer is none the emulator gave")
    say(f"[{tag}] {len(jobs)} solves in {time.monotonic() - started:.0f} s")


# ---- the error paths ------------------------------------------------------------------------

def raised(fn) -> str:
    """What `fn` raised, as `Class: message`, or `returned` when it did not raise."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"
    return "returned"


def error_paths(edge: Edge, emulator: Emulator, sdk_token: str, two_token: str) -> None:
    tag = edge.name
    wrong = token()

    def sdk_solve(base, key, **kwargs):
        def run():
            client = CaptchaAI(key, base_url=base)
            try:
                return client.turnstile(**{"sitekey": TURNSTILE_SITEKEY, "url": PAGE, **kwargs})
            finally:
                client.close()
        return run

    def sdk_unknown_id(base, key):
        def run():
            client = CaptchaAI(key, base_url=base)
            try:
                return client.get_result("turnstile", "123456789")
            finally:
                client.close()
        return run

    sdk_cases_ = {
        "unsolvable": lambda base, key: sdk_solve(base, key, sitekey=UNSOLVABLE_SITEKEY),
        "wrong token": lambda base, key: sdk_solve(base, wrong),
        "bad pageurl": lambda base, key: sdk_solve(base, key, url="not-a-url"),
        "bad sitekey": lambda base, key: sdk_solve(base, key, sitekey="x" * 300),
        "unknown id": sdk_unknown_id,
    }

    def one_sdk(label, make):
        at_edge = raised(make(edge.url, sdk_token))
        at_emulator = raised(make(emulator.base_url, API_KEY))
        if at_edge == at_emulator and at_edge != "returned":
            say(f"[{tag}] ok   sdk {label}: {at_edge}")
        else:
            fail(f"[{tag}] sdk {label}: edge {at_edge!r}, CaptchaAI (emulator) {at_emulator!r}")

    two = TwoCaptcha(two_token, server=edge.host, pollingInterval=1)
    two_cases = {
        "unsolvable": (lambda: two.turnstile(sitekey=UNSOLVABLE_SITEKEY, url=PAGE), "ERROR_CAPTCHA_UNSOLVABLE"),
        "wrong token": (lambda: TwoCaptcha(wrong, server=edge.host).turnstile(sitekey=TURNSTILE_SITEKEY, url=PAGE),
                        "ERROR_KEY_DOES_NOT_EXIST"),  # fmt: skip
        "bad pageurl": (lambda: two.turnstile(sitekey=TURNSTILE_SITEKEY, url="not-a-url"), "ERROR_PAGEURL"),
        "unknown id": (lambda: two.get_result("123456789"), "ERROR_WRONG_CAPTCHA_ID"),
        "malformed id": (lambda: two.get_result("12ab"), "ERROR_WRONG_ID_FORMAT"),
    }

    def one_two(label, fn, code):
        got = raised(fn)
        if got == f"ApiException: {code}":
            say(f"[{tag}] ok   2captcha {label}: {got}")
        else:
            fail(f"[{tag}] 2captcha {label}: {got!r}, wanted ApiException: {code}")

    with concurrent.futures.ThreadPoolExecutor(max_workers=12) as pool:
        jobs = [pool.submit(one_sdk, label, make) for label, make in sdk_cases_.items()]
        jobs += [pool.submit(one_two, label, fn, code) for label, (fn, code) in two_cases.items()]
        for job in jobs:
            job.result()


# ---- hostile input --------------------------------------------------------------------------

def raw(work: Work, url: str, body: bytes | None = None, content_type: str | None = None) -> tuple[int, bytes]:
    """The edge's reply to a POST of `body` (a GET without one), sent by curl: it reads a reply
    that comes before the whole body is sent (the edge refuses an oversized one at once)."""
    argv = ["curl", "-sS", "--max-time", "60", "--cacert", str(work.cert), "-o", "-", "-w", "\\n%{http_code}", url]
    if body is not None:
        path = work.dir / "request-body"
        path.write_bytes(body)
        argv += ["--data-binary", f"@{path}", "-H", f"Content-Type: {content_type or ''}"]
    out = subprocess.run(argv, capture_output=True)
    reply, _, status = out.stdout.rpartition(b"\n")
    return int(status or 0), reply if status else out.stderr


def multipart(parts: list[tuple[str, bytes, str | None]]) -> tuple[bytes, str]:
    boundary = "dropin" + secrets.token_hex(8)
    out = b""
    for name, value, filename in parts:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        out += f"--{boundary}\r\nContent-Disposition: {disposition}\r\n\r\n".encode() + value + b"\r\n"
    return out + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


CAPTCHAAI_ERROR = re.compile(rb'^(ERROR_[A-Z_]+|\{"status":0,"request":"ERROR_[A-Z_]+"[^\n]*\})$')


def hostile(work: Work, edge: Edge, emulator: Emulator, tok: str, replies: list[bytes]) -> None:
    tag = edge.name
    form = "application/x-www-form-urlencoded"
    good = f"key={tok}&method=turnstile&sitekey={TURNSTILE_SITEKEY}&pageurl={PAGE}".encode()
    big_image, big_type = multipart([("key", tok.encode(), None), ("method", b"post", None),
                                     ("file", png(60, 2 * 1024 * 1024), "big.png")])  # fmt: skip
    dup_key_part, dup_key_type = multipart([("key", tok.encode(), None), ("key", tok.encode(), None),
                                            ("method", b"post", None), ("file", png(), "c.png")])  # fmt: skip
    broken = b"--zz\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\n" + tok.encode() + b"\r\n--zz\r\nbroken"
    cases = [
        ("body of 3 MiB", "/in.php", good + b"&x=" + b"a" * (3 << 20), form),
        ("body of 20 MiB", "/in.php", good + b"&x=" + b"a" * (20 << 20), form),
        ("a field of 70 KiB", "/in.php", good + b"&x=" + b"a" * 70_000, form),
        ("a sitekey of 300 characters", "/in.php", good.replace(TURNSTILE_SITEKEY.encode(), b"s" * 300), form),
        ("an image of 2 MiB", "/in.php", big_image, big_type),
        ("a value not UTF-8", "/in.php", good + b"&data=%FF%FE", form),
        ("a raw value not UTF-8", "/in.php", good + b"&data=\xff\xfe", form),
        ("a name not UTF-8", "/in.php", good + b"&\xff=1", form),
        ("key twice", "/in.php", good + f"&key={tok}".encode(), form),
        ("key twice in multipart", "/in.php", dup_key_part, dup_key_type),
        ("method twice", "/in.php", good + b"&method=turnstile", form),
        ("key as KEY", "/in.php", good.replace(b"key=", b"KEY="), form),
        ("key as key[]", "/in.php", good.replace(b"key=", b"key%5B%5D="), form),
        ("key as ' key'", "/in.php", good.replace(b"key=", b"+key="), form),
        ("a second key under key[]", "/in.php", good + f"&key%5B%5D={tok}".encode(), form),
        ("json twice", "/in.php", good + b"&json=1&json=0", form),
        ("pingback", "/in.php", good + b"&pingback=https://example.com/hook", form),
        ("method unknown", "/in.php", f"key={tok}&method=hcaptcha&json=1".encode(), form),
        ("no body", "/in.php", b"", form),
        ("multipart cut off", "/in.php", broken, "multipart/form-data; boundary=zz"),
        ("a file with method=turnstile", "/in.php", *multipart([("key", tok.encode(), None),
                                                                ("method", b"turnstile", None),
                                                                ("file", png(), "c.png")])),  # fmt: skip
        ("res.php id not digits", "/res.php", f"key={tok}&action=get&id=12ab".encode(), form),
        ("res.php 150 ids", "/res.php", f"key={tok}&action=get&ids=".encode() + b",".join([b"1"] * 150), form),
        ("res.php action twice", "/res.php", f"key={tok}&action=get&action=getbalance&id=1".encode(), form),
        ("res.php unknown action", "/res.php", f"key={tok}&action=get2&id=1".encode(), form),
        ("res.php key smuggled", "/res.php", f"KEY={tok}&action=getbalance".encode(), form),
        ("res.php body of 3 MiB", "/res.php", f"key={tok}&action=get&id=1&x=".encode() + b"a" * (3 << 20), form),
    ]
    # An unknown token is answered as such first (CaptchaAI checks the key first), in the format
    # asked for, also when the rest of the request is refused.
    stranger = token()
    cases += [
        ("unknown token, bad request, json=1", "/in.php", f"key={stranger}&method=turnstile&json=1".encode(), form),
        ("unknown token, bad request", "/res.php", f"key={stranger}&action=get2".encode(), form),
    ]
    wants = {
        "unknown token, bad request, json=1": b'{"status":0,"request":"ERROR_KEY_DOES_NOT_EXIST"',
        "unknown token, bad request": b"ERROR_KEY_DOES_NOT_EXIST",
    }
    before = emulator.control("/_emulator/stats")["requests"]
    for name, path, body, content_type in cases:
        status, reply = raw(work, edge.direct_url + path, body, content_type)
        replies.append(reply)
        if name in wants and not reply.startswith(wants[name]):
            fail(f"[{tag}] hostile {name}: {reply[:200]!r}, wanted {wants[name]!r}")
        elif status == 200 and CAPTCHAAI_ERROR.match(reply.strip()):
            say(f"[{tag}] ok   hostile {name}: {reply.strip()[:80].decode(errors='replace')}")
        elif tag == "serve" and len(body) > SERVE_BODY_LIMIT and status == 413:
            # captchaai-serve refuses a body over its own limit before the app sees it (as a
            # proxy in front would): a 4xx, never a 5xx.
            say(f"[{tag}] ok   hostile {name}: the host's own 413")
        else:
            fail(f"[{tag}] hostile {name}: HTTP {status} {reply[:200]!r}")
    for name, query in (("query not UTF-8", f"key={tok}&method=turnstile&sitekey=%FF&pageurl={PAGE}"),
                        ("query key twice", f"key={tok}&key={tok}&action=getbalance")):  # fmt: skip
        path = "/in.php" if "method" in query else "/res.php"
        status, reply = raw(work, f"{edge.direct_url}{path}?{query}")
        replies.append(reply)
        if status == 200 and CAPTCHAAI_ERROR.match(reply.strip()):
            say(f"[{tag}] ok   hostile {name}: {reply.strip().decode(errors='replace')}")
        else:
            fail(f"[{tag}] hostile {name}: HTTP {status} {reply[:200]!r}")
    after = emulator.control("/_emulator/stats")["requests"]
    if after == before:
        say(f"[{tag}] ok   hostile: nothing reached the emulator")
    else:
        fail(f"[{tag}] hostile: {after - before} requests reached the emulator")


# ---- three client processes over two Spin instances on one Redis ----------------------------

def client_main(kind: str, base: str, tok: str, count: int, min_len: int) -> int:
    """One client process: `count` image solves at once; prints a JSON list of answers."""
    image = Path(tempfile.mkdtemp()) / "c.png"
    image.write_bytes(png())

    def one(_):
        if kind == "sdk":
            client = CaptchaAI(tok, base_url=base)
            try:
                return client.normal(image=png(), min_len=min_len).solution
            finally:
                client.close()
        host = base.removeprefix("https://")
        # The client's own polling setting, 1 s instead of 10 s, so the run takes seconds.
        return TwoCaptcha(tok, server=host, pollingInterval=1).normal(str(image), minLen=min_len)["code"]

    with concurrent.futures.ThreadPoolExecutor(max_workers=count) as pool:
        answers = list(pool.map(one, range(count)))
    print(json.dumps(answers))
    return 0


CURL_CLIENT = r"""
set -euo pipefail
# 20 submits at once (in.php, the image as base64), then polls every second until all are solved.
body=$(base64 -w0 "$IMAGE")
ids=()
for i in $(seq 1 "$COUNT"); do
  reply=$(curl -sS --fail --cacert "$CERT" "$BASE/in.php" -d key="$TOKEN" -d method=base64 \
    -d min_len="$MIN_LEN" --data-urlencode body="$body")
  case $reply in OK\|*) ids+=("${reply#OK|}") ;; *) echo "submit: $reply" >&2; exit 1 ;; esac
done
answers=()
for id in "${ids[@]}"; do
  for _ in $(seq 1 120); do
    reply=$(curl -sS --fail --cacert "$CERT" "$BASE/res.php?key=$TOKEN&action=get&id=$id")
    case $reply in
      CAPCHA_NOT_READY) sleep 1 ;;
      OK\|*) answers+=("${reply#OK|}"); break ;;
      *) echo "poll $id: $reply" >&2; exit 1 ;;
    esac
  done
done
printf '%s\n' "${answers[@]}" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read().split()))'
"""


def peak(selected) -> int:
    """The most emulator tasks in progress at once."""
    events = sorted([(t["started_at_ms"] or t["submitted_at_ms"], 1) for t in selected]
                    + [(t["ready_at_ms"], -1) for t in selected])  # fmt: skip
    busy = top = 0
    for _, delta in events:
        busy += delta
        top = max(top, busy)
    return top


def load(work: Work, binaries: dict, emulator_binary: Path) -> list[bytes]:
    """Three client processes, 20 tasks each, a 5-thread plan, two Spin instances, one Redis."""
    redis_port = free_port()
    redis_dir = work.dir / "redis"
    redis_dir.mkdir()
    redis = work.start("redis", [str(binaries["redis"]), "--port", str(redis_port), "--bind", "127.0.0.1",
                                 "--dir", str(redis_dir), "--save", "", "--appendonly", "no",
                                 "--rdbcompression", "no"])  # fmt: skip
    deadline = time.monotonic() + 10
    ping = ["redis-cli", "-p", str(redis_port), "ping"]
    while subprocess.run(ping, capture_output=True, text=True).stdout.strip() != "PONG":
        if time.monotonic() > deadline or redis.poll() is not None:
            raise RuntimeError("redis-server did not start:\n" + work.tail("redis"))
        time.sleep(0.1)
    emulator = Emulator(work, emulator_binary, "emulator-load", ["--seed", "7", "--solve-time", "all=300:1500",
                                                                  "--key", f"{API_KEY}:5"])  # fmt: skip
    tokens = {"sdk": token(), "two": token(), "curl": token()}
    shares = {"sdk": 2, "two": 2}
    variables = {
        "captchaai_key": API_KEY,
        "client_tokens": ",".join(f"{label}:{tok}" for label, tok in tokens.items()),
        "client_threads": ",".join(f"{label}={n}" for label, n in shares.items()),
        "api_base": emulator.base_url,
        # A task's deadline runs from in.php, queue included: 60 tasks over 5 threads (2 for a
        # share) wait longer than an image's default minute.
        "solve_deadline_ms": "600000",
    }
    config = f'[key_value_store.default]\ntype = "redis"\nurl = "redis://127.0.0.1:{redis_port}"\n'
    edges = [Edge(work, "spin", f"spin-redis-{i}", binaries, variables, config) for i in (1, 2)]
    min_len = {"sdk": 4, "two": 5, "curl": 6}
    started = time.monotonic()
    procs = {}
    for i, kind in enumerate(("sdk", "two", "curl")):
        base = edges[i % 2].url
        if kind == "curl":
            image = work.dir / "load.png"
            image.write_bytes(png())
            argv = ["bash", "-c", CURL_CLIENT]
            env = {"BASE": base, "TOKEN": tokens[kind], "COUNT": str(LOAD_TASKS), "MIN_LEN": str(min_len[kind]),
                   "CERT": str(work.cert), "IMAGE": str(image)}  # fmt: skip
        else:
            argv = [sys.executable, __file__, "--client", kind, "--base", base, "--token", tokens[kind],
                    "--count", str(LOAD_TASKS), "--min-len", str(min_len[kind])]  # fmt: skip
            env = {}
        procs[kind] = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                       env={**os.environ, **env})  # fmt: skip
    results = {}
    for kind, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            fail(f"[load] {kind}: no answer within 300 s")
            continue
        if proc.returncode != 0:
            fail(f"[load] {kind}: exit {proc.returncode}: {err.strip().splitlines()[-1:]}")
            continue
        results[kind] = json.loads(out.strip().splitlines()[-1])
    say(f"[load] 3 clients x {LOAD_TASKS} tasks in {time.monotonic() - started:.0f} s")

    log = emulator.control("/_emulator/requests")
    codes = {}
    for r in log:
        codes[(r["path"], r.get("reply_code"))] = codes.get((r["path"], r.get("reply_code")), 0) + 1
    say(f"[load] upstream requests: {codes}")
    submits = [r for r in log if r["path"] == "/in.php"]
    refused = [r for r in submits if r.get("reply_code") == "ERROR_ZERO_BALANCE"]
    tasks = [emulator.control(f"/_emulator/tasks/{r['task_id']}") | {"request": r} for r in submits if r.get("task_id")]
    by_answer = {canonical(t["answer"]): t for t in tasks if t.get("answer")}

    def min_len_of(t) -> str | None:
        pairs = (t["request"].get("form") or []) + (t["request"].get("query") or [])
        return next((value for name, value in pairs if name == "min_len"), None)

    check = [
        (not refused, f"no ERROR_ZERO_BALANCE upstream ({len(refused)})"),
        (len(tasks) == 3 * LOAD_TASKS, f"{3 * LOAD_TASKS} tasks created upstream ({len(tasks)}; none twice)"),
        (peak(tasks) <= 5, f"at most 5 in progress upstream (peak {peak(tasks)})"),
    ]
    for kind, share in shares.items():
        mine = [t for t in tasks if str(min_len_of(t)) == str(min_len[kind])]
        check.append((len(mine) == LOAD_TASKS and peak(mine) <= share,
                       f"{kind}: {len(mine)} tasks, at most {share} in progress (peak {peak(mine)})"))  # fmt: skip
    for kind, answers in results.items():
        solved = [a for a in answers if canonical(a) in by_answer]
        mine = {by_answer[canonical(a)]["id"] for a in solved}
        check.append((len(solved) == LOAD_TASKS and len(mine) == LOAD_TASKS,
                      f"{kind}: {len(solved)} of {LOAD_TASKS} solved, each with its own upstream task"))  # fmt: skip
    for ok, line in check:
        (say if ok else fail)(("[load] ok   " if ok else "[load] ") + line)

    # The Redis dump, written uncompressed, for the secrets check.
    subprocess.run(["redis-cli", "-p", str(redis_port), "save"], capture_output=True, check=True)
    return []


# ---- the seeds' own code --------------------------------------------------------------------

def seeds_part(work: Work, binaries: dict, emulator_binary: Path) -> None:
    """The seeds' Airflow operator, Dagster asset and Mage block (seeds.py), at once, through one
    Spin edge over a 5-thread plan: each solves end to end; every token the portal got is an
    emulator answer, used once; one upstream task per form post; at most 5 in progress."""
    found = seeds.venvs(ROOT)
    missing = sorted(set(seeds.RUNS) - set(found))
    if missing:
        line = f"no framework venv for {', '.join(missing)} (bindings/python/integrations.sh makes them)"
        (fail if CI else say)(f"[seeds] {'CI=true and ' if CI else 'SKIPPED '}{line}")
    if not found:
        return
    emulator = Emulator(work, emulator_binary, "emulator-seeds", ["--seed", "9", "--solve-time", "all=1000:4000",
                                                                   "--key", f"{API_KEY}:5"])  # fmt: skip
    tokens = {fw: token() for fw in seeds.RUNS}
    variables = {
        "captchaai_key": API_KEY,
        "client_tokens": ",".join(f"{fw}:{tok}" for fw, tok in tokens.items()),
        "api_base": emulator.base_url,
    }
    edge = Edge(work, "spin", "spin-seeds", binaries, variables)
    posts = seeds.run_all(found, SEEDS, work.dir, edge.url, tokens, say, fail)
    answers = emulator.answers()
    log = emulator.control("/_emulator/requests")
    submits = [r for r in log if r["path"] == "/in.php" and r.get("task_id")]
    tasks = [emulator.control(f"/_emulator/tasks/{r['task_id']}") for r in submits]
    tokens_posted = [p["token"] for p in posts]
    check = [
        (all(t in answers for t in tokens_posted),
         f"every token posted to the portal is an emulator answer ({len(posts)} posts)"),
        (len(set(tokens_posted)) == len(tokens_posted), "no token posted twice"),
        (len(tasks) == len(posts), f"one upstream task per form post ({len(tasks)} tasks, {len(posts)} posts)"),
        (peak(tasks) <= 5, f"at most 5 in progress upstream (peak {peak(tasks)})"),
    ]
    for ok, line in check:
        (say if ok else fail)(("[seeds] ok   " if ok else "[seeds] ") + line)


# ---- the key appears nowhere ----------------------------------------------------------------

def secrets_check(work: Work, replies: list[bytes]) -> None:
    key = API_KEY.encode()
    leaks = [f"reply {i}" for i, r in enumerate(replies) if key in r]
    looked = 0
    for path in work.dir.rglob("*"):
        # The emulator is CaptchaAI's stand-in: it is sent the key (and redacts it anyway).
        if path.is_file() and not path.name.startswith("emulator"):
            looked += 1
            if key in path.read_bytes():
                leaks.append(str(path.relative_to(work.dir)))
    kinds = sorted({p.suffix or p.name for p in work.dir.rglob("*") if p.is_file()})
    if leaks:
        fail(f"[secrets] the CaptchaAI key is in: {', '.join(leaks)}")
    else:
        say(f"[secrets] ok   the key is in none of {len(replies)} replies and {looked} files ({' '.join(kinds)})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--emulator", type=Path)
    ap.add_argument("--serve", type=Path)
    ap.add_argument("--spin")
    ap.add_argument("--parts", default="types,hostile,load,seeds",
                    help="a subset of: types (with errors), hostile, load, seeds")
    ap.add_argument("--client")
    ap.add_argument("--base")
    ap.add_argument("--token")
    ap.add_argument("--count", type=int)
    ap.add_argument("--min-len", type=int)
    args = ap.parse_args()
    if args.client:
        return client_main(args.client, args.base, args.token, args.count, args.min_len)
    for package, version in (("captchaai", "1.0.1"), ("2captcha-python", "2.1.2")):
        if importlib.metadata.version(package) != version:
            print(f"expected {package} {version}, found {importlib.metadata.version(package)}", file=sys.stderr)
            return 2
    found = tools(args)
    missing = [name for name in ("spin", "nginx", "redis") if name not in found]
    for name in missing:
        line = f"no {name} (spin: $SPIN_BIN or ../shared/tools/spin/spin; nginx, redis-server: apt)"
        if CI:
            fail(f"CI=true and {line}")
        else:
            say(f"SKIPPED the parts needing {name}: {line}")
    work = Work()
    started = time.monotonic()
    replies: list[bytes] = []
    try:
        emulator = Emulator(work, args.emulator, "emulator", [
            "--seed", "5", "--solve-time", "all=300:1200", "--key", f"{API_KEY}:60",
            "--unsolvable-sitekey", UNSOLVABLE_SITEKEY])  # fmt: skip
        sdk_token, two_token, hostile_token = token(), token(), token()
        variables = {
            "captchaai_key": API_KEY,
            "client_tokens": f"sdk:{sdk_token},two:{two_token},hostile:{hostile_token}",
            "api_base": emulator.base_url,
        }
        runtimes = [r for r, needs in (("spin", "spin"), ("serve", "nginx")) if needs in found]
        edges = [Edge(work, runtime, runtime, found, variables) for runtime in runtimes]

        parts = args.parts.split(",")

        def per_edge(edge):
            solve_types(work, edge, emulator, sdk_token, two_token)
            error_paths(edge, emulator, sdk_token, two_token)

        if "types" in parts:
            with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
                for job in [pool.submit(per_edge, edge) for edge in edges]:
                    job.result()
        if "hostile" in parts:
            for edge in edges:
                hostile(work, edge, emulator, hostile_token, replies)
        if "load" in parts and "spin" in found and "redis" in found:
            load(work, found, args.emulator)
        if "seeds" in parts and "spin" in found:
            seeds_part(work, found, args.emulator)
        # Stop everything so logs are flushed before they are searched.
        for proc in reversed(work.procs):
            work.stop(proc)
        secrets_check(work, replies)
    except Exception as e:  # noqa: BLE001
        fail(f"{type(e).__name__}: {e}")
    finally:
        work.close()
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
