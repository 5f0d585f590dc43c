"""The README's Mage example (examples/mage_block.py) as a user runs it: the file unchanged as a data
loader block of a fresh Mage project (``mage init``), the key in the Mage secret
``CAPTCHAAI_API_KEY`` as the README says, the pipeline run by ``mage run`` in real time against
the emulator, its rows saved by an exporter block. Needs mage-ai (target/venv-mage, made by
integrations.sh)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import required

INSTALL = "run `bindings/python/integrations.sh mage` (it makes target/venv-mage and runs this file there)"
required.module("mage_ai", INSTALL)

from test_mage import EXPORTER, MAGE, RUN_TIMEOUT_S, SET_SECRET  # noqa: E402

from emulated import EXAMPLES, KEY, load_example  # noqa: E402

PIPELINE = '''\
blocks:
- downstream_blocks: [save_rows]
  name: log_in_to_portals
  type: data_loader
  language: python
  upstream_blocks: []
  uuid: log_in_to_portals
- downstream_blocks: []
  name: save_rows
  type: data_exporter
  language: python
  upstream_blocks: [log_in_to_portals]
  uuid: save_rows
name: portal_logins
type: python
uuid: portal_logins
'''


def test_the_example_block_runs_in_a_mage_pipeline(example_emulator, tmp_path):
    env = {**os.environ, "MAGE_DATA_DIR": str(tmp_path / "mage_data")}
    subprocess.run([str(MAGE), "init", "proj"], cwd=tmp_path, env=env, check=True, capture_output=True,
                   timeout=RUN_TIMEOUT_S)
    proj = tmp_path / "proj"
    shutil.copy(EXAMPLES / "mage_block.py", proj / "data_loaders" / "log_in_to_portals.py")
    (proj / "data_exporters" / "save_rows.py").write_text(EXPORTER)
    pipeline = proj / "pipelines" / "portal_logins"
    pipeline.mkdir()
    (pipeline / "__init__.py").write_text("")
    (pipeline / "metadata.yaml").write_text(PIPELINE)
    # The README's setup: the key in the Mage secret (the Secrets page; here through Mage's API).
    subprocess.run([sys.executable, "-c", SET_SECRET, str(proj), KEY], env=env, check=True,
                   capture_output=True, timeout=RUN_TIMEOUT_S)

    rows_path = tmp_path / "rows.json"
    variables = {"captchaai_config": {"base_url": example_emulator.base_url}, "rows_path": str(rows_path)}
    run = subprocess.run([str(MAGE), "run", str(proj), "portal_logins", "--runtime-vars", json.dumps(variables)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)

    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    rows = json.loads(rows_path.read_text())
    assert [row["region"] for row in rows] == ["north", "south"]
    assert all(row["captcha_task_id"] and row["solved_in_ms"] > 0 for row in rows)
    assert example_emulator.paths().count("/in.php") == 2
    assert KEY not in run.stdout + run.stderr + rows_path.read_text()


def test_the_example_imports_as_a_module():
    """The block file is plain Python: it imports without Mage's runner (the decorators from Mage)."""
    block = load_example("mage_block")
    assert callable(block.log_in_to_portals) and callable(block.test_output)
