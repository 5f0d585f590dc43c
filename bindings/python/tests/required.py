"""What a test needs that pip does not bring: a framework, hatchling, the emulator binary, the
built engine .wasm. When one is missing the test fails under ``CI=true`` (CI runs everything) and
is skipped by pytest elsewhere, the message saying how to get it; it never passes silently.

The one place that rule lives: conftest.py and the test modules call these (at module level too).
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import pytest


def in_ci() -> bool:
    """Whether this is a CI run (``CI=true``, as CI services set it)."""
    return os.environ.get("CI", "").strip().lower() == "true"


def missing(what: str, how: str) -> NoReturn:
    """``what`` is missing and ``how`` gets it: fails the test (or module) under CI, else skips it."""
    message = f"{what} is missing: {how}"
    if in_ci():
        pytest.fail(f"{message} (CI=true: a missing component fails the run)", pytrace=False)
    pytest.skip(message, allow_module_level=True)


def module(name: str, how: str) -> ModuleType:
    """The module ``name`` imported, or :func:`missing` if it (or a parent package) is not
    installed. Any other import error propagates: a broken install is not a missing one."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name is None or not (name == error.name or name.startswith(f"{error.name}.")):
            raise
    missing(f"the Python module {name}", how)


def file(what: str, path: Path, how: str) -> Path:
    """``path`` (``what``, e.g. "the emulator") if it is a file, else :func:`missing`."""
    if not path.is_file():
        missing(f"{what} {path}", how)
    return path
