"""The README's Airflow route exactly as a user takes it, in real time against the emulator: a
fresh Airflow home with the example Dag (examples/airflow_dag.py) in its Dags folder, the
README's setup block run by bash (``airflow db migrate``, ``airflow connections add`` with the key
in the connection's password, stored in the metadata database, and ``airflow pools set`` sized by
``plan_threads()``), then both runs the README names: ``python airflow_dag.py`` in the Dags folder
and ``airflow dags test portal_logins``. Each login is submitted by the worker and awaited by the
trigger, which reads the connection from the database too. Needs apache-airflow-core
(target/venv-airflow, made by integrations.sh)."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import required

INSTALL = "run `bindings/python/integrations.sh airflow` (it makes target/venv-airflow and runs this file there)"
required.module("airflow.sdk", INSTALL)

from emulated import EXAMPLES, KEY, THREADS  # noqa: E402

README = EXAMPLES.parent / "README.md"
BIN = Path(sys.executable).parent


def readme_setup_block() -> str:
    """The sh block after "Set up the metadata database, the connection and the pool once:" in the package README."""
    text = README.read_text(encoding="utf-8")
    match = re.search(r"Set up the metadata database, the connection and the pool once:\n\n```sh\n(.*?)```", text, re.S)
    assert match, "the README's Airflow setup block"
    return match.group(1)


@pytest.fixture
def airflow_home(tmp_path, example_emulator):
    """A fresh Airflow home with the example in its Dags folder, and the environment of a user's
    shell there: the venv's commands first on PATH, CAPTCHAAI_KEY, and CAPTCHAAI_BASE_URL for the
    emulator (the README's block passes it to the connection). Nothing else of Airflow's."""
    home = tmp_path / "airflow"
    (home / "dags").mkdir(parents=True)
    shutil.copy(EXAMPLES / "airflow_dag.py", home / "dags")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(AIRFLOW_HOME=str(home), AIRFLOW__CORE__LOAD_EXAMPLES="False", CAPTCHAAI_KEY=KEY,
               CAPTCHAAI_BASE_URL=example_emulator.base_url, PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")
    return home, env


def run(command: list[str], env: dict, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{command} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def query(home: Path, sql: str) -> list:
    with sqlite3.connect(home / "airflow.db") as db:
        return db.execute(sql).fetchall()


def test_the_readme_route_runs_the_example_dag_with_a_connection_in_the_database(airflow_home, example_emulator,
                                                                                tmp_path):
    home, env = airflow_home
    # Airflow logs warnings to stdout; the package's one warning (here a wasmtime its fast path is
    # not tested with, pretended by a sitecustomize) goes to stderr, so the pool command's
    # $(python -c '...plan_threads() - 1') still reads only the number.
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "from importlib import metadata\n"
        "real = metadata.version\n"
        "metadata.version = lambda name: '48.0.0' if name == 'wasmtime' else real(name)\n")
    done = run(["bash", "-euo", "pipefail", "-c", readme_setup_block()], {**env, "PYTHONPATH": str(site)}, home)
    assert "CallPathWarning" in done.stderr and "wasmtime 48.0.0" in done.stderr
    [(password,)] = query(home, "SELECT password FROM connection WHERE conn_id = 'captchaai'")
    assert password, "the key is stored in the metadata database (Airflow encrypts it with its Fernet key)"
    assert query(home, "SELECT slots, include_deferred FROM slot_pool WHERE pool = 'captchaai'") == [(THREADS - 1, 1)]

    runs = [run([str(BIN / "python"), "airflow_dag.py"], env, home / "dags"),
            run([str(BIN / "airflow"), "dags", "test", "portal_logins"], env, home)]
    for done in runs:  # the report task's lines: each login's XCom reached it
        assert re.search(r"north: CaptchaAI task \d+ in \d+ ms", done.stdout), done.stdout[-3000:]
        assert re.search(r"south: CaptchaAI task \d+ in \d+ ms", done.stdout), done.stdout[-3000:]
    assert query(home, "SELECT state FROM dag_run WHERE dag_id = 'portal_logins'") == [("success",), ("success",)]
    logins = query(home, "SELECT task_id, state, try_number FROM task_instance WHERE dag_id = 'portal_logins' "
                         "AND task_id LIKE 'log_in_%'")
    assert sorted(logins) == [("log_in_north", "success", 1)] * 2 + [("log_in_south", "success", 1)] * 2
    xcoms = query(home, "SELECT value FROM xcom WHERE dag_id = 'portal_logins' AND key = 'return_value' "
                        "AND task_id LIKE 'log_in_%'")
    assert len(xcoms) == 4 and KEY not in json.dumps([str(x) for x in xcoms])
    # The pool's one threadsinfo, then each login submitted once (two per run) by the worker and
    # polled by its trigger.
    assert example_emulator.actions().count("threadsinfo") == 1
    assert example_emulator.paths().count("/in.php") == 4
