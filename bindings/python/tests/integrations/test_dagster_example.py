"""The README's Dagster route exactly as a user takes it, in real time against the emulator: the
README's CLI block run by bash in a folder holding the example (examples/dagster_defs.py), from a
shell with no $DAGSTER_HOME (the block makes one under $HOME), the key in $CAPTCHAAI_KEY: it sets
the pool's limit, then materializes the asset through the Dagster CLI. Needs dagster
(target/venv-dagster, made by integrations.sh)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import required

INSTALL = "run `bindings/python/integrations.sh dagster` (it makes target/venv-dagster and runs this file there)"
dg = required.module("dagster", INSTALL)

from emulated import EXAMPLES, KEY  # noqa: E402

README = EXAMPLES.parent / "README.md"


def readme_cli_block() -> str:
    """The sh block of the README's Dagster section (the one that runs dagster_defs.py)."""
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    [block] = [b for b in blocks if "dagster asset materialize" in b]
    return block


def test_the_readme_cli_block_materializes_the_example_asset(example_emulator, tmp_path):
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    shutil.copy(EXAMPLES / "dagster_defs.py", work)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DAGSTER")}
    env.update(HOME=str(home), CAPTCHAAI_KEY=KEY, CAPTCHAAI_BASE_URL=example_emulator.base_url,
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", readme_cli_block()], cwd=work, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"

    with dg.DagsterInstance.from_config(str(home / ".dagster")) as instance:
        [run] = instance.get_runs()
        assert run.status == dg.DagsterRunStatus.SUCCESS  # the blocking unsolvable-ratio check passed too
        event = instance.get_latest_materialization_event(dg.AssetKey("portal_logins"))
        metadata = event.asset_materialization.metadata
        assert metadata["solves"].value == 4 and metadata["unsolvable"].value == 0
    # One submit per region and no retries; the key never reaches Dagster's output.
    assert example_emulator.paths().count("/in.php") == 4
    assert KEY not in done.stdout + done.stderr
