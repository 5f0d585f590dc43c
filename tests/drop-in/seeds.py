"""The seeds' own code through the edge: the two CaptchaAI guides in ../shared/seeds (the deferrable
Airflow operator; the Dagster resource and asset, and the Mage block) as their readers run it,
with only the one-line switch docs/drop-in.md gives (the CaptchaAI URL constants become the
edge's, the key an edge token), against the emulator.

Each file is cut from the guide's text at run time (between the line that introduces it and the
prose after it; the code must parse), so what runs is what the guide prints. The three run at
once, as three tools sharing one key would, through one real Spin edge with a client token each
over a 5-thread plan, by the commands the guides give:

- Airflow: ``airflow connections add captchaai --conn-password <token>``, ``airflow pools set
  captchaai 5 ... --include-deferred``, the example DAG's variables, then ``airflow dags test
  portal_export 2026-09-28`` (the trigger runs in line, as the guide says).
- Dagster: ``dagster instance concurrency set captchaai 2``, then ``dagster asset materialize -m
  portal_pipeline.definitions --select portal_records --partition 2026-09-01``, with
  ``CAPTCHAAI_API_KEY`` the token and ``PORTAL_BASE_URL`` the test's portal.
- Mage: the block as a data loader of a fresh ``mage init`` project, the token in the Mage
  secret ``CAPTCHAAI_API_KEY``, run by ``mage run``.

A small portal (the partner site the guides export from) serves the export pages with a
reCAPTCHA sitekey and takes the form posts; every token it receives must be an answer the
emulator gave, once. The frameworks come from the integration venvs (target/venv-airflow,
-dagster, -mage, made by bindings/python/integrations.sh).
"""

from __future__ import annotations

import ast
import concurrent.futures
import json
import os
import re
import sqlite3
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

SITEKEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
RUN_TIMEOUT_S = 420
FRAMEWORKS = {"airflow": "airflow", "dagster": "dagster", "mage": "mage"}


# ---- the guides' code -----------------------------------------------------------------------

#: (file, guide marker, the line before the code, the prose line after it, the one-line switch:
#: constant -> the edge's value). The switch is docs/drop-in.md's "Switching a client" row.
FILES = [
    ("airflow/plugins/captchaai_trigger.py", "A Deferrable Airflow Operator",
     "Save this as plugins/captchaai_trigger.py:", "serialize() returns", {"RES_URL": "/res.php"}),
    ("airflow/plugins/captchaai_operator.py", "A Deferrable Airflow Operator",
     "Save this as plugins/captchaai_operator.py:", "What the less obvious lines do:", {"IN_URL": "/in.php"}),
    ("airflow/dags/portal_export.py", "A Deferrable Airflow Operator",
     "Save this as dags/portal_export.py.", "Since Airflow 3.2", {}),
    ("dagster/portal_pipeline/captchaai.py", "# portal_pipeline/captchaai.py",
     "# portal_pipeline/captchaai.py", "Three details in it", {"API": ""}),
    ("dagster/portal_pipeline/portal.py", "# portal_pipeline/portal.py",
     "# portal_pipeline/portal.py", "The token goes into the form", {}),
    ("dagster/portal_pipeline/assets.py", "# portal_pipeline/assets.py",
     "# portal_pipeline/assets.py", "Each exception class reaches", {}),
    ("dagster/portal_pipeline/definitions.py", "# portal_pipeline/definitions.py",
     "# portal_pipeline/definitions.py", "The job selects the asset", {}),
    ("mage/load_portal_records.py", "The same pattern in Mage",
     "A Mage data loader block reads the key", "Retries and concurrency go in", {"API": "", "PORTAL": "portal"}),
]


def guide_code(seeds: Path, marker: str, before: str, after: str) -> str:
    """The code between the line starting with `before` and the first line starting with `after`
    in the guide holding `marker`; it must parse as Python."""
    texts = [p.read_text(encoding="utf-8") for p in sorted(seeds.glob("*.txt"))]
    [text] = [t for t in texts if marker in t]
    lines = text.splitlines()
    starts = [i + 1 for i, line in enumerate(lines) if line.startswith(before)]
    assert len(starts) == 1, f"the guide has {len(starts)} lines starting {before!r}"
    ends = [i for i in range(starts[0], len(lines)) if lines[i].startswith(after)]
    assert ends, f"no line starting {after!r} after {before!r}"
    start, end = starts[0], ends[0]
    code = "\n".join(lines[start:end]).strip("\n") + "\n"
    ast.parse(code)
    return code


def switch(code: str, constants: dict[str, str], edge: str, portal: str) -> str:
    """The guide's code with each named module constant (`NAME = "https://..."`) pointed at the
    edge (a path under it) or, for "portal", at the test's portal: exactly one line each."""
    for name, target in constants.items():
        url = portal if target == "portal" else edge + target
        code, n = re.subn(rf"""^{name} = (["'])https://[^"']+\1$""", f"{name} = {json.dumps(url)}", code, flags=re.M)
        assert n == 1, f"{name}: expected one https constant, replaced {n}"
    return code


def write_projects(seeds: Path, root: Path, edge: str, portal: str) -> None:
    for rel, marker, before, after, constants in FILES:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(switch(guide_code(seeds, marker, before, after), constants, edge, portal))
    (root / "dagster/portal_pipeline/__init__.py").write_text("")


# ---- the portal -----------------------------------------------------------------------------

class Portal:
    """The partner portal: export pages carrying a reCAPTCHA sitekey, and form posts that must
    carry a token. Records every posted token with its region."""

    def __init__(self) -> None:
        self.posts: list[dict[str, str]] = []
        portal = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def reply(self, body: bytes, content_type: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                page = f'<form method="post"><div class="g-recaptcha" data-sitekey="{SITEKEY}"></div></form>'
                self.reply(page.encode(), "text/html")

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"])).decode()
                form = {k: v[0] for k, v in parse_qs(body).items()}
                token = form.get("g-recaptcha-response", "")
                portal.posts.append({"path": urlsplit(self.path).path, "token": token,
                                     "region": form.get("region", ""), "day": form.get("day", form.get("date", ""))})
                if not token:
                    self.send_error(403, "no captcha token")
                elif urlsplit(self.path).path == "/airflow-export":  # the Airflow DAG saves a CSV
                    self.reply(f"day,rows\n{form.get('date')},1\n".encode(), "text/csv")
                else:  # the Dagster asset and the Mage block read JSON records
                    records = [{"day": form.get("day"), "region": form.get("region"), "n": 1}]
                    self.reply(json.dumps({"records": records}).encode(), "application/json")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


# ---- the three runs -------------------------------------------------------------------------

def run(argv: list[str], env: dict, cwd: Path, log: Path) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    with log.open("a") as fh:
        fh.write(f"$ {' '.join(argv)}\n{done.stdout}\n{done.stderr}\n")
    if done.returncode != 0:
        tail = f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        raise RuntimeError(f"{argv[0]} {argv[1]} exited {done.returncode}:\n{tail}")
    return done


def airflow(venv: Path, root: Path, token: str, portal: Portal, log: Path) -> str:
    home = root / "airflow"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(AIRFLOW_HOME=str(home), AIRFLOW__CORE__LOAD_EXAMPLES="False",
               PATH=f"{venv / 'bin'}{os.pathsep}{env['PATH']}")
    bin_ = venv / "bin" / "airflow"
    run([str(bin_), "db", "migrate"], env, home, log)
    # The connection as an environment variable, one of the secrets backends the guide says the
    # key resolves through: `airflow dags test` runs the trigger in line under a supervisor whose
    # async lookup (the guide's `aget_connection`) reads no connection stored in the metadata
    # database (`airflow connections add`), in Airflow 3.3.2 (docs/drop-in.md).
    env["AIRFLOW_CONN_CAPTCHAAI"] = json.dumps({"conn_type": "generic", "password": token})
    run([str(bin_), "pools", "set", "captchaai", "5", "CaptchaAI BASIC plan threads", "--include-deferred"],
        env, home, log)  # fmt: skip
    export_root = root / "exports"
    export_root.mkdir()
    for name, value in (("portal_export_url", f"{portal.url}/airflow-export"), ("portal_export_sitekey", SITEKEY),
                        ("export_root", f"file://{export_root}")):
        run([str(bin_), "variables", "set", name, value], env, home, log)
    done = run([str(bin_), "dags", "test", "portal_export", "2026-09-28"], env, home, log)
    with sqlite3.connect(home / "airflow.db") as db:
        states = db.execute("SELECT task_id, state FROM task_instance WHERE dag_id = 'portal_export'").fetchall()
    assert sorted(states) == [("check_export", "success"), ("download_export", "success")], states
    [export] = export_root.glob("portal-*.csv")
    assert export.read_text().count("\n") == 2, export.read_text()
    assert "running trigger in line" in done.stdout + done.stderr, "the solve deferred to the trigger"
    return f"DAG run success (download_export deferred and resumed, check_export read {export.name})"


def dagster(venv: Path, root: Path, token: str, portal: Portal, log: Path) -> str:
    work, home = root / "dagster", root / "dagster_home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DAGSTER")}
    env.update(DAGSTER_HOME=str(home), CAPTCHAAI_API_KEY=token, PORTAL_BASE_URL=portal.url,
               PORTAL_DATA_DIR=str(root / "dagster-data"), PATH=f"{venv / 'bin'}{os.pathsep}{env['PATH']}")
    bin_ = venv / "bin" / "dagster"
    run([str(bin_), "instance", "concurrency", "set", "captchaai", "2"], env, work, log)
    run([str(bin_), "asset", "materialize", "-m", "portal_pipeline.definitions", "--select", "portal_records",
         "--partition", "2026-09-01"], env, work, log)  # fmt: skip
    rows = (root / "dagster-data" / "portal_records_2026-09-01.jsonl").read_text().splitlines()
    assert sorted(json.loads(r)["region"] for r in rows) == ["east", "north", "south", "west"], rows
    return "materialized portal_records 2026-09-01 (4 regions, 2 at a time; the asset check ran)"


MAGE_PIPELINE = """\
blocks:
- downstream_blocks: [save_rows]
  name: load_portal_records
  type: data_loader
  language: python
  upstream_blocks: []
  uuid: load_portal_records
- downstream_blocks: []
  name: save_rows
  type: data_exporter
  language: python
  upstream_blocks: [load_portal_records]
  uuid: save_rows
name: portal_export
type: python
uuid: portal_export
"""
MAGE_EXPORTER = """\
if 'data_exporter' not in globals():
    from mage_ai.data_preparation.decorators import data_exporter


@data_exporter
def save_rows(df, *args, **kwargs):
    import json
    with open(kwargs['rows_path'], 'w') as fh:
        json.dump(df if isinstance(df, list) else df.to_dict(orient='records'), fh)
"""
# The Mage secret, as the Secrets page stores it (Mage's own API).
MAGE_SET_SECRET = """\
import sys
from mage_ai.settings.repo import set_repo_path
set_repo_path(sys.argv[1])
from mage_ai.orchestration.db.database_manager import database_manager
database_manager.run_migrations()
from mage_ai.orchestration.db import db_connection
db_connection.start_session()
from mage_ai.data_preparation.shared.secrets import create_secret
create_secret('CAPTCHAAI_API_KEY', sys.argv[2])
"""


def mage(venv: Path, root: Path, token: str, portal: Portal, log: Path) -> str:
    env = {**os.environ, "MAGE_DATA_DIR": str(root / "mage_data")}
    bin_ = venv / "bin" / "mage"
    run([str(bin_), "init", "proj"], env, root, log)
    proj = root / "proj"
    block = (root / "mage" / "load_portal_records.py").read_text()
    (proj / "data_loaders" / "load_portal_records.py").write_text(block)
    (proj / "data_exporters" / "save_rows.py").write_text(MAGE_EXPORTER)
    pipeline = proj / "pipelines" / "portal_export"
    pipeline.mkdir()
    (pipeline / "__init__.py").write_text("")
    (pipeline / "metadata.yaml").write_text(MAGE_PIPELINE)
    run([str(venv / "bin" / "python"), "-c", MAGE_SET_SECRET, str(proj), token], env, root, log)
    rows_path = root / "mage-rows.json"
    run([str(bin_), "run", str(proj), "portal_export", "--runtime-vars", json.dumps({"rows_path": str(rows_path)})],
        env, root, log)  # fmt: skip
    rows = json.loads(rows_path.read_text())
    assert [row["region"] for row in rows] == ["north", "south", "east", "west"], rows
    return "pipeline run: 4 regions, one at a time, rows saved"


RUNS = {"airflow": airflow, "dagster": dagster, "mage": mage}


def venvs(root: Path) -> dict[str, Path]:
    """The framework venvs present (target/venv-<framework>, made by integrations.sh)."""
    return {fw: root / "target" / f"venv-{fw}" for fw in RUNS
            if (root / "target" / f"venv-{fw}" / "bin" / FRAMEWORKS[fw]).exists()}


def run_all(found: dict[str, Path], seeds: Path, work_dir: Path, edge_url: str, tokens: dict[str, str],
            say, fail) -> list[dict[str, str]]:
    """Runs every framework in `found` at once against the edge; returns the portal's posts."""
    root = work_dir / "seeds"
    root.mkdir()
    portal = Portal()
    try:
        write_projects(seeds, root, edge_url, portal.url)
        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(found)) as pool:
            jobs = {fw: pool.submit(RUNS[fw], venv, root, tokens[fw], portal, work_dir / f"seeds-{fw}.log")
                    for fw, venv in found.items()}
            for fw, job in jobs.items():
                try:
                    say(f"[seeds] ok   {fw}: {job.result()}")
                except Exception as e:  # noqa: BLE001
                    fail(f"[seeds] {fw}: {type(e).__name__}: {e}")
        say(f"[seeds] {', '.join(found)} at once in {time.monotonic() - started:.0f} s")
        return portal.posts
    finally:
        portal.close()
