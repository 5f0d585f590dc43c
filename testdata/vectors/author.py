#!/usr/bin/env python3
"""Writes the inputs of the golden vectors (task, config, upstream script, expected outcome).

The transcripts are filled in by the engine: `BLESS=1 cargo test --test vectors`, then read the
diff. Every vector also carries a hand-written `expect` summary that the test checks against
its transcript, so a re-blessed transcript cannot quietly change what a vector means.

Run from anywhere: `python3 testdata/vectors/author.py`. Existing transcripts (and the
solve-times models derived from `solve_times_recipe`) are kept when the inputs did not change;
blessing rewrites all of them from the engine's rules.
"""

import base64
import json
import struct
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
KEY = "0123456789abcdef0123456789abcdef"
GOOGLEKEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
TURNSTILE_KEY = "0x4AAAAAAABkMYinukE8nzY"
PAGE = "https://portal.example.com/export"
PROXY = "scraper:s3cret@203.0.113.7:3128"


def png(width=120, height=40, shade=200):
    """A valid, deterministic PNG of at least 100 bytes."""
    raw = b"".join(b"\x00" + bytes((x * 3 + y * 5 + shade) % 256 for x in range(width * 3)) for y in range(height))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")


def b64(data):
    return base64.b64encode(data).decode()


IMAGE = b64(png())
CELLS = [b64(png(100, 100, shade=i * 20)) for i in range(9)]


# Upstream replies ---------------------------------------------------------------------------

def reply(body, after_ms=300, status=200):
    return {"reply": {"after_ms": after_ms, "status": status, "body": body}}


def js(obj):
    return json.dumps(obj, separators=(",", ":"))


def ok(value, after_ms=300, **extra):
    return reply(js({"status": 1, "request": value, **extra}), after_ms)


def code(name, after_ms=300, **extra):
    return reply(js({"status": 0, "request": name, **extra}), after_ms)


def not_ready(after_ms=200):
    return code("CAPCHA_NOT_READY", after_ms)


def reply_bytes(data, after_ms=300, status=200):
    """A reply whose body is any bytes (e.g. invalid UTF-8), stored as base64."""
    return {"reply": {"after_ms": after_ms, "status": status, "body_base64": b64(data)}}


def transport(error, after_ms=1000):
    return {"transport": {"after_ms": after_ms, "error": error}}


def threads(total, working, after_ms=200):
    return reply(js({"status": 1, "threads": str(total), "working_threads": working}), after_ms)


HTML_502 = reply("<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1>"
                 "</center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n", after_ms=150, status=502)


# Tasks --------------------------------------------------------------------------------------

RECAPTCHA = {"type": "recaptcha_v2", "sitekey": GOOGLEKEY, "pageurl": PAGE}
TURNSTILE = {"type": "turnstile", "sitekey": TURNSTILE_KEY, "pageurl": PAGE}
TOKEN = "03AGdBq24PBCbwiDRaS_MJ7Z" + "x" * 40
VECTORS = []


def vector(name, description, task, script, expect, config=None, restore_before=None, start_ms=0, key=KEY,
           solve_times_recipe=None, stall_before=None):
    VECTORS.append({
        "name": name,
        "description": description,
        "key": key,
        "config": config or {},
        "task": task,
        "start_ms": start_ms,
        "script": script,
        **({"restore_before": restore_before} if restore_before else {}),
        **({"stall_before": [{"send": n, "until_ms": t} for n, t in stall_before]} if stall_before else {}),
        **({"solve_times_recipe": solve_times_recipe} if solve_times_recipe else {}),
        "expect": expect,
    })


# Filled by blessing from the engine's rules, kept here while the inputs stay the same.
DERIVED = ("transcript", "solve_times", "solve_times_after")


def recipe(task, ready_ms, rounds):
    """A solve-times model taught by `rounds` runs of solves of `task` answered `ready_ms` after
    their submit (vectors/src/lib.rs, `build_solve_times`)."""
    return {"task": task, "ready_ms": ready_ms, "rounds": rounds}


def solved(sends, answer=None):
    return {"outcome": "solved", "sends": sends, **({"answer": answer} if answer is not None else {})}


def failed(code_, class_, sends, retry_after_ms=None):
    out = {"outcome": "failed", "code": code_, "class": class_, "sends": sends}
    if retry_after_ms is not None:
        out["retry_after_ms"] = retry_after_ms
    return out


def rejected(field):
    return {"outcome": "rejected", "code": "INVALID_TASK", "class": "permanent", "field": field, "sends": 0}


# One per captcha type -----------------------------------------------------------------------

vector("type_recaptcha_v2", "reCAPTCHA v2: integer task id, three not-ready polls, token in request",
       RECAPTCHA, [ok(73846221), not_ready(), not_ready(), not_ready(), ok(TOKEN)], solved(5, TOKEN))
vector("type_recaptcha_v2_invisible", "invisible reCAPTCHA v2 with data-s, cookies, userAgent and a proxy",
       {**RECAPTCHA, "invisible": True, "data_s": "Dr7iXP3f-4Ps", "cookies": "sid:ab12;lang:en",
        "user_agent": "Mozilla/5.0 (X11; Linux x86_64)", "proxy": PROXY, "proxytype": "http"},
       [ok(73846222), ok(TOKEN)], solved(2, TOKEN))
vector("type_recaptcha_v2_enterprise", "reCAPTCHA v2 Enterprise: answer from `result`, with user_agent",
       {"type": "recaptcha_v2_enterprise", "sitekey": GOOGLEKEY, "pageurl": PAGE, "action": "login"},
       [ok(73846223), not_ready(), ok("OK", result="03AEnterpriseToken", user_agent="Mozilla/5.0 solver")],
       solved(3, "03AEnterpriseToken"))
vector("type_recaptcha_v3", "reCAPTCHA v3 with action and min_score",
       {"type": "recaptcha_v3", "sitekey": GOOGLEKEY, "pageurl": PAGE, "action": "verify", "min_score": 0.3},
       [ok(73846224), ok("03AV3Token")], solved(2, "03AV3Token"))
vector("type_recaptcha_v3_enterprise", "reCAPTCHA v3 Enterprise: result and user_agent",
       {"type": "recaptcha_v3_enterprise", "sitekey": GOOGLEKEY, "pageurl": PAGE, "action": "submit", "min_score": "0.7"},
       [ok(73846225), ok("OK", result="03AV3EntToken", user_agent="Mozilla/5.0 solver")], solved(2, "03AV3EntToken"))
vector("type_turnstile", "Cloudflare Turnstile with action and data passthrough; string task id",
       {**TURNSTILE, "action": "login", "data": "cdata-8842"},
       [ok("5019283746"), not_ready(), ok("0.zrSnRHO7h0HwSjSCU8oyzbjEtD8p.d62306d4ee00c77dda697f959ebbd7bd97")],
       solved(3, "0.zrSnRHO7h0HwSjSCU8oyzbjEtD8p.d62306d4ee00c77dda697f959ebbd7bd97"))
vector("type_cloudflare_challenge", "Cloudflare Challenge: proxy required; cf_clearance and user_agent from `result`",
       {"type": "cloudflare_challenge", "pageurl": PAGE, "proxy": PROXY, "proxytype": "HTTP"},
       [ok("5019283747"), not_ready(), not_ready(), ok("OK", result="cf_clearance_value.1700000000-0-1.2.1.1", user_agent="Mozilla/5.0 cf")],
       solved(4, "cf_clearance_value.1700000000-0-1.2.1.1"))
vector("type_geetest_v3", "GeeTest v3: the answer is a JSON object string",
       {"type": "geetest_v3", "gt": "81388ea1fc187e0c335c0a8907ff2625", "challenge": "12345678abc90123d45678ef90123a456b", "pageurl": PAGE},
       [ok("5019283748"), ok(js({"challenge": "1a2b3c4d5e6f", "validate": "9f8e7d6c5b4a", "seccode": "9f8e7d6c5b4a|jordan"}))],
       solved(2))
GEETEST_COMPATIBLE = {"geetest_challenge": "1a2b3c4d5e6f", "geetest_validate": "9f8e7d6c5b4a",
                      "geetest_seccode": "9f8e7d6c5b4a|jordan"}
vector("type_geetest_v3_compatible_keys", "GeeTest v3: an object answer with the 2captcha-compatible geetest_* keys is JSON",
       {"type": "geetest_v3", "gt": "81388ea1fc187e0c335c0a8907ff2625", "challenge": "12345678abc90123d45678ef90123a456b", "pageurl": PAGE},
       [ok("5019283751"), ok(GEETEST_COMPATIBLE)], solved(2, json.dumps(GEETEST_COMPATIBLE, separators=(",", ":"), sort_keys=True)))
vector("type_geetest_v4", "GeeTest v4: captcha_id as gt, version=4, object answer",
       {"type": "geetest_v4", "captcha_id": "e392e1d7fd421dc63325744d5a2b9c73", "pageurl": PAGE},
       [ok("5019283749"), ok(js({"captcha_id": "e392e1d7fd421dc63325744d5a2b9c73", "lot_number": "7bb8d6a7",
                                  "pass_token": "b57e3b2a", "gen_time": "1700000000", "captcha_output": "aGVsbG8="}))],
       solved(2))
vector("type_captchafox", "CaptchaFox: proxy required, user_agent returned",
       {"type": "captchafox", "sitekey": "sk_11111111111111111111111111111111", "pageurl": PAGE, "proxy": PROXY, "proxytype": "SOCKS5"},
       [ok("5019283750"), ok("fox-token-123", user_agent="Mozilla/5.0 fox")], solved(2, "fox-token-123"))
vector("type_friendly_captcha", "Friendly Captcha v2",
       {"type": "friendly_captcha", "sitekey": "FCMGEMUD2KTDSQ5H", "pageurl": PAGE, "version": "v2"},
       [ok("5019283751"), ok("friendly-solution")], solved(2, "friendly-solution"))
vector("type_lemin", "Lemin: object answer {answer, challenge_uuid}",
       {"type": "lemin", "captcha_id": "CROPPED_3dfdd5c_d1872b526b794d83ba3b365eb15a200b", "div_id": "lemin-cropped-captcha", "pageurl": PAGE},
       [ok("5019283752"), ok(js({"answer": "0xaxakx0xaxaax", "challenge_uuid": "ccd79563-2c9d-4a5a"}))], solved(2))
vector("type_image", "normal image as base64 with options",
       {"type": "image", "image": "data:image/png;base64," + IMAGE, "numeric": 1, "min_len": 4, "max_len": 6,
        "case_sensitive": True, "instructions": "type the digits"},
       [ok("5019283753"), ok("48213")], solved(2, "48213"))
vector("type_image_multipart", "normal image uploaded as a multipart file (method=post)",
       {"type": "image", "image": IMAGE, "upload": "multipart", "phrase": True},
       [ok("5019283754"), ok("two words")], solved(2, "two words"))
vector("type_image_sync", "opt-in synchronous image solving through solve.php: the answer comes in the submit reply",
       {"type": "image", "image": IMAGE, "sync": True}, [ok("X7KQ2")], solved(1, "X7KQ2"))
vector("type_grid", "reCAPTCHA grid image: cell list answer",
       {"type": "grid", "image": IMAGE, "instructions": "select all images with buses", "grid_size": "4x4"},
       [ok("5019283755"), ok("[1,4,7]")], solved(2, "[1,4,7]"))
vector("type_grid_click_text", "grid answer in the plain-text click:1/2/3 form",
       {"type": "grid", "image": IMAGE, "instructions": "select all squares with traffic lights"},
       [ok("5019283756"), ok("click:2/5/9")], solved(2, "[2,5,9]"))
vector("type_bls", "BLS: nine images, 1-based cell list",
       {"type": "bls", "instructions": "664", "images": CELLS},
       [ok("5019283757"), not_ready(), ok("[2,5,9]")], solved(3, "[2,5,9]"))

# Validation: zero requests ------------------------------------------------------------------

vector("reject_hcaptcha", "hCaptcha is not supported by CaptchaAI", {"type": "hcaptcha", "sitekey": "x", "pageurl": PAGE},
       [], rejected("type"))
vector("reject_missing_sitekey", "a missing sitekey fails before any request", {"type": "recaptcha_v2", "pageurl": PAGE},
       [], rejected("sitekey"))
vector("reject_challenge_without_proxy", "Cloudflare Challenge without a proxy", {"type": "cloudflare_challenge", "pageurl": PAGE},
       [], rejected("proxy"))
vector("reject_bad_proxy", "a proxy with a scheme is malformed", {**RECAPTCHA, "proxy": "http://1.2.3.4:80", "proxytype": "HTTP"},
       [], rejected("proxy"))
vector("reject_extra_overrides_key", "extra parameters can never override key, method or json",
       {**TURNSTILE, "extra": {"key": "other"}}, [], rejected("extra.key"))
vector("reject_extra_reserved_any_case", "extra can neither set KEY nor key[] (a PHP backend reads key[] as key)",
       {**TURNSTILE, "extra": {"soft_id": "7", "KEY[]": "other"}}, [], rejected("extra.KEY[]"))
vector("reject_invalid_config", "a poll interval under 5 s is an INVALID_CONFIG failure", TURNSTILE, [],
       {"outcome": "rejected", "code": "INVALID_CONFIG", "class": "permanent", "field": "poll_interval_ms", "sends": 0},
       config={"poll_interval_ms": 1000})
vector("reject_invalid_key", "a malformed key never reaches the service (repeated bad keys get the IP banned)",
       TURNSTILE, [], {"outcome": "rejected", "code": "INVALID_KEY", "class": "permanent", "field": "key", "sends": 0},
       key="0123456789abcdef")
vector("reject_tiny_image", "images under 100 bytes fail locally", {"type": "image", "image": b64(b"GIF89a" + b"\0" * 20)},
       [], rejected("image"))

# One per error code -------------------------------------------------------------------------

PERMANENT_AT_SUBMIT = [
    "ERROR_WRONG_USER_KEY", "ERROR_KEY_DOES_NOT_EXIST", "ERROR_PAGEURL", "ERROR_GOOGLEKEY", "ERROR_WRONG_GOOGLEKEY",
    "ERROR_BAD_TOKEN_OR_PAGEURL", "ERROR_BAD_PARAMETERS", "ERROR_ZERO_CAPTCHA_FILESIZE", "ERROR_TOO_BIG_CAPTCHA_FILESIZE",
    "ERROR_IMAGE_DIMENSIONS_TOO_LARGE", "ERROR_WRONG_FILE_EXTENSION", "ERROR_IMAGE_TYPE_NOT_SUPPORTED", "ERROR_UPLOAD",
    "ERROR_BAD_PROXY", "ERROR_DOMAIN_NOT_ALLOWED", "ERROR_CAPTCHAIMAGE_BLOCKED", "ERROR_IP_NOT_ALLOWED", "ERROR_IP_ADDRES",
    "ERROR_TOKEN_EXPIRED", "ERROR_DUPLICATE_REPORT", "REPORT_NOT_RECORDED",
]
for c in PERMANENT_AT_SUBMIT:
    vector(f"code_{c.lower()}", f"{c} at submit is permanent: no retry", RECAPTCHA, [code(c)], failed(c, "permanent", 1))

vector("code_ip_banned", "IP_BANNED is permanent with a 300 s retry-after", RECAPTCHA, [code("IP_BANNED")],
       failed("IP_BANNED", "permanent", 1, 300000))
vector("code_unknown_error", "an unknown ERROR_* code fails fast as permanent", RECAPTCHA, [code("ERROR_SOMETHING_NEW")],
       failed("ERROR_SOMETHING_NEW", "permanent", 1))
for c, hint in [("ERROR_SERVER_ERROR", 10000), ("ERROR_INTERNAL_SERVER_ERROR", 10000), ("ERROR_PROXY_CONNECTION_FAILED", 10000),
                ("MAX_USER_TURN", 10000), ("ERROR_TOO_MUCH_REQUESTS", 10000), ("ERROR: 1001", 10000)]:
    vector(f"code_{c.lower().replace(': ', '_')}_at_submit", f"{c} at submit: retried after a {hint // 1000} s backoff, then accepted",
           TURNSTILE, [code(c), ok("7412"), ok("0.tok")], solved(3, "0.tok"))
vector("code_no_slot_available", "ERROR_NO_SLOT_AVAILABLE: wait 8 s for a thread and resubmit (no threadsinfo)",
       TURNSTILE, [code("ERROR_NO_SLOT_AVAILABLE"), ok("7413"), ok("0.tok")], solved(3, "0.tok"))
for c in ["ERROR_SERVER_ERROR", "ERROR_INTERNAL_SERVER_ERROR", "ERROR_PROXY_CONNECTION_FAILED"]:
    vector(f"code_{c.lower()}_at_poll", f"{c} while polling: poll again after 10 s", TURNSTILE,
           [ok("7414"), code(c), ok("0.tok")], solved(3, "0.tok"))
for c in ["ERROR_WRONG_ID_FORMAT", "ERROR_WRONG_CAPTCHA_ID", "ERROR_EMPTY_ACTION"]:
    vector(f"code_{c.lower()}", f"{c} while polling is permanent", TURNSTILE, [ok("7415"), code(c)], failed(c, "permanent", 2))
vector("code_captcha_not_ready_spelling", "the defensive CAPTCHA_NOT_READY spelling polls again", TURNSTILE,
       [ok("7416"), code("CAPTCHA_NOT_READY"), ok("0.tok")], solved(3, "0.tok"))
vector("code_zero_balance_busy", "ERROR_ZERO_BALANCE with every thread busy: threadsinfo, wait 8 s, resubmit, solved",
       TURNSTILE, [code("ERROR_ZERO_BALANCE"), threads(5, 5), ok("7417"), ok("0.tok")], solved(4, "0.tok"))
vector("code_zero_balance_no_plan", "ERROR_ZERO_BALANCE with free threads: no active plan, permanent",
       TURNSTILE, [code("ERROR_ZERO_BALANCE"), threads(5, 2)], failed("ERROR_ZERO_BALANCE", "permanent", 2))
vector("code_zero_balance_busy_until_deadline", "every thread stays busy: transient ERROR_ZERO_BALANCE with retry-after at the deadline",
       TURNSTILE, [code("ERROR_ZERO_BALANCE"), threads(5, 5)] * 8,
       failed("ERROR_ZERO_BALANCE", "transient", 16, 8000), config={"deadline_ms": 60000})
vector("code_bad_duplicates", "ERROR_BAD_DUPLICATES (2captcha) is treated as unsolvable: one fresh task",
       TURNSTILE, [ok("7418"), code("ERROR_BAD_DUPLICATES"), ok("7419"), ok("0.tok")], solved(4, "0.tok"))
vector("code_captcha_unsolvable_resubmit", "ERROR_CAPTCHA_UNSOLVABLE: one fresh task with a new id, then solved",
       RECAPTCHA, [ok(1001), not_ready(), code("ERROR_CAPTCHA_UNSOLVABLE"), ok(1002), ok(TOKEN)], solved(5, TOKEN))
vector("code_captcha_unsolvable_twice", "unsolvable again after the fresh task: the unsolvable outcome",
       RECAPTCHA, [ok(1003), code("ERROR_CAPTCHA_UNSOLVABLE"), ok(1004), code("ERROR_CAPTCHA_UNSOLVABLE")],
       failed("ERROR_CAPTCHA_UNSOLVABLE", "unsolvable", 4))

# Faults ------------------------------------------------------------------------------------

vector("fault_html_502_at_poll", "an HTML 502 page while polling is re-polled after 5 s", TURNSTILE,
       [ok("7420"), HTML_502, ok("0.tok")], solved(3, "0.tok"))
vector("fault_html_502_at_submit", "an HTML 502 page at submit is retried with backoff", TURNSTILE,
       [HTML_502, ok("7421"), ok("0.tok")], solved(3, "0.tok"))
vector("fault_plain_text_code", "a bare text code despite json=1 is read as the code", RECAPTCHA,
       [reply("ERROR_WRONG_USER_KEY")], failed("ERROR_WRONG_USER_KEY", "permanent", 1))
vector("fault_plain_text_not_ready", "bare CAPCHA_NOT_READY and OK|token despite json=1", TURNSTILE,
       [reply("OK|7422"), reply("CAPCHA_NOT_READY"), reply("OK|0.tok")], solved(3, "0.tok"))
vector("fault_empty_body", "an empty body while polling is unexpected and re-polled", TURNSTILE,
       [ok("7423"), reply(""), ok("0.tok")], solved(3, "0.tok"))
vector("fault_transport_at_submit", "a connect error at submit is retried", TURNSTILE,
       [transport("connect"), ok("7424"), ok("0.tok")], solved(3, "0.tok"))
vector("fault_transport_while_polling", "a timeout while polling is polled again", TURNSTILE,
       [ok("7425"), transport("timeout", 30000), ok("0.tok")], solved(3, "0.tok"))
vector("fault_silent_upstream", "no reply: the host times the request out after its 30 s timeout_ms", TURNSTILE,
       [ok("7426"), "silence", ok("0.tok")], solved(3, "0.tok"))
vector("fault_submit_retries_exhausted", "server errors on every submit: five retries, then transient", TURNSTILE,
       [code("ERROR_SERVER_ERROR")] * 6, failed("ERROR_SERVER_ERROR", "transient", 6, 10000), config={"deadline_ms": 600000})
vector("fault_transport_exhausted", "the connection fails on every submit: five retries, then transient TRANSPORT_ERROR",
       TURNSTILE, [transport("connect", 50)] * 6, failed("TRANSPORT_ERROR", "transient", 6, 5000), config={"deadline_ms": 600000})
vector("fault_poll_errors_exhausted", "unreadable replies on every poll: the poll-error budget ends it", TURNSTILE,
       [ok("7427")] + [HTML_502] * 4, failed("UNEXPECTED_REPLY", "transient", 5, 5000), config={"max_poll_errors": 3})
vector("deadline_expiry", "not ready until the deadline: nothing is sent at or after it", TURNSTILE,
       [ok("7428")] + [not_ready()] * 40, failed("DEADLINE_EXCEEDED", "transient", 22))
# The last poll: a host stalled past the deadline (a store outage) with a poll still to send, then
# resumed from the snapshot it kept. Turnstile tokens live 300 s, its deadline is 120 s: until
# 300 s after the submit, one last poll may fetch an answer that waited at CaptchaAI.
vector("deadline_last_poll_saves_the_answer",
       "a host stalled past the deadline resumes from its snapshot: one last poll fetches the answer, usable until "
       "the submit plus the token's lifetime",
       TURNSTILE, [ok("7436"), ok("0.tok")], solved(2, "0.tok"), stall_before=[(1, 130000)], restore_before=[1])
vector("deadline_last_poll_not_ready",
       "a host stalled past the deadline: the last poll finds the answer not ready, which ends the solve "
       "(DEADLINE_EXCEEDED, the poll counted); nothing else is sent",
       TURNSTILE, [ok("7437"), not_ready()], failed("DEADLINE_EXCEEDED", "transient", 2), stall_before=[(1, 130000)],
       restore_before=[1])
vector("deadline_last_poll_past_lifetime",
       "a host stalled until the token's lifetime (300 s after the submit) has passed: no last poll, nothing sent",
       TURNSTILE, [ok("7438")], failed("DEADLINE_EXCEEDED", "transient", 1), stall_before=[(1, 300000)])
vector("deadline_late_no_window",
       "reCAPTCHA tokens live 120 s, its deadline: a host stalled past the deadline sends nothing (no answer of the "
       "task could still be usable for sure)",
       RECAPTCHA, [ok(1007)], failed("DEADLINE_EXCEEDED", "transient", 1), stall_before=[(1, 125000)])
vector("restore_mid_solve", "snapshot and restore before several steps: same transcript as without",
       RECAPTCHA, [ok(1005), not_ready(), not_ready(), ok(TOKEN)], solved(4, TOKEN), restore_before=[0, 1, 2, 3])
vector("restore_mid_busy_wait", "restore while waiting for a thread and while threadsinfo is in flight",
       TURNSTILE, [code("ERROR_ZERO_BALANCE"), threads(5, 5), ok("7429"), ok("0.tok")], solved(4, "0.tok"),
       restore_before=[1, 2, 3])
vector("reply_invalid_utf8_answer",
       "a poll answer with an invalid UTF-8 byte is unreadable (never a token with U+FFFD in it): polled again",
       TURNSTILE, [ok("7432"), reply_bytes(b'{"status":1,"request":"0.tok\xff"}'), ok("0.tok")], solved(3, "0.tok"))
vector("reply_invalid_utf8_not_ready",
       "invalid UTF-8 outside the fields the engine reads changes nothing: a not-ready with a garbled error_text",
       TURNSTILE, [ok("7433"), reply_bytes(b'{"status":0,"request":"CAPCHA_NOT_READY","error_text":"\xc3\x28"}'),
                   ok("0.tok")], solved(3, "0.tok"))
vector("reply_invalid_utf8_task_id", "a submit reply whose task id holds invalid UTF-8 is unreadable: submitted again",
       TURNSTILE, [reply_bytes(b'{"status":1,"request":"74\xed\xa0\x80"}'), ok("7434"), ok("0.tok")], solved(3, "0.tok"))
vector("reply_invalid_utf8_html", "an HTML 502 page with invalid UTF-8 is unreadable like any other: polled again",
       TURNSTILE, [ok("7435"), reply_bytes(b"<html>\xfe\xff 502 Bad Gateway</html>", status=502), ok("0.tok")],
       solved(3, "0.tok"))
vector("jitter_seeded", "a jitter seed adds reproducible 0-1000 ms to every wait", RECAPTCHA,
       [ok(1006), not_ready(), ok(TOKEN)], solved(3, TOKEN), config={"jitter_seed": 42})
vector("config_base_url_and_timeouts", "a custom base URL with a path prefix, request timeout and poll interval", TURNSTILE,
       [ok("7430"), not_ready(), ok("0.tok")], solved(3, "0.tok"),
       config={"base_url": "http://127.0.0.1:8099/captchaai/", "request_timeout_ms": 10000, "poll_interval_ms": 7000})
vector("epoch_start", "real epoch start time: deadlines and expiry count from it", TURNSTILE,
       [ok("7431"), ok("0.tok")], solved(2, "0.tok"), start_ms=1764428400000)

# Adaptive polling: solves created with a solve-times model ------------------------------------

FAST = recipe(TURNSTILE, [3000, 3500, 4000, 4500], 10)
vector("solve_times_fast", "a model of 40 Turnstile solves answered in 3-4.5 s: the first poll comes before the table's 13 s",
       TURNSTILE, [ok("7440"), ok("0.tok")], solved(2, "0.tok"), solve_times_recipe=FAST)
vector("solve_times_slow", "a model of 40 Turnstile solves answered in 30-39 s: the first poll comes after the table's 13 s",
       TURNSTILE, [ok("7441"), ok("0.tok")], solved(2, "0.tok"),
       solve_times_recipe=recipe(TURNSTILE, [30000, 33000, 36000, 39000], 10))
vector("solve_times_bimodal", "a model of Turnstile solves answered in 3 s or 45 s, a poll worth 1 s (config poll_cost_ms): "
       "after a first poll that finds nothing, a longer wait over the gap (snapshot version 3, restored before each poll)",
       TURNSTILE, [ok("7442"), not_ready(), ok("0.tok")], solved(3, "0.tok"), restore_before=[1, 2],
       config={"poll_cost_ms": 1000}, solve_times_recipe=recipe(TURNSTILE, [3000, 45000], 30))
vector("solve_times_stragglers", "a model of Turnstile solves answered in 3 s, 15 s (the early group's slowest) or 45 s: "
       "regular polls through the early group, then a longer wait over the gap (snapshot version 3 with "
       "gap_after_polls, restored before each poll)",
       TURNSTILE, [ok("7444"), not_ready(), not_ready(), not_ready(), not_ready(), ok("0.tok")], solved(6, "0.tok"),
       restore_before=[1, 2, 3, 4, 5], solve_times_recipe=recipe(TURNSTILE, [3000, 3000, 15000, 45000, 45000], 8))
vector("solve_times_other_type", "a model of reCAPTCHA v2 given for a Turnstile task: INVALID_CONFIG naming solve_times",
       TURNSTILE, [], {"outcome": "rejected", "code": "INVALID_CONFIG", "class": "permanent", "field": "solve_times", "sends": 0},
       solve_times_recipe=recipe(RECAPTCHA, [20000], 5))
vector("solve_times_config_wins", "a config initial_wait_ms wins over the model's learned first wait",
       TURNSTILE, [ok("7443"), ok("0.tok")], solved(2, "0.tok"), config={"initial_wait_ms": 20000},
       solve_times_recipe=FAST)


def main():
    names = set()
    for v in VECTORS:
        assert v["name"] not in names, v["name"]
        names.add(v["name"])
        path = HERE / f"{v['name']}.json"
        derived = {"transcript": []}
        if path.exists():
            old = json.loads(path.read_text())
            if {k: old.get(k) for k in v} == v:
                derived = {k: old[k] for k in DERIVED if k in old}
        text = json.dumps({**v, **derived}, indent=2, sort_keys=True, ensure_ascii=False)
        path.write_text(text + "\n")
    for stale in HERE.glob("*.json"):
        if stale.stem not in names:
            stale.unlink()
    print(f"wrote {len(VECTORS)} vectors to {HERE}")


if __name__ == "__main__":
    main()
