#!/usr/bin/env python3
"""Writes the endpoint vectors: calls of the engine's `endpoint` interface (reading `in.php` /
`res.php` requests, rendering CaptchaAI's replies, forwarding reports) with a hand-written
`expect` summary each. The `result` of every case is filled in by the engine:
`BLESS=1 cargo test --test vectors`, then read the diff (the test checks each result against its
`expect`, so a re-blessed result cannot quietly change what a case means).

Run from anywhere: `python3 testdata/vectors/endpoint/author.py`. Results are kept while a
case's call and expectation stay the same.
"""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from author import GOOGLEKEY, PAGE, PROXY, TURNSTILE_KEY, b64, png  # noqa: E402

# A client token as an endpoint client sends it (the shape of a CaptchaAI key).
TOKEN = "Tok3nFromTheEdgeForAClient000001"
IMAGE = png()
# A BLS cell image of 1200x40 px: over the 1,000 px per side BLS allows.
WIDE = png(width=1200, height=4)
TEXT = {"json": False, "cors": False}
JSON = {"json": True, "cors": False}
CORS = {"json": True, "cors": True}
JSON_CT = "application/json"
TEXT_CT = "text/plain; charset=utf-8"


def case(about, call, **expect):
    return {"about": about, "call": call, "expect": expect}


def read(path, params, uploads=None):
    call = {"path": path, "params": [list(p) for p in params]}
    if uploads:
        call["uploads"] = [{"name": n, "base64": b64(b)} for n, b in uploads]
    return {"read": call}


def submit(about, params, task_type, uploads=None, task=None, **more):
    expect = {"outcome": "submit", "task_type": task_type, **more}
    if task is not None:
        expect["task"] = task
    return case(about, read("in_php", [("key", TOKEN), *params], uploads), **expect)


def refused(about, path, params, code, uploads=None, key=True, **more):
    params = [("key", TOKEN), *params] if key else params
    return case(about, read(path, params, uploads), outcome="refusal", code=code, **more)


def res(about, params, action, **more):
    return case(about, read("res_php", [("key", TOKEN), *params]), outcome="res", action=action, **more)


def solution(answer, user_agent=None, structured=False):
    return {
        "answer": {"json" if structured else "text": answer},
        "user_agent": user_agent,
        "task_id": "73846221",
        "submitted_at": 1_700_000_000_000,
        "solved_at": 1_700_000_031_000,
        "elapsed_ms": 31_000,
        "polls": 2,
        "attempts": 1,
        "expires_at": None,
    }


def failure(code, klass="permanent", message="what went wrong", task_id="73846221"):
    return {"code": code, "class": klass, "message": message, "retry_after_ms": None, "field": None,
            "task_id": task_id}


def reply(about, call, body, content_type=JSON_CT, **more):
    return case(about, call, outcome="reply", body=body, content_type=content_type, **more)


SUBMIT = [
    # The official captchaai SDK 1.0.1's requests, one per type it solves (its parameter names).
    submit("SDK recaptcha_v2", [("method", "userrecaptcha"), ("googlekey", GOOGLEKEY), ("pageurl", PAGE),
                                ("json", "1")], "recaptcha_v2",
           task={"type": "recaptcha_v2", "sitekey": GOOGLEKEY, "pageurl": PAGE}),
    submit("SDK recaptcha_v2 invisible", [("method", "userrecaptcha"), ("googlekey", GOOGLEKEY), ("pageurl", PAGE),
                                          ("invisible", "1"), ("json", "1")], "recaptcha_v2",
           task={"type": "recaptcha_v2", "sitekey": GOOGLEKEY, "pageurl": PAGE, "invisible": True}),
    submit("SDK recaptcha_v2 enterprise with a user agent", [
        ("method", "userrecaptcha"), ("googlekey", GOOGLEKEY), ("pageurl", PAGE), ("enterprise", "1"),
        ("action", "login"), ("userAgent", "Mozilla/5.0 Test"), ("json", "1")], "recaptcha_v2_enterprise",
        task={"type": "recaptcha_v2_enterprise", "sitekey": GOOGLEKEY, "pageurl": PAGE, "action": "login",
              "user_agent": "Mozilla/5.0 Test"}),
    submit("SDK recaptcha_v3", [("method", "userrecaptcha"), ("googlekey", GOOGLEKEY), ("pageurl", PAGE),
                                ("version", "v3"), ("action", "verify"), ("min_score", "0.3"), ("json", "1")],
           "recaptcha_v3",
           task={"type": "recaptcha_v3", "sitekey": GOOGLEKEY, "pageurl": PAGE, "action": "verify",
                 "min_score": "0.3"}),
    submit("SDK recaptcha_v3 enterprise", [("method", "userrecaptcha"), ("googlekey", GOOGLEKEY), ("pageurl", PAGE),
                                           ("version", "v3"), ("action", "verify"), ("enterprise", "1"),
                                           ("json", "1")], "recaptcha_v3_enterprise"),
    submit("SDK turnstile", [("method", "turnstile"), ("sitekey", TURNSTILE_KEY), ("pageurl", PAGE), ("json", "1")],
           "turnstile", task={"type": "turnstile", "sitekey": TURNSTILE_KEY, "pageurl": PAGE}),
    submit("SDK cloudflare_challenge with its proxy", [
        ("method", "cloudflare_challenge"), ("pageurl", PAGE), ("proxy", PROXY), ("proxytype", "HTTP"),
        ("json", "1")], "cloudflare_challenge",
        task={"type": "cloudflare_challenge", "pageurl": PAGE, "proxy": PROXY, "proxytype": "HTTP"}),
    submit("SDK geetest (v3)", [("method", "geetest"), ("gt", "022397c99c9f646f6477822485f30404"),
                                ("challenge", "1ad03db8b3ec3c4a4de8ae2ea4a9d1c5"), ("pageurl", PAGE), ("json", "1")],
           "geetest_v3"),
    submit("SDK captchafox", [("method", "captchafox"), ("sitekey", "sk_xtNxpk6fCdFbxh1_xJeGflSdCE9tn99G"),
                              ("pageurl", PAGE), ("proxy", PROXY), ("proxytype", "HTTPS"), ("json", "1")],
           "captchafox"),
    submit("SDK friendly_captcha", [("method", "friendly_captcha"), ("sitekey", "FCMST5VUMCBOCGQ9"),
                                    ("pageurl", PAGE), ("version", "v2"), ("json", "1")], "friendly_captcha"),
    submit("SDK lemin", [("method", "lemin"), ("captcha_id", "CROPPED_3dfdd5c_d1872b526b794d83ba3b365eb15a200b"),
                         ("div_id", "lemin-cropped-captcha"), ("pageurl", PAGE), ("apiServer", "api.leminnow.com"),
                         ("json", "1")], "lemin",
           task={"type": "lemin", "captcha_id": "CROPPED_3dfdd5c_d1872b526b794d83ba3b365eb15a200b",
                 "div_id": "lemin-cropped-captcha", "pageurl": PAGE, "api_server": "api.leminnow.com"}),
    submit("SDK normal image with its caseSensitive and lang", [
        ("method", "base64"), ("body", b64(IMAGE)), ("numeric", "1"), ("min_len", "4"), ("max_len", "6"),
        ("phrase", "0"), ("caseSensitive", "1"), ("lang", "en"), ("textinstructions", "red letters"),
        ("json", "1")], "image",
        task={"type": "image", "image": b64(IMAGE), "upload": "base64", "phrase": False, "case_sensitive": True,
              "numeric": 1, "min_len": 4, "max_len": 6, "lang": "en", "instructions": "red letters"}),
    submit("SDK grid", [("method", "base64"), ("body", b64(IMAGE)), ("instructions", "crosswalks"),
                        ("grid_size", "4x4"), ("img_type", "recaptcha"), ("json", "1")], "grid",
           task={"type": "grid", "image": b64(IMAGE), "instructions": "crosswalks", "grid_size": "4x4"}),
    submit("SDK bls: nine data URIs", [("method", "bls"), ("instructions", "664"),
                                       *[(f"image_base64_{i}", "data:image/png;base64," + b64(png(shade=i)))
                                         for i in range(1, 10)], ("json", "1")], "bls"),
    # 2captcha-python 2.1.2's requests (plain-text replies, its own names and extras).
    submit("2captcha-python recaptcha: version=v2, enterprise=0 and soft_id are not sent on", [
        ("googlekey", GOOGLEKEY), ("pageurl", PAGE), ("method", "userrecaptcha"), ("version", "v2"),
        ("enterprise", "0"), ("soft_id", "4580")], "recaptcha_v2",
        task={"type": "recaptcha_v2", "sitekey": GOOGLEKEY, "pageurl": PAGE}),
    submit("2captcha-python recaptcha v3: version=v3, enterprise=0, min_score", [
        ("googlekey", GOOGLEKEY), ("pageurl", PAGE), ("method", "userrecaptcha"), ("version", "v3"),
        ("enterprise", "0"), ("action", "verify"), ("min_score", "0.9"), ("soft_id", "4580")], "recaptcha_v3",
        task={"type": "recaptcha_v3", "sitekey": GOOGLEKEY, "pageurl": PAGE, "action": "verify", "min_score": "0.9"}),
    submit("2captcha-python geetest_v4: its own method and captcha_id", [
        ("captcha_id", "e392e1d7fd421dc63325744d5a2b9c73"), ("pageurl", PAGE), ("method", "geetest_v4"),
        ("soft_id", "4580")], "geetest_v4",
        task={"type": "geetest_v4", "captcha_id": "e392e1d7fd421dc63325744d5a2b9c73", "pageurl": PAGE}),
    submit("2captcha-python turnstile with useragent", [
        ("sitekey", TURNSTILE_KEY), ("pageurl", PAGE), ("method", "turnstile"), ("useragent", "Mozilla/5.0 X"),
        ("soft_id", "4580")], "turnstile",
        task={"type": "turnstile", "sitekey": TURNSTILE_KEY, "pageurl": PAGE, "user_agent": "Mozilla/5.0 X"}),
    submit("2captcha-python normal: a multipart file with method=post", [("method", "post"), ("soft_id", "4580")],
           "image", uploads=[("file", IMAGE)],
           task={"type": "image", "image": b64(IMAGE), "upload": "multipart"}),
    submit("2captcha-python grid: recaptcha=1 and textinstructions pass through to CaptchaAI", [
        ("recaptcha", "1"), ("method", "base64"), ("body", b64(IMAGE)), ("textinstructions", "bicycles"),
        ("soft_id", "4580")], "image",
        task={"type": "image", "image": b64(IMAGE), "upload": "base64", "instructions": "bicycles",
              "extra": {"recaptcha": "1"}}),
    submit("a grid image uploaded as a file goes on as base64", [("method", "post"), ("img_type", "recaptcha"),
                                                                 ("instructions", "boats")], "grid",
           uploads=[("file", IMAGE)]),
    submit("unknown parameters pass through as extra; blank optional fields are left out", [
        ("method", "turnstile"), ("sitekey", TURNSTILE_KEY), ("pageurl", PAGE), ("action", ""),
        ("data", "cdata-1"), ("chl_page", "x")], "turnstile",
        task={"type": "turnstile", "sitekey": TURNSTILE_KEY, "pageurl": PAGE, "data": "cdata-1",
              "extra": {"chl_page": "x"}}),
    # Refusals, with the code CaptchaAI answers.
    refused("no key", "in_php", [("method", "turnstile")], "ERROR_WRONG_USER_KEY", key=False),
    refused("a key that is not 32 letters and digits", "in_php", [("key", "abc"), ("method", "turnstile")],
            "ERROR_WRONG_USER_KEY", key=False),
    refused("the key twice", "in_php", [("key", TOKEN), ("method", "turnstile")], "ERROR_WRONG_USER_KEY"),
    refused("a key smuggled as key[]", "in_php", [("key[]", TOKEN), ("method", "turnstile")],
            "ERROR_WRONG_USER_KEY", key=False),
    refused("a second key as KEY", "in_php", [("KEY", "0123456789abcdef0123456789abcdef"),
                                              ("method", "turnstile")], "ERROR_WRONG_USER_KEY"),
    refused("no method", "in_php", [("sitekey", TURNSTILE_KEY), ("pageurl", PAGE)], "ERROR_BAD_PARAMETERS"),
    refused("hcaptcha is not solved", "in_php", [("method", "hcaptcha"), ("sitekey", "x"), ("pageurl", PAGE),
                                                 ("json", "1")], "ERROR_BAD_PARAMETERS", content_type=JSON_CT),
    refused("no pageurl", "in_php", [("method", "userrecaptcha"), ("googlekey", GOOGLEKEY)], "ERROR_PAGEURL",
            body="ERROR_PAGEURL", content_type=TEXT_CT),
    refused("a pageurl that is no URL", "in_php", [("method", "turnstile"), ("sitekey", TURNSTILE_KEY),
                                                   ("pageurl", "portal/login")], "ERROR_PAGEURL"),
    refused("no googlekey", "in_php", [("method", "userrecaptcha"), ("pageurl", PAGE)], "ERROR_GOOGLEKEY"),
    refused("a blank sitekey", "in_php", [("method", "turnstile"), ("sitekey", " "), ("pageurl", PAGE)],
            "ERROR_GOOGLEKEY"),
    refused("a sitekey over 256 characters", "in_php", [("method", "turnstile"), ("sitekey", "k" * 300),
                                                        ("pageurl", PAGE)], "ERROR_WRONG_GOOGLEKEY"),
    refused("an image under 100 bytes", "in_php", [("method", "base64"), ("body", b64(b"GIF89a" + b"\0" * 20))],
            "ERROR_ZERO_CAPTCHA_FILESIZE"),
    refused("no image", "in_php", [("method", "base64")], "ERROR_ZERO_CAPTCHA_FILESIZE"),
    refused("bytes that are no image", "in_php", [("method", "base64"), ("body", b64(b"%PDF-1.4" + b"\0" * 200))],
            "ERROR_WRONG_FILE_EXTENSION"),
    refused("an image that is not base64", "in_php", [("method", "base64"), ("body", "not base64 at all!")],
            "ERROR_UPLOAD"),
    refused("a BLS cell wider than 1,000 px", "in_php", [
        ("method", "bls"), ("instructions", "664"),
        *[(f"image_base64_{i}", b64(WIDE if i == 5 else png())) for i in range(1, 10)]],
        "ERROR_IMAGE_DIMENSIONS_TOO_LARGE"),
    refused("eight BLS cells", "in_php", [("method", "bls"), ("instructions", "664"),
                                          *[(f"image_base64_{i}", b64(png())) for i in range(1, 9)]],
            "ERROR_BAD_PARAMETERS"),
    refused("a malformed proxy", "in_php", [("method", "turnstile"), ("sitekey", TURNSTILE_KEY), ("pageurl", PAGE),
                                            ("proxy", "http://203.0.113.7:3128"), ("proxytype", "HTTP")],
            "ERROR_BAD_PROXY"),
    refused("cloudflare_challenge without its proxy", "in_php", [("method", "cloudflare_challenge"),
                                                                 ("pageurl", PAGE)], "ERROR_BAD_PARAMETERS"),
    refused("a duplicated parameter", "in_php", [("method", "turnstile"), ("sitekey", TURNSTILE_KEY),
                                                 ("pageurl", PAGE), ("pageurl", PAGE)], "ERROR_BAD_PARAMETERS"),
    refused("a field and its alias both given", "in_php", [("method", "turnstile"), ("sitekey", TURNSTILE_KEY),
                                                           ("pageurl", PAGE), ("userAgent", "A"),
                                                           ("useragent", "B")], "ERROR_BAD_PARAMETERS"),
    refused("a value that was not UTF-8 (the host replaced it with U+FFFD)", "in_php", [
        ("method", "turnstile"), ("sitekey", TURNSTILE_KEY), ("pageurl", PAGE), ("data", "caf\ufffd")],
        "ERROR_BAD_PARAMETERS"),
    refused("a method look-alike", "in_php", [("method", "turnstile"), ("METHOD", "userrecaptcha"),
                                              ("sitekey", TURNSTILE_KEY), ("pageurl", PAGE)],
            "ERROR_BAD_PARAMETERS"),
    refused("a parameter name no service reads plainly", "in_php", [("method", "turnstile"),
                                                                    ("sitekey", TURNSTILE_KEY),
                                                                    ("pageurl", PAGE), ("a.b", "1")],
            "ERROR_BAD_PARAMETERS"),
    refused("pingback is refused: results are polled", "in_php", [
        ("method", "turnstile"), ("sitekey", TURNSTILE_KEY), ("pageurl", PAGE),
        ("pingback", "https://client.example/cb")], "ERROR_BAD_PARAMETERS"),
    refused("json=2 is refused in plain text", "in_php", [("method", "turnstile"), ("json", "2")],
            "ERROR_BAD_PARAMETERS", content_type=TEXT_CT),
    refused("a file with method=base64", "in_php", [("method", "base64")], "ERROR_BAD_PARAMETERS",
            uploads=[("file", IMAGE)]),
    refused("a file part that is no image upload", "in_php", [("method", "post")], "ERROR_BAD_PARAMETERS",
            uploads=[("imginstructions", IMAGE)]),
    refused("a refusal in JSON with CORS", "in_php", [("method", "userrecaptcha"), ("googlekey", GOOGLEKEY),
                                                      ("json", "1"), ("header_acao", "1")], "ERROR_PAGEURL",
            content_type=JSON_CT, headers=[["Access-Control-Allow-Origin", "*"]]),
]

RES = [
    res("SDK poll: action=get&id= (a GET query)", [("action", "get"), ("id", "73846221"), ("json", "1")],
        {"get": "73846221"}),
    res("several ids", [("action", "get"), ("ids", "1,22,333")], {"get_many": ["1", "22", "333"]}),
    res("threadsinfo", [("action", "threadsinfo"), ("json", "1")], "threads_info"),
    res("getbalance (2captcha-python)", [("action", "getbalance")], "balance"),
    res("reportgood", [("action", "reportgood"), ("id", "42")], {"report_good": "42"}),
    res("reportbad", [("action", "reportbad"), ("id", "42")], {"report_bad": "42"}),
    res("unknown parameters are ignored, as CaptchaAI does", [("action", "get"), ("id", "7"), ("soft_id", "4580")],
        {"get": "7"}),
    refused("no action", "res_php", [("id", "7")], "ERROR_EMPTY_ACTION"),
    refused("an unknown action", "res_php", [("action", "get2"), ("id", "7")], "ERROR_BAD_PARAMETERS"),
    refused("get without an id", "res_php", [("action", "get")], "ERROR_WRONG_ID_FORMAT"),
    refused("an id that is not digits", "res_php", [("action", "get"), ("id", "7a")], "ERROR_WRONG_ID_FORMAT"),
    refused("an id too long to exist", "res_php", [("action", "get"), ("id", "1" * 21)], "ERROR_WRONG_CAPTCHA_ID"),
    refused("id and ids together", "res_php", [("action", "get"), ("id", "1"), ("ids", "2")],
            "ERROR_BAD_PARAMETERS"),
    refused("over 100 ids", "res_php", [("action", "get"), ("ids", ",".join(["1"] * 101))],
            "ERROR_BAD_PARAMETERS"),
    refused("no key", "res_php", [("action", "get"), ("id", "7")], "ERROR_WRONG_USER_KEY", key=False),
    refused("a file sent to res.php", "res_php", [("action", "get"), ("id", "7")], "ERROR_BAD_PARAMETERS",
            uploads=[("file", IMAGE)]),
]

UA = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) Chrome/124.0"
RENDER = [
    reply("a reCAPTCHA task id is a JSON number", {"submitted": {"format": JSON, "task_type": "recaptcha_v2",
                                                                  "id": "73846221"}},
          '{"status":1,"request":73846221}'),
    reply("a reCAPTCHA task id past 2^53 stays a string (JavaScript clients)",
          {"submitted": {"format": JSON, "task_type": "recaptcha_v3", "id": "9007199254740993"}},
          '{"status":1,"request":"9007199254740993"}'),
    reply("other task ids are strings", {"submitted": {"format": JSON, "task_type": "turnstile", "id": "73846222"}},
          '{"status":1,"request":"73846222"}'),
    reply("OK|id in plain text", {"submitted": {"format": TEXT, "task_type": "recaptcha_v2", "id": "73846221"}},
          "OK|73846221", content_type=TEXT_CT),
    reply("CORS when asked", {"submitted": {"format": CORS, "task_type": "image", "id": "5"}},
          '{"status":1,"request":"5"}', headers=[["Access-Control-Allow-Origin", "*"]]),
    reply("not ready (JSON)", {"state": {"format": JSON, "task_type": "turnstile", "state": "pending"}},
          '{"status":0,"request":"CAPCHA_NOT_READY"}'),
    reply("not ready (text)", {"state": {"format": TEXT, "task_type": "turnstile", "state": "pending"}},
          "CAPCHA_NOT_READY", content_type=TEXT_CT),
    reply("a token", {"state": {"format": JSON, "task_type": "turnstile",
                                "state": {"solved": solution("0.TOKEN")}}},
          '{"status":1,"request":"0.TOKEN"}'),
    reply("a token in plain text", {"state": {"format": TEXT, "task_type": "turnstile",
                                              "state": {"solved": solution("0.TOKEN")}}},
          "OK|0.TOKEN", content_type=TEXT_CT),
    reply("reCAPTCHA Enterprise: in result too, with the solver's user agent",
          {"state": {"format": JSON, "task_type": "recaptcha_v2_enterprise",
                     "state": {"solved": solution("03AFcWeA-ent", user_agent=UA)}}},
          '{"status":1,"request":"03AFcWeA-ent","result":"03AFcWeA-ent","user_agent":"' + UA + '"}'),
    reply("Cloudflare Challenge: the cookie in result too",
          {"state": {"format": JSON, "task_type": "cloudflare_challenge",
                     "state": {"solved": solution("cf-clearance-value", user_agent=UA)}}},
          '{"status":1,"request":"cf-clearance-value","result":"cf-clearance-value","user_agent":"' + UA + '"}'),
    reply("CaptchaFox: the user agent beside the token",
          {"state": {"format": JSON, "task_type": "captchafox",
                     "state": {"solved": solution("cfox.tok", user_agent=UA)}}},
          '{"status":1,"request":"cfox.tok","user_agent":"' + UA + '"}'),
    reply("grid cells as CaptchaAI writes them: a JSON array as text",
          {"state": {"format": JSON, "task_type": "grid", "state": {"solved": solution("[1,4,7]", structured=True)}}},
          '{"status":1,"request":"[1,4,7]"}'),
    reply("grid cells in plain text", {"state": {"format": TEXT, "task_type": "grid",
                                                 "state": {"solved": solution("[1,4,7]", structured=True)}}},
          "OK|[1,4,7]", content_type=TEXT_CT),
    reply("GeeTest: the object as JSON text",
          {"state": {"format": JSON, "task_type": "geetest_v3",
                     "state": {"solved": solution('{"challenge":"c","seccode":"s|jordan","validate":"v"}',
                                                  structured=True)}}},
          '{"status":1,"request":"{\\"challenge\\":\\"c\\",\\"seccode\\":\\"s|jordan\\",\\"validate\\":\\"v\\"}"}'),
    reply("unsolvable stays unsolvable", {"state": {"format": JSON, "task_type": "turnstile", "state": {
        "failed": failure("ERROR_CAPTCHA_UNSOLVABLE", "unsolvable", "the service gave up")}}},
          '{"status":0,"request":"ERROR_CAPTCHA_UNSOLVABLE","error_text":"the service gave up"}'),
    reply("the deadline is unsolvable to a client", {"state": {"format": TEXT, "task_type": "turnstile", "state": {
        "failed": failure("DEADLINE_EXCEEDED", "transient")}}}, "ERROR_CAPTCHA_UNSOLVABLE", content_type=TEXT_CT),
    reply("transport errors are a server error", {"state": {"format": TEXT, "task_type": "turnstile", "state": {
        "failed": failure("TRANSPORT_ERROR", "transient")}}}, "ERROR_SERVER_ERROR", content_type=TEXT_CT),
    reply("unreadable replies are a server error", {"state": {"format": TEXT, "task_type": "turnstile", "state": {
        "failed": failure("UNEXPECTED_REPLY", "transient")}}}, "ERROR_SERVER_ERROR", content_type=TEXT_CT),
    reply("the host's CaptchaAI key failing is not the client's key failing",
          {"state": {"format": TEXT, "task_type": "turnstile",
                     "state": {"failed": failure("ERROR_KEY_DOES_NOT_EXIST")}}},
          "ERROR_SERVER_ERROR", content_type=TEXT_CT),
    reply("a bad proxy is passed on", {"state": {"format": TEXT, "task_type": "turnstile", "state": {
        "failed": failure("ERROR_BAD_PROXY")}}}, "ERROR_BAD_PROXY", content_type=TEXT_CT),
    reply("an unknown id", {"state": {"format": JSON, "task_type": "turnstile", "state": "not_found"}},
          '{"status":0,"request":"ERROR_WRONG_CAPTCHA_ID"}'),
    reply("several states joined with |", {"states": {"format": TEXT, "states": [
        {"solved": solution("tok")}, "pending", {"failed": failure("DEADLINE_EXCEEDED", "transient")},
        "not_found"]}}, "tok|CAPCHA_NOT_READY|ERROR_CAPTCHA_UNSOLVABLE|ERROR_WRONG_CAPTCHA_ID",
          content_type=TEXT_CT),
    reply("threadsinfo as CaptchaAI was seen to send it", {"threads": {"format": JSON, "threads": 5,
                                                                       "working_threads": 2}},
          '{"status":1,"threads":"5","working_threads":2}'),
    reply("threadsinfo in plain text", {"threads": {"format": TEXT, "threads": 5, "working_threads": 5}},
          '{"threads":"5","working_threads":5}', content_type=TEXT_CT),
    reply("the balance", {"balance": {"format": JSON, "balance": 10.5}}, '{"status":1,"request":10.5}'),
    reply("the balance in plain text", {"balance": {"format": TEXT, "balance": 10.0}}, "10.0", content_type=TEXT_CT),
    reply("a recorded report", {"reported": {"format": JSON}}, '{"status":1,"request":"OK_REPORT_RECORDED"}'),
    reply("a recorded report in plain text", {"reported": {"format": TEXT}}, "OK_REPORT_RECORDED",
          content_type=TEXT_CT),
    reply("an account call that failed in transport", {"failure": {"format": JSON, "failure": failure(
        "TRANSPORT_ERROR", "transient", "threadsinfo: the request failed (timeout)", None)}},
          '{"status":0,"request":"ERROR_SERVER_ERROR","error_text":"threadsinfo: the request failed (timeout)"}'),
    case("an unknown key", {"refusal": {"format": JSON, "refusal": "unknown_key"}}, outcome="refusal",
         code="ERROR_KEY_DOES_NOT_EXIST"),
    case("another client's id", {"refusal": {"format": TEXT, "refusal": "unknown_id"}}, outcome="refusal",
         code="ERROR_WRONG_CAPTCHA_ID", body="ERROR_WRONG_CAPTCHA_ID"),
    case("busy, when the host answers so at once", {"refusal": {"format": TEXT, "refusal": "busy"}},
         outcome="refusal", code="ERROR_NO_SLOT_AVAILABLE", body="ERROR_NO_SLOT_AVAILABLE"),
    case("an action turned off", {"refusal": {"format": JSON, "refusal": "disabled"}}, outcome="refusal",
         code="ERROR_BAD_PARAMETERS"),
    case("a body too large, format unknown: plain text", {"refusal": {"format": None, "refusal": "too_large"}},
         outcome="refusal", code="ERROR_TOO_BIG_CAPTCHA_FILESIZE", body="ERROR_TOO_BIG_CAPTCHA_FILESIZE",
         content_type=TEXT_CT),
]

def read_format(about, path, params, fmt):
    return case(about, {"read_format": {"path": path, "params": [list(p) for p in params]}}, outcome="format", **fmt)


FORMAT = [
    read_format("json=1 on in.php", "in_php", [("key", "not-a-client"), ("method", "turnstile"), ("json", "1")],
                JSON),
    read_format("no json: plain text", "res_php", [("key", "not-a-client"), ("action", "get"), ("id", "1")], TEXT),
    read_format("json=0: plain text", "res_php", [("action", "get"), ("json", "0")], TEXT),
    read_format("json=1 with header_acao=1 on res.php", "res_php", [("json", "1"), ("header_acao", "1")], CORS),
    read_format("a malformed json: plain text", "in_php", [("json", "yes")], TEXT),
    read_format("json=1 given twice", "res_php", [("json", "1"), ("json", "1")], JSON),
    read_format("the format of a request whose key is malformed", "in_php", [("key", "x"), ("json", "1")], JSON),
]

REPORT = [
    case("reportbad for a CaptchaAI task", {"report": {"key": "0123456789abcdef0123456789abcdef",
                                                        "task_id": "73846221", "good": False}}, outcome="send"),
    case("reportgood to another base URL", {"report": {"key": "0123456789abcdef0123456789abcdef",
                                                        "config": {"base_url": "http://127.0.0.1:8080"},
                                                        "task_id": "73846221", "good": True}}, outcome="send"),
    case("a task id with a space", {"report": {"key": "0123456789abcdef0123456789abcdef", "task_id": "7 3",
                                               "good": True}}, outcome="rejected", code="INVALID_TASK"),
    case("a malformed key", {"report": {"key": "short", "task_id": "7", "good": True}}, outcome="rejected",
         code="INVALID_KEY"),
    case("recorded (plain text)", {"parse_report": {"reply": {"reply": {"status": 200,
                                                                          "body": "OK_REPORT_RECORDED"}}}},
         outcome="recorded"),
    case("recorded (JSON)", {"parse_report": {"reply": {"reply": {
        "status": 200, "body": '{"status":1,"request":"OK_REPORT_RECORDED"}'}}}}, outcome="recorded"),
    case("an unknown id", {"parse_report": {"reply": {"reply": {
        "status": 200, "body": '{"status":0,"request":"ERROR_WRONG_CAPTCHA_ID"}'}}}}, outcome="failed",
         code="ERROR_WRONG_CAPTCHA_ID"),
    case("a duplicate report", {"parse_report": {"reply": {"reply": {"status": 200,
                                                                       "body": "ERROR_DUPLICATE_REPORT"}}}},
         outcome="failed", code="ERROR_DUPLICATE_REPORT"),
    case("an HTML error page", {"parse_report": {"reply": {"reply": {"status": 502, "body": "<html>502</html>"}}}},
         outcome="failed", code="UNEXPECTED_REPLY"),
    case("no reply", {"parse_report": {"reply": {"transport": "timeout"}}}, outcome="failed",
         code="TRANSPORT_ERROR"),
]

VECTORS = [
    ("endpoint_read_submit", "in.php requests as the official SDK, 2captcha-python and curl send them, and the "
                             "refusals CaptchaAI answers for bad ones", SUBMIT),
    ("endpoint_read_res", "res.php requests and their refusals", RES),
    ("endpoint_read_format", "the reply format a request asks for, read even when the request is refused "
                             "(for a host answering an unknown key)", FORMAT),
    ("endpoint_render", "replies rendered as CaptchaAI sends them, in JSON and plain text", RENDER),
    ("endpoint_report", "reportgood / reportbad forwarded to CaptchaAI and their replies read", REPORT),
]


def main():
    names = set()
    for name, description, cases in VECTORS:
        abouts = [c["about"] for c in cases]
        assert len(abouts) == len(set(abouts)), name
        names.add(name)
        path = HERE / f"{name}.json"
        old = {}
        if path.exists():
            old = {json.dumps([c["call"], c["expect"]], sort_keys=True): c.get("result")
                   for c in json.loads(path.read_text())["cases"]}
        for c in cases:
            result = old.get(json.dumps([c["call"], c["expect"]], sort_keys=True))
            if result is not None:
                c["result"] = result
        text = json.dumps({"name": name, "description": description, "cases": cases}, indent=2, sort_keys=True,
                          ensure_ascii=False)
        path.write_text(text + "\n")
    for stale in HERE.glob("*.json"):
        if stale.stem not in names:
            stale.unlink()
    print(f"wrote {len(VECTORS)} endpoint vectors to {HERE}")


if __name__ == "__main__":
    main()
