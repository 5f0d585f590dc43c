"""The golden-vector replayer (testdata/vectors/README.md), through the Python layer.

A line-by-line port of ``vectors::replay`` in vectors/src/lib.rs: same events, same order, same
values, so the transcript must equal the stored one exactly. A vector with ``solve_times`` creates
its solve with that model (``solve_times_from_text``, then ``create`` with it), and
``replay_full`` also gives the model's text after it observed the solution.
"""

from __future__ import annotations

import base64
from typing import Any

from captchaai_engine import (
    Config,
    Engine,
    EngineMisuse,
    Failed,
    Failure,
    Response,
    Send,
    SnapshotError,
    Solved,
    SolveTimesError,
)
from captchaai_engine.types import TransportErrorKind

MAX_EVENTS = 1000


def event(at: int, kind: str, body: Any) -> dict[str, Any]:
    return {"at": at, kind: body}


def output_event(at: int, output: Any) -> dict[str, Any]:
    if isinstance(output, Send):
        r = output.request
        send: dict[str, Any] = {
            "id": r.id,
            "kind": r.kind.value,
            "at": r.at,
            "url": r.url,
            "content_type": r.content_type,
            "timeout_ms": r.timeout_ms,
        }
        if isinstance(r.body, str):
            send["body"] = r.body
        else:
            send["body_base64"] = base64.b64encode(r.body).decode("ascii")
        return event(at, "send", send)
    if isinstance(output, Solved):
        s = output.solution
        return event(at, "solved", {
            "answer": {"json" if s.is_structured else "text": s.answer},
            "user_agent": s.user_agent,
            "task_id": s.task_id,
            "submitted_at": s.submitted_at,
            "solved_at": s.solved_at,
            "elapsed_ms": s.elapsed_ms,
            "polls": s.polls,
            "attempts": s.attempts,
            "expires_at": s.expires_at,
        })
    assert isinstance(output, Failed)
    return event(at, "failed", output.failure.to_dict())


def replay(engine: Engine, vector: dict[str, Any]) -> list[dict[str, Any]]:
    return replay_full(engine, vector)[0]


def replay_full(engine: Engine, vector: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    """The transcript, and with ``solve_times`` the model's text after the replay (having
    observed the solution when the solve was solved; else unchanged)."""
    text = vector.get("solve_times")
    times = None
    if text is not None:
        try:
            times = engine.solve_times_from_text(text)
        except SolveTimesError as e:
            return [event(vector.get("start_ms", 0), "error", f"solve_times refused: {e}")], None
    solved: list[Any] = []
    transcript = _replay(engine, vector, times, solved)
    if times is None:
        return transcript, None
    if solved:
        engine.observe(times, solved[0])
    return transcript, engine.solve_times_text(times)


def _replay(engine: Engine, vector: dict[str, Any], times: Any, solved: list[Any]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    now = vector.get("start_ms", 0)
    key = vector["key"]
    try:
        config = Config.from_dict(vector.get("config", {}))
    except (TypeError, ValueError) as e:
        return [event(now, "error", f"bad config: {e}")]
    created = engine.create(vector["task"], key, config, now, times)
    if isinstance(created, Failure):
        return [event(now, "rejected", created.to_dict())]
    solve = created
    script = iter(vector["script"])
    restore_before = vector.get("restore_before", [])
    stalls = {stall["send"]: stall["until_ms"] for stall in vector.get("stall_before", [])}
    try:
        output = engine.poll_output(solve, now)
    except EngineMisuse as m:
        return [event(now, "misuse", m.kind)]
    sends = 0
    while len(events) < MAX_EVENTS:
        if not isinstance(output, Send):
            events.append(output_event(now, output))
            try:
                again = engine.poll_output(solve, now + 1000)
            except EngineMisuse:
                again = None
            if again != output:
                events.append(event(now + 1000, "error", "terminal output was not sticky"))
            if isinstance(output, Solved):
                solved.append(output.solution)
            return events
        request = output.request
        now = max(now, request.at)
        stalled = sends in stalls
        if stalled:
            now = max(now, stalls[sends])
            events.append(event(now, "stalled", True))
        restore = sends in restore_before
        if restore:
            snapshot = engine.snapshot(solve)
            try:
                restored = engine.restore(snapshot, key)
            except SnapshotError as e:
                events.append(event(now, "error", f"restore failed: {e}"))
                return events
            if restored.task_type != solve.task_type:
                events.append(event(now, "error", f"restored as {restored.task_type}, not {solve.task_type}"))
            engine.drop(solve)
            solve = restored
            events.append(event(now, "restored", True))
        if stalled or restore:
            try:
                again = engine.poll_output(solve, now)
            except EngineMisuse as m:
                events.append(event(now, "misuse", m.kind))
                return events
            if not isinstance(again, Send):
                output = again
                continue
            request = again.request
        sends += 1
        events.append(output_event(now, Send(request)))
        entry = next(script, None)
        try:
            if entry is None:
                events.append(event(now, "error", "script exhausted"))
                return events
            if entry == "silence":
                now += request.timeout_ms
                events.append(event(now, "transport", {"id": request.id, "error": "timeout"}))
                output = engine.handle_transport_error(solve, now, request.id, TransportErrorKind.TIMEOUT)
            elif "reply" in entry:
                reply = entry["reply"]
                if ("body" in reply) == ("body_base64" in reply):
                    events.append(event(now, "error", "a reply needs exactly one of `body` and `body_base64`"))
                    return events
                raw = reply["body"].encode("utf-8") if "body" in reply else base64.b64decode(reply["body_base64"])
                now += reply["after_ms"]
                fed: dict[str, Any] = {"id": request.id, "status": reply["status"]}
                if "body" in reply:
                    fed["body"] = reply["body"]
                else:
                    fed["body_base64"] = reply["body_base64"]
                events.append(event(now, "reply", fed))
                output = engine.handle_response(solve, now, request.id, Response.from_bytes(reply["status"], raw))
            elif "transport" in entry:
                transport = entry["transport"]
                try:
                    kind = TransportErrorKind(transport["error"])
                except ValueError:
                    events.append(event(now, "error", f"unknown transport error {transport['error']}"))
                    return events
                now += transport["after_ms"]
                events.append(event(now, "transport", {"id": request.id, "error": kind.value}))
                output = engine.handle_transport_error(solve, now, request.id, kind)
            else:
                events.append(event(now, "error", f"unknown script entry {entry!r}"))
                return events
        except EngineMisuse as m:
            events.append(event(now, "misuse", m.kind))
            return events
    events.append(event(now, "error", "too many events"))
    return events
