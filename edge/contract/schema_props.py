"""Property test: every task valid against its type's schema in edge/openapi.json is accepted by
the engine's validation.

For each `Task_<type>` component, schemathesis' own generator (the one the contract run uses,
positive mode, through `POST /v1/solve` with the body schema narrowed to that type) draws
schema-valid task JSON with hypothesis; each is checked against the schema with jsonschema
(Draft 7, the OpenAPI 3.0 schema converted) and then sent to the engine's own validation
(`cargo xtask openapi --validate-tasks`: `Task::from_json`, one task per line), which must
answer `ok`. A refusal fails the test with the shrunk task and the engine's message.

Run: target/contract-venv/bin/python edge/contract/schema_props.py [EXAMPLES_PER_TYPE]
(`OPENAPI=path` checks another copy of the document.)
(edge/contract/run.sh creates the venv). Exits non-zero on any refusal.
"""

import copy
import json
import os
import subprocess
import sys
import time

import jsonschema
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def to_json_schema(schema):
    """OpenAPI 3.0 schema -> JSON Schema: `nullable: true` adds null to `type`."""
    if isinstance(schema, list):
        return [to_json_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: to_json_schema(v) for k, v in schema.items() if k not in ("nullable", "discriminator")}
    if schema.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    return out


class Engine:
    """The engine's task validation, as a long-running process answering one line per task."""

    def __init__(self):
        self.proc = subprocess.Popen(
            [os.environ.get("CARGO", "cargo"), "xtask", "openapi", "--validate-tasks"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )

    def verdict(self, task):
        # ensure_ascii keeps the line free of raw U+2028 and other line breaks.
        self.proc.stdin.write(json.dumps(task, ensure_ascii=True) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the validator exited")
        return line.rstrip("\n")

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def strategy_for(document, name):
    """Schemathesis' positive bodies for `POST /v1/solve` with the body narrowed to one type."""
    doc = copy.deepcopy(document)
    body = doc["paths"]["/v1/solve"]["post"]["requestBody"]["content"]["application/json"]
    body["schema"] = {"$ref": f"#/components/schemas/Task_{name}"}
    operation = schemathesis.openapi.from_dict(doc)["/v1/solve"]["POST"]
    return operation.as_strategy(generation_mode=GenerationMode.POSITIVE).map(lambda case: case.body)


def check_type(engine, document, name, schema, examples, counts):
    validator = jsonschema.Draft7Validator(schema)

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )
    @given(strategy_for(document, name))
    def accepted(task):
        validator.validate(task)
        verdict = engine.verdict(task)
        assert verdict == "ok", f"schema-valid {name} task refused: {verdict}\n{json.dumps(task)[:2000]}"
        counts[name] = counts.get(name, 0) + 1

    accepted()


def main():
    examples = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    path = os.environ.get("OPENAPI", os.path.join(ROOT, "edge", "openapi.json"))
    with open(path, encoding="utf-8") as f:
        document = json.load(f)
    schemas = document["components"]["schemas"]
    names = [n for n in schemas["Task"]["discriminator"]["mapping"]]
    engine = Engine()
    counts = {}
    failed = []
    started = time.monotonic()
    for name in names:
        schema = to_json_schema(copy.deepcopy(schemas[f"Task_{name}"]))
        try:
            check_type(engine, document, name, schema, examples, counts)
            print(f"schema_props: {name}: {counts.get(name, 0)} schema-valid tasks, all accepted", flush=True)
        except AssertionError as e:
            failed.append(name)
            print(f"schema_props: {name}: FAILED\n{e}", flush=True)
    engine.close()
    total = sum(counts.values())
    print(
        f"schema_props: {len(names) - len(failed)} passed, {len(failed)} failed "
        f"({total} tasks checked in {time.monotonic() - started:.1f} s)"
    )
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
