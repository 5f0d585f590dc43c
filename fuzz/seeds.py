#!/usr/bin/env python3
"""Writes fuzz/seeds/{task,reply,ops}/ from the golden vectors (testdata/vectors/*.json),
fuzz/seeds/endpoint_request/ from the endpoint vectors' requests (testdata/vectors/endpoint), and
fuzz/seeds/edge_request/ from hand-written requests, well-formed and malformed.
fuzz/seeds/restore/ is written by `cargo run -p sim --example snapshot_seeds` (real snapshots
taken at every step of every vector's replay). Each run first empties the directories it writes,
so they hold exactly what the vectors give (scripts/test.sh checks they are committed so).
See docs/testing.md, "Fuzzing"."""
import base64, glob, hashlib, json, os, re, struct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fuzz", "seeds")
TASKS = re.findall(r'\(\s*"(type_[^"]+)"', open(os.path.join(ROOT, "fuzz/src/tasks.rs")).read())
TYPE_INDEX = {}
for i, name in enumerate(TASKS):
    ty = name[len("type_"):]
    for t in (ty, ty.replace("_invisible", "").replace("_compatible_keys", "").replace("_click_text", "").replace("_multipart", "").replace("_sync", "")):
        TYPE_INDEX.setdefault(t, i)

for target in ("task", "reply", "ops", "edge_request", "endpoint_request"):
    d = os.path.join(OUT, target)
    for name in os.listdir(d) if os.path.isdir(d) else []:
        os.remove(os.path.join(d, name))

def write(target, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, hashlib.sha1(data).hexdigest()[:16]), "wb").write(data)

def body_of(r):
    return r["body"].encode() if "body" in r else base64.b64decode(r["body_base64"])

def status_bytes(status):
    return bytes([0]) if status == 200 else bytes([255]) + struct.pack("<H", status)

for path in sorted(glob.glob(os.path.join(ROOT, "testdata/vectors/*.json"))):
    v = json.load(open(path))
    task = json.dumps(v["task"], separators=(",", ":"), ensure_ascii=False).encode()
    write("task", task)
    ti = TYPE_INDEX.get(v["task"].get("type"), 0)
    # reply: [task, step, status lo, status hi, body]
    kind = None
    ops = bytearray([ti, 0, 0, 0, 0])  # task, flags, then poll_output(now)
    for ev in v.get("transcript", []):
        if "send" in ev:
            kind = ev["send"]["kind"]
        elif "reply" in ev and kind is not None:
            r = ev["reply"]
            step = {"submit": 0, "poll": 1, "threads_info": 2}.get(kind, 0)
            body = body_of(r)
            write("reply", bytes([ti, step]) + struct.pack("<H", r["status"]) + body)
    # ops: reply (op 1) / transport (op 3) per script entry, in order; a host stall before an
    # entry is a poll later by its time (op 0).
    stalls = {s["send"]: s["until_ms"] for s in v.get("stall_before", [])}
    for n, entry in enumerate(v["script"]):
        if n in stalls:
            ops += bytes([0]) + struct.pack("<H", min(stalls[n] // 16, 65535))
        if entry == "silence":
            ops += bytes([3, 0, 0, 0])
        elif "reply" in entry:
            r = entry["reply"]
            body = body_of(r)[:255]
            ops += bytes([1]) + struct.pack("<H", min(r["after_ms"] // 16, 65535)) + status_bytes(r["status"])
            ops += bytes([0, len(body)]) + body
        else:
            t = entry["transport"]
            kind = {"timeout": 0, "connect": 1, "broken": 2}[t["error"]]
            ops += bytes([3]) + struct.pack("<H", min(t["after_ms"] // 16, 65535)) + bytes([kind])
    write("ops", bytes(ops))
    # ops with a learned model (flag 16): the recipe's solve times, polls as the table's 13 s
    # first wait and 5 s interval would need (a seed, not an exact replay).
    recipe = v.get("solve_times_recipe")
    if recipe:
        teach = [ms for _ in range(recipe["rounds"]) for ms in recipe["ready_ms"]][:95]
        model = bytes([len(teach)]) + b"".join(
            struct.pack("<H", min(ms // 16, 65535)) + bytes([1 + max(0, ms - 13000 + 4999) // 5000]) for ms in teach)
        write("ops", bytes([ti, 16]) + model + bytes(ops[2:]))

# edge_request: [path kind, query kind, auth kind, path len, query len, auth len] + path tail,
# query tail, token, Content-Length (kinds index the prefixes in fuzz/src/lib.rs).
ID = b"0123456789abcdef0123456789abcdef"
for path_kind, path, query_kind, query, auth_kind, token, length in [
    (5, ID, 1, b"25", 1, b"client-token-1234567", b"1024"),
    (5, ID.upper(), 0, b"", 2, b"client-token-1234567", b""),
    (5, ID[:31], 2, b"0", 1, b"", b"2097153"),
    (3, b"", 1, b"+5", 3, b"dXNlcjpwYXNz", b"+5"),
    (1, b"", 3, b"26", 0, b"Bearer", b"99999999999999999999999"),
    (0, b"/v1/solve/" + ID + b"/x", 1, b"007", 1, b"\xff\xfe", b" 12"),
    (4, b"", 0, b"wait=4&wait=5", 1, b"t", b"0"),
    (2, b"", 1, b"", 1, b"metrics-token", b"18446744073709551616"),
]:
    write("edge_request", bytes([path_kind, query_kind, auth_kind, len(path), len(query), len(token)]) + path + query + token + length)
print({d: len(os.listdir(os.path.join(OUT, d))) for d in sorted(os.listdir(OUT))})

# endpoint_request: [path (0 in.php, 1 res.php), upload (0 none, 1 `file`, 3 `other`), upload length
# lo, hi, upload bytes, then name\0value\0...] (fuzz/src/lib.rs), one per read case.
for path in sorted(glob.glob(os.path.join(ROOT, "testdata/vectors/endpoint/*.json"))):
    for case in json.load(open(path))["cases"]:
        read = case["call"].get("read")
        if read is None:
            continue
        data = bytearray([0 if read["path"] == "in_php" else 1])
        uploads = read.get("uploads", [])
        if uploads:
            file = base64.b64decode(uploads[0]["base64"])[:65535]
            data += bytes([1 if uploads[0]["name"] == "file" else 3]) + struct.pack("<H", len(file)) + file
        else:
            data += bytes([0])
        data += b"\0".join(part.encode() for pair in read["params"] for part in pair)
        write("endpoint_request", bytes(data))
