"""The README's Dagster example (examples/dagster_defs.py) as a user runs it: its Definitions
loaded unchanged, the key in $CAPTCHAAI_API_KEY as the README says, the implicit asset job run
in real time on a fresh Dagster instance (no pool limit set) against the emulator. Needs dagster
(target/venv-dagster, made by integrations.sh)."""

from __future__ import annotations

import pytest

import required

INSTALL = "run `bindings/python/integrations.sh dagster` (it makes target/venv-dagster and runs this file there)"
dg = required.module("dagster", INSTALL)

from emulated import KEY, load_example  # noqa: E402


@pytest.fixture
def instance(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    with dg.DagsterInstance.local_temp(str(tmp_path)) as instance:
        yield instance


def test_the_example_definitions_materialize_the_asset_and_pass_the_check(example_emulator, instance, monkeypatch):
    monkeypatch.setenv("CAPTCHAAI_API_KEY", KEY)
    monkeypatch.setenv("CAPTCHAAI_BASE_URL", example_emulator.base_url)
    example = load_example("dagster_defs")
    assert isinstance(example.defs, dg.Definitions)

    result = example.defs.resolve_implicit_global_asset_job_def().execute_in_process(instance=instance)

    assert result.success
    [materialization] = result.asset_materializations_for_node("portal_logins")
    assert materialization.metadata["solves"].value == 4
    assert materialization.metadata["unsolvable"].value == 0
    [check] = result.get_asset_check_evaluations()
    assert check.passed
    # One submit per region and no retries; the key never reaches Dagster's events.
    assert example_emulator.paths().count("/in.php") == 4
    assert not [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY]
    assert KEY not in repr([e.message for e in result.all_events])
