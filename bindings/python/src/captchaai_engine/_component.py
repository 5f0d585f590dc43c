"""Loading the engine component: compiled once per process, one Store per instance, and a
process-wide instance for the stateless functions."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import wasmtime
from wasmtime.component import Component, Linker

from . import _wit
from .errors import EngineTrap

WIT_PACKAGE = "captchaai:engine"
WIT_VERSION = "0.2.0"
ENGINE_INTERFACE = f"{WIT_PACKAGE}/engine@{WIT_VERSION}"
ACCOUNT_INTERFACE = f"{WIT_PACKAGE}/account@{WIT_VERSION}"

#: The functions this package calls, by interface.
FUNCTIONS = {
    ENGINE_INTERFACE: (
        "[static]solve.create",
        "[static]solve.restore",
        "[static]solve.restore-parts",
        "[method]solve.poll-output",
        "[method]solve.handle-response",
        "[method]solve.handle-transport-error",
        "[method]solve.snapshot",
        "[method]solve.snapshot-base",
        "[method]solve.snapshot-state",
        "[method]solve.task-id",
        "[method]solve.deadline",
        "is-fresh",
        "solution-json",
    ),
    ACCOUNT_INTERFACE: (
        "threads-info-request",
        "parse-threads-info",
        "balance-request",
        "parse-balance",
    ),
}

PACKAGED_WASM = Path(__file__).with_name("captchaai_engine.wasm")


class ComponentNotFound(FileNotFoundError):
    """The engine .wasm is neither in the package nor at $CAPTCHAAI_ENGINE_WASM."""


def wasm_path() -> Path:
    """The engine component this package runs: the one shipped inside it, else
    ``$CAPTCHAAI_ENGINE_WASM`` (for a source checkout that was not built into a wheel)."""
    if PACKAGED_WASM.is_file():
        return PACKAGED_WASM
    env = os.environ.get("CAPTCHAAI_ENGINE_WASM")
    if env and Path(env).is_file():
        return Path(env)
    raise ComponentNotFound(
        f"the engine component is not in the package ({PACKAGED_WASM}) and $CAPTCHAAI_ENGINE_WASM "
        "is not set to a file: build it with `cargo xtask component` and reinstall the package")


class Loaded:
    """The compiled component and, per function, its export index and converters."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.engine = wasmtime.Engine()
        self.component = Component.from_file(self.engine, str(path))
        self.linker = Linker(self.engine)
        self.exports: Dict[str, Any] = {}
        for interface, names in FUNCTIONS.items():
            iface = self.component.get_export_index(interface)
            if iface is None:
                raise RuntimeError(f"{path} does not export {interface}: not engine {WIT_VERSION}")
            for name in names:
                index = self.component.get_export_index(name, iface)
                if index is None:
                    raise RuntimeError(f"{path} does not export {interface}#{name}")
                self.exports[name] = index
        self.signatures: Dict[str, _wit.Signature] = {}
        self._lock = threading.Lock()

    def instantiate(self) -> "Instance":
        store = wasmtime.Store(self.engine)
        instance = self.linker.instantiate(store, self.component)
        funcs = {}
        for name, index in self.exports.items():
            func = instance.get_func(store, index)
            if func is None:
                raise RuntimeError(f"export {name} is not a function")
            funcs[name] = func
        with self._lock:
            if not self.signatures:
                self.signatures = {name: _wit.Signature(name, func.type(store)) for name, func in funcs.items()}
        return Instance(store, {name: (func, self.signatures[name]) for name, func in funcs.items()})


class Instance:
    """One instance of the component in its own Store. Not thread-safe: callers serialize. A trap
    leaves it unusable: that call and every later one raise :class:`EngineTrap`."""

    def __init__(self, store: wasmtime.Store, funcs: Dict[str, Tuple[Any, _wit.Signature]]) -> None:
        self.store = store
        self._funcs = funcs
        self.trapped = False

    def call(self, name: str, *args: Any) -> Any:
        if self.trapped:
            raise EngineTrap("this engine instance trapped earlier and cannot be used")
        func, signature = self._funcs[name]
        try:
            return _wit.call(self.store, func, signature, args)
        except wasmtime.WasmtimeError as trap:
            self.trapped = True
            raise EngineTrap(f"the engine trapped in {name}: {trap}") from None

    def drop(self, resource: Any) -> None:
        """Frees a resource; nothing to free once the instance trapped."""
        if self.trapped:
            return
        try:
            resource.drop(self.store)
        except wasmtime.WasmtimeError:
            self.trapped = True


_loaded: Optional[Loaded] = None
_load_lock = threading.Lock()


def load() -> Loaded:
    """The process-wide compiled component (compiled on first use, ~0.4 s)."""
    global _loaded
    if _loaded is None:
        with _load_lock:
            if _loaded is None:
                _loaded = Loaded(wasm_path())
    return _loaded


_shared: Optional[Instance] = None
_shared_lock = threading.Lock()


def call_shared(name: str, *args: Any) -> Any:
    """A stateless engine function on a process-wide instance (replaced if it ever trapped)."""
    global _shared
    with _shared_lock:
        if _shared is None or _shared.trapped:
            _shared = load().instantiate()
        return _shared.call(name, *args)
