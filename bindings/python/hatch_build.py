"""Build hook: ships the engine component inside the package.

The component is `$CAPTCHAAI_ENGINE_WASM`, else `captchaai_engine.wasm` at the root of an sdist,
else the workspace's `target/component/captchaai_engine.wasm` (built by `cargo xtask component`).
It lands in the wheel as `captchaai_engine/captchaai_engine.wasm`; it is never committed.
"""

from __future__ import annotations

import os
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

PACKAGE_PATH = "captchaai_engine/captchaai_engine.wasm"


def find_component(root: Path) -> Path:
    env = os.environ.get("CAPTCHAAI_ENGINE_WASM")
    if env:
        path = Path(env)
        if not path.is_file():
            raise FileNotFoundError(f"$CAPTCHAAI_ENGINE_WASM is {env}, which is not a file: build the engine "
                                    "component with `cargo xtask component` or unset it")
        return path
    for path in (root / "captchaai_engine.wasm", root.parent.parent / "target" / "component" / "captchaai_engine.wasm"):
        if path.is_file():
            return path
    raise FileNotFoundError(
        "the engine component target/component/captchaai_engine.wasm is missing: run "
        "`cargo xtask component` in the workspace root (or set $CAPTCHAAI_ENGINE_WASM), then build again")


class ComponentHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict) -> None:
        component = find_component(Path(self.root))
        if self.target_name == "wheel":
            build_data["force_include"][str(component)] = PACKAGE_PATH
        elif self.target_name == "sdist":
            build_data["force_include"][str(component)] = "captchaai_engine.wasm"
