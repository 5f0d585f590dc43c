"""The README's Prefect example (examples/prefect_flow.py) as a user runs it: a fresh Prefect
server with no concurrency limit, the key saved in the Secret block as the README says, the flow
run unchanged in real time against the emulator. Needs prefect (target/venv-prefect, made by
integrations.sh)."""

from __future__ import annotations

import os
import tempfile

import pytest

import required

os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix="prefect-home-")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

INSTALL = "run `bindings/python/integrations.sh prefect` (it makes target/venv-prefect and runs this file there)"
required.module("prefect", INSTALL)

from prefect.blocks.system import Secret  # noqa: E402
from prefect.client.orchestration import get_client  # noqa: E402
from prefect.exceptions import ObjectNotFound  # noqa: E402
from prefect.testing.utilities import prefect_test_harness  # noqa: E402

from emulated import KEY, THREADS, load_example  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def fresh_prefect_server():
    with prefect_test_harness(server_startup_timeout=60):
        yield


def test_the_example_flow_runs_on_a_fresh_server_and_creates_the_limit(example_emulator, monkeypatch):
    with get_client(sync_client=True) as client:
        with pytest.raises(ObjectNotFound):
            client.read_global_concurrency_limit_by_name("captchaai")
    # The README's setup: the key in the Secret block (here from CAPTCHAAI_KEY, as there).
    monkeypatch.setenv("CAPTCHAAI_KEY", KEY)
    monkeypatch.setenv("CAPTCHAAI_BASE_URL", example_emulator.base_url)
    Secret(value=os.environ["CAPTCHAAI_KEY"]).save("captchaai-api-key", overwrite=True)

    example = load_example("prefect_flow")
    results = example.portal_logins(["north", "south", "east", "west"])

    assert [r["region"] for r in results] == ["north", "south", "east", "west"]
    assert all(r["captcha_task_id"] for r in results)
    # One threadsinfo (sizing the limit on first use), then one submit per region.
    assert example_emulator.actions().count("threadsinfo") == 1
    assert example_emulator.paths().count("/in.php") == 4
    with get_client(sync_client=True) as client:
        limit = client.read_global_concurrency_limit_by_name("captchaai")
    assert limit.limit == THREADS - 1 and limit.active_slots == 0
