"""Every endpoint vector case (testdata/vectors/endpoint) run through the Python layer gives
exactly the stored result (the one the Rust engine gives natively and through wasmtime): reading
CaptchaAI requests, rendering CaptchaAI's replies, forwarding reports. The result's JSON shape is
vectors/src/endpoint.rs's."""

import base64
import json
from pathlib import Path

import pytest

from captchaai_engine import Config, Engine, Failure, FailureClass, FailureOrigin, Response, Solution
from captchaai_engine.endpoint import NOT_FOUND, PENDING, Refusal, ReplyFormat, ResRequest, SubmitRequest
from captchaai_engine.types import ThreadsInfo, TransportErrorKind

VECTORS = Path(__file__).resolve().parents[3] / "testdata" / "vectors" / "endpoint"
FILES = sorted(VECTORS.glob("*.json"))
CASES = [(path.stem, case) for path in FILES for case in json.loads(path.read_text(encoding="utf-8"))["cases"]]


def canonical(value):
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def fmt(f):
    return ReplyFormat(json=f.get("json", False), cors=f.get("cors", False))


def reply_json(r):
    return {"status": r.status, "content_type": r.content_type, "headers": [list(h) for h in r.headers],
            "body": r.body}


def refusal_json(r):
    return {"code": r.code, "message": r.message, "key": r.key, "reply": reply_json(r.reply)}


def format_json(f):
    return {"json": f.json, "cors": f.cors}


def failure_from(d):
    origin = {"INVALID_TASK": "input", "INVALID_KEY": "input", "INVALID_CONFIG": "input",
              "TRANSPORT_ERROR": "no_answer", "UNEXPECTED_REPLY": "no_answer", "DEADLINE_EXCEEDED": "no_answer"}
    return Failure(code=d["code"], failure_class=FailureClass(d["class"]),
                   origin=FailureOrigin(origin.get(d["code"], "service")), message=d["message"],
                   retry_after_ms=d["retry_after_ms"], field=d["field"], task_id=d["task_id"])


def solution_from(d):
    (tag, text), = d["answer"].items()
    return Solution(answer=text, answer_json=json.loads(text) if tag == "json" else None,
                    is_structured=tag == "json", task_id=d["task_id"], type=None, user_agent=d["user_agent"],
                    submitted_at=d["submitted_at"], solved_at=d["solved_at"], elapsed_ms=d["elapsed_ms"],
                    polls=d["polls"], attempts=d["attempts"], expires_at=d["expires_at"])


def state_from(s):
    if s == "pending":
        return PENDING
    if s == "not_found":
        return NOT_FOUND
    if "solved" in s:
        return solution_from(s["solved"])
    return failure_from(s["failed"])


def run_case(engine, call):
    """A case's result, as vectors/src/endpoint.rs `run_case` writes it."""
    (kind, c), = call.items()
    if kind == "read":
        path = {"in_php": "in.php", "res_php": "res.php"}[c["path"]]
        uploads = [(u["name"], base64.b64decode(u["base64"])) for u in c.get("uploads", [])]
        got = engine.read_request(path, [tuple(p) for p in c["params"]], uploads)
        if isinstance(got, SubmitRequest):
            return {"submit": {"key": got.key, "task": json.loads(got.task_json), "task_type": got.task_type,
                               "format": format_json(got.format)}}
        if isinstance(got, ResRequest):
            action, payload = got.action
            action_json = action if payload is None else {action: payload}
            return {"res": {"key": got.key, "action": action_json, "format": format_json(got.format)}}
        assert isinstance(got, Refusal)
        return {"refusal": refusal_json(got)}
    if kind == "read_format":
        path = {"in_php": "in.php", "res_php": "res.php"}[c["path"]]
        return {"format": format_json(engine.read_format(path, [tuple(p) for p in c["params"]]))}
    if kind == "submitted":
        return {"reply": reply_json(engine.render_submitted(fmt(c["format"]), c["task_type"], c["id"]))}
    if kind == "state":
        return {"reply": reply_json(engine.render_state(fmt(c["format"]), c["task_type"], state_from(c["state"])))}
    if kind == "states":
        return {"reply": reply_json(engine.render_states(fmt(c["format"]), [state_from(s) for s in c["states"]]))}
    if kind == "threads":
        info = ThreadsInfo(threads=c["threads"], working_threads=c["working_threads"],
                           free=max(c["threads"] - c["working_threads"], 0))
        return {"reply": reply_json(engine.render_threads(fmt(c["format"]), info))}
    if kind == "balance":
        return {"reply": reply_json(engine.render_balance(fmt(c["format"]), c["balance"]))}
    if kind == "reported":
        return {"reply": reply_json(engine.render_reported(fmt(c["format"])))}
    if kind == "failure":
        return {"reply": reply_json(engine.render_failure(fmt(c["format"]), failure_from(c["failure"])))}
    if kind == "refusal":
        f = None if c["format"] is None else fmt(c["format"])
        return {"refusal": refusal_json(engine.render_refusal(f, c["refusal"]))}
    if kind == "report":
        got = engine.report_request(c["key"], c["task_id"], c["good"], Config.from_dict(c.get("config") or {}))
        if isinstance(got, Failure):
            return {"rejected": got.to_dict()}
        return {"send": {"id": got.id, "kind": got.kind.value, "at": got.at, "url": got.url,
                         "content_type": got.content_type, "timeout_ms": got.timeout_ms, "body": got.body}}
    assert kind == "parse_report"
    (how, detail), = c["reply"].items()
    if how == "reply":
        reply = Response(detail["status"], detail["body"])
    else:
        reply = TransportErrorKind(detail)
    failure = engine.parse_report(reply)
    return {"recorded": True} if failure is None else {"failed": failure.to_dict()}


def test_the_endpoint_vectors_are_there():
    assert len(FILES) >= 4 and len(CASES) >= 100, f"found {len(CASES)} cases in {len(FILES)} files"


@pytest.fixture(scope="module")
def engine():
    return Engine()


@pytest.mark.parametrize("name,case", CASES, ids=[f"{n}/{c['about']}" for n, c in CASES])
def test_endpoint_case_gives_its_result(engine, name, case):
    assert case["result"], f"{name}: {case['about']} has no stored result"
    assert canonical(run_case(engine, case["call"])) == canonical(case["result"]), f"{name}: {case['about']}"


def test_a_changed_request_changes_the_result(engine):
    """The comparison can fail: the same request without its pageurl is refused."""
    name, case = next((n, c) for n, c in CASES if c["about"] == "SDK turnstile")
    params = [p for p in case["call"]["read"]["params"] if p[0] != "pageurl"]
    result = run_case(engine, {"read": {"path": "in_php", "params": params}})
    assert result["refusal"]["code"] == "ERROR_PAGEURL"
    assert canonical(result) != canonical(case["result"])


def test_an_unknown_key_is_answered_in_the_format_asked(engine):
    """A refused request's unknown key: the refusal in the request's own format (`read_format`)."""
    params = [("key", "Tok3nFromTheEdgeForAClient000001"), ("method", "turnstile"), ("json", "1")]
    assert engine.read_request("in.php", params).code == "ERROR_GOOGLEKEY"
    fmt = engine.read_format("in.php", params)
    assert (fmt.json, fmt.cors) == (True, False)
    reply = engine.render_refusal(fmt, "unknown_key").reply
    assert reply.body.startswith('{"status":0,"request":"ERROR_KEY_DOES_NOT_EXIST"')
    assert not engine.read_format("res.php", [("json", "2")]).json
