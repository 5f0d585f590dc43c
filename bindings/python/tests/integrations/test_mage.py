"""Mage: the shipped data-loader block in a real Mage project, run by `mage run` against the
emulator, with the key in a Mage secret. Needs mage-ai (target/venv-mage, made by
integrations.sh)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import required

INSTALL = "run `bindings/python/integrations.sh mage` (it makes target/venv-mage and runs this file there)"
required.module("mage_ai", INSTALL)

from captchaai_engine.integrations.mage import write_data_loader  # noqa: E402

from emulated import KEY, UNKNOWN_KEY, recaptcha_task, turnstile_task  # noqa: E402

MAGE = Path(sys.executable).with_name("mage")
RUN_TIMEOUT_S = 240

EXPORTER = '''\
if 'data_exporter' not in globals():
    from mage_ai.data_preparation.decorators import data_exporter


@data_exporter
def save_rows(df, *args, **kwargs):
    df.to_json(kwargs['rows_path'], orient='records')
'''

PIPELINE = '''\
blocks:
- downstream_blocks: [save_rows]
  name: load_with_captchaai
  type: data_loader
  language: python
  upstream_blocks: []
  uuid: load_with_captchaai
- downstream_blocks: []
  name: save_rows
  type: data_exporter
  language: python
  upstream_blocks: [load_with_captchaai]
  uuid: save_rows
name: captcha_pipeline
type: python
uuid: captcha_pipeline
'''

SET_SECRET = '''\
import sys
from mage_ai.settings.repo import set_repo_path
set_repo_path(sys.argv[1])
from mage_ai.orchestration.db.database_manager import database_manager
database_manager.run_migrations()
from mage_ai.orchestration.db import db_connection
db_connection.start_session()
from mage_ai.data_preparation.shared.secrets import create_secret, delete_secret
try:
    delete_secret('CAPTCHAAI_API_KEY')
except Exception:
    pass
if sys.argv[2]:
    create_secret('CAPTCHAAI_API_KEY', sys.argv[2])
'''


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A Mage project (``mage init``) with the shipped block and an exporter that saves its rows;
    Mage's data directory is inside the temporary folder."""
    root = tmp_path_factory.mktemp("mage")
    env = {**os.environ, "MAGE_DATA_DIR": str(root / "mage_data")}
    subprocess.run([str(MAGE), "init", "proj"], cwd=root, env=env, check=True, capture_output=True,
                   timeout=RUN_TIMEOUT_S)
    proj = root / "proj"
    write_data_loader(proj)
    (proj / "data_exporters" / "save_rows.py").write_text(EXPORTER)
    pipeline = proj / "pipelines" / "captcha_pipeline"
    pipeline.mkdir()
    (pipeline / "__init__.py").write_text("")
    (pipeline / "metadata.yaml").write_text(PIPELINE)
    return proj, env


def set_secret(project, key: str) -> None:
    proj, env = project
    subprocess.run([sys.executable, "-c", SET_SECRET, str(proj), key], env=env, check=True,
                   capture_output=True, timeout=RUN_TIMEOUT_S)


def mage_run(project, emulator, tasks, rows_path: Path) -> subprocess.CompletedProcess:
    proj, env = project
    variables = {"captchaai_config": {"base_url": emulator.base_url},
                 "captchaai_time_scale": emulator.time_scale,
                 "captchaai_tasks": tasks, "rows_path": str(rows_path)}
    return subprocess.run([str(MAGE), "run", str(proj), "captcha_pipeline", "--runtime-vars", json.dumps(variables)],
                          cwd=proj.parent, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)


def test_the_block_solves_each_task_in_a_pipeline_run(project, captchaai_emulator, tmp_path):
    set_secret(project, KEY)
    rows_path = tmp_path / "rows.json"
    run = mage_run(project, captchaai_emulator, [recaptcha_task(), turnstile_task()], rows_path)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    rows = json.loads(rows_path.read_text())
    assert [row["type"] for row in rows] == ["recaptcha_v2", "turnstile"]
    assert all(row["captcha_task_id"] and row["attempts"] == 1 for row in rows)
    assert captchaai_emulator.paths().count("/in.php") == 2
    assert KEY not in run.stdout + run.stderr + rows_path.read_text()


def test_a_permanent_failure_fails_the_block_with_its_class_and_code(project, captchaai_emulator, tmp_path):
    set_secret(project, UNKNOWN_KEY)
    rows_path = tmp_path / "rows.json"
    run = mage_run(project, captchaai_emulator, [recaptcha_task()], rows_path)
    output = run.stdout + run.stderr
    assert run.returncode != 0 and not rows_path.exists()
    assert "PermanentError" in output and "ERROR_KEY_DOES_NOT_EXIST" in output
    assert UNKNOWN_KEY not in output


def test_a_missing_secret_is_named(project, captchaai_emulator, tmp_path):
    set_secret(project, "")
    run = mage_run(project, captchaai_emulator, [recaptcha_task()], tmp_path / "rows.json")
    assert run.returncode != 0
    assert "MissingSecret" in run.stdout + run.stderr and "CAPTCHAAI_API_KEY" in run.stdout + run.stderr
    assert captchaai_emulator.paths() == []


def test_write_data_loader_refuses_to_overwrite(project):
    proj, _ = project
    with pytest.raises(FileExistsError):
        write_data_loader(proj)
    with pytest.raises(ValueError):
        write_data_loader(proj, "not a name")
