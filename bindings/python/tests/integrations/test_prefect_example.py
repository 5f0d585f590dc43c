"""The README's Prefect route exactly as a user takes it, in real time against the emulator: no
server started by hand and no PREFECT_API_URL, so each command runs on Prefect's temporary local
server over the database in a fresh $PREFECT_HOME, as the README says. The README's key-saving
snippet runs as its own process (`python save_key.py`), then `python prefect_flow.py` (the example
unchanged): the limit is created from the plan on first use, one submit per region. Needs prefect
(target/venv-prefect, made by integrations.sh)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import required

INSTALL = "run `bindings/python/integrations.sh prefect` (it makes target/venv-prefect and runs this file there)"
required.module("prefect", INSTALL)

from emulated import EXAMPLES, KEY, THREADS  # noqa: E402

README = EXAMPLES.parent / "README.md"
PYTHON = str(Path(sys.executable))

READ_LIMIT = textwrap.dedent("""
    import json
    from prefect.client.orchestration import get_client
    with get_client(sync_client=True) as client:
        limit = client.read_global_concurrency_limit_by_name("captchaai")
    print(json.dumps({"limit": limit.limit, "active_slots": limit.active_slots}))
""")


def readme_save_key_block() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    [block] = [b for b in blocks if "Secret(value=" in b]
    return block


def run(args: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    done = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{args}: {done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def test_the_readme_route_saves_the_key_and_runs_the_flow_on_the_temporary_server(example_emulator, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(EXAMPLES / "prefect_flow.py", work)
    (work / "save_key.py").write_text(readme_save_key_block())
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT")}
    # The temporary server gets 20 s to start by default; CI's busy 2 cores may need longer.
    env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), PREFECT_SERVER_ANALYTICS_ENABLED="false",
               PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="240",
               CAPTCHAAI_KEY=KEY, CAPTCHAAI_BASE_URL=example_emulator.base_url)

    run([PYTHON, "save_key.py"], env, work)
    done = run([PYTHON, "prefect_flow.py"], env, work)

    output = done.stdout + done.stderr
    for region in ("north", "south", "east", "west"):
        assert re.search(rf"{region}: CaptchaAI task \d+ in \d+ ms", output), output[-3000:]
    # One threadsinfo (sizing the limit on first use), then one submit per region.
    assert example_emulator.actions().count("threadsinfo") == 1
    assert example_emulator.paths().count("/in.php") == 4
    limit = json.loads(run([PYTHON, "-c", READ_LIMIT], env, work).stdout.strip().splitlines()[-1])
    assert limit == {"limit": THREADS - 1, "active_slots": 0}
    assert KEY not in output
