"""The README's integration examples are the files in examples/, exactly: each ```python block
whose first line names ``tests/integrations/test_<framework>_example.py`` (the test that runs the
file in its framework, integrations.sh) equals the example file that test runs, so the README
cannot drift from what CI runs. The docs check skips these blocks (their first line starts
``# unchecked:``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1]
EXAMPLES = HERE / "examples"
FRAMEWORKS = {"airflow": "airflow_dag.py", "dagster": "dagster_defs.py", "prefect": "prefect_flow.py",
              "mage": "mage_block.py", "temporal": "temporal_workflow.py"}
RUNS = re.compile(r"^# unchecked: needs [^;]+; tests/integrations/test_(\w+)_example\.py runs this file$")


def python_blocks(markdown: str) -> list[str]:
    """The text of each ```python block (with its final newline)."""
    return [match.group(1) for match in re.finditer(r"^```python\n(.*?)^```$", markdown, re.S | re.M)]


def example_blocks() -> dict[str, list[str]]:
    """framework -> the README blocks that name its example test."""
    found: dict[str, list[str]] = {}
    for block in python_blocks((HERE / "README.md").read_text(encoding="utf-8")):
        match = RUNS.match(block.split("\n", 1)[0])
        if match:
            found.setdefault(match.group(1), []).append(block)
    return found


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_the_readme_shows_the_example_file_exactly(framework):
    blocks = example_blocks().get(framework, [])
    assert len(blocks) == 1, f"README.md: expected one example block for {framework}, found {len(blocks)}"
    text = (EXAMPLES / FRAMEWORKS[framework]).read_text(encoding="utf-8")
    assert blocks[0] == text, f"README.md's {framework} example differs from examples/{FRAMEWORKS[framework]}"


def test_each_example_has_its_test_and_a_first_line_the_docs_check_skips():
    assert sorted(example_blocks()) == sorted(FRAMEWORKS)
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(FRAMEWORKS.values())
    for framework, name in FRAMEWORKS.items():
        assert RUNS.match((EXAMPLES / name).read_text(encoding="utf-8").split("\n", 1)[0]), name
        assert (HERE / "tests" / "integrations" / f"test_{framework}_example.py").is_file(), framework


def test_the_readme_names_each_extra_and_its_range():
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib  # the test extra brings it before 3.11
    readme = (HERE / "README.md").read_text(encoding="utf-8")
    extras = tomllib.loads((HERE / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for framework in FRAMEWORKS:
        assert f"pip install 'captchaai-engine[{framework}]'" in readme, framework
        for requirement in extras[framework]:
            assert f"`{requirement.replace(' ', '')}`" in readme, (framework, requirement)
