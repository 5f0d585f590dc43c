"""The package's extras against what CI runs: every framework pin in integrations.sh falls in its
extra's range in pyproject.toml, and every extra has its pins there (so ``pip install
'captchaai-engine[prefect]'`` allows the versions the integration tests passed on)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib  # the test extra brings it before 3.11

HERE = Path(__file__).resolve().parents[1]
FRAMEWORKS = ["airflow", "dagster", "prefect", "mage", "temporal"]


def extras() -> dict:
    return tomllib.loads((HERE / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def pins(framework: str) -> dict:
    """integrations.sh's ``requirements FRAMEWORK``: {name: version}."""
    script = f'source <(sed -n "/^requirements()/,/^}}/p" integrations.sh); requirements {framework}'
    out = subprocess.run(["bash", "-c", script], cwd=HERE, capture_output=True, text=True, check=True).stdout
    return dict(pin.split("==") for pin in out.split())


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_each_framework_pin_is_in_its_extra(framework):
    pinned = pins(framework)
    declared = [Requirement(text) for text in extras()[framework]]
    assert declared, f"the [{framework}] extra is empty"
    for requirement in declared:
        version = pinned.get(requirement.name)
        assert version is not None, f"integrations.sh does not pin {requirement.name} for {framework}"
        assert requirement.specifier.contains(version), (
            f"{requirement.name}=={version} (integrations.sh) is outside [{framework}]'s {requirement.specifier}")


def test_the_extras_are_the_integrations():
    names = set(extras()) - {"test"}
    assert names == set(FRAMEWORKS)
    modules = {path.stem for path in (HERE / "src" / "captchaai_engine" / "integrations").glob("[a-z]*.py")}
    assert names == modules, f"extras {sorted(names)} vs integration modules {sorted(modules)}"


def test_the_pins_parse():
    for framework in FRAMEWORKS:
        assert all(re.fullmatch(r"[0-9][0-9.]*", v) for v in pins(framework).values())


def test_a_plain_install_resolves_a_wasmtime_the_fast_path_is_tested_on():
    """pyproject's wasmtime range ends at the newest major the fast path supports, and test.sh
    runs the whole suite on that major: ``pip install captchaai-engine`` resolves the newest
    version the range allows, so it must be one CI runs on the fast path."""
    from captchaai_engine import _component

    [wasmtime] = [Requirement(text) for text in tomllib.loads((HERE / "pyproject.toml").read_text())
                  ["project"]["dependencies"] if Requirement(text).name == "wasmtime"]
    newest = max(_component.FAST_PATH_WASMTIME)
    assert wasmtime.specifier.contains(f"{newest}.99.0") and not wasmtime.specifier.contains(f"{newest + 1}.0.0"), (
        f"wasmtime{wasmtime.specifier} should end below {newest + 1} (the fast path is tested up to {newest}.x)")
    script = (HERE / "test.sh").read_text()
    main = re.search(r"^WASMTIME_MAIN=(\S+)", script, re.M)
    assert main and main.group(1).split(".")[0] == str(newest), "test.sh's main run is on the newest fast version"
    tested = {int(v.split(".")[0]) for v in re.findall(r"^WASMTIME_FAST_\w+=(\S+)", script, re.M)} | {newest}
    assert tested == set(_component.FAST_PATH_WASMTIME), "test.sh runs every major the fast path allows"
