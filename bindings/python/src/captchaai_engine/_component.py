"""Loading the engine component: compiled once per process, one Store per instance, and a
process-wide instance for the stateless functions.

Calls go through one of two layers with the same results: ``_wit`` (wasmtime-py's private C
bindings, about six times faster per call) with the wasmtime versions CI tests it on
(:data:`FAST_PATH_WASMTIME`), else ``_public`` (wasmtime-py's public component API), with one
warning saying why. ``CAPTCHAAI_ENGINE_PUBLIC_API=1`` picks the public layer on any version.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO

import wasmtime
from wasmtime.component import Component, Linker

from .errors import EngineTrap

WIT_PACKAGE = "captchaai:engine"
WIT_VERSION = "0.3.0"
ENGINE_INTERFACE = f"{WIT_PACKAGE}/engine@{WIT_VERSION}"
ACCOUNT_INTERFACE = f"{WIT_PACKAGE}/account@{WIT_VERSION}"
ENDPOINT_INTERFACE = f"{WIT_PACKAGE}/endpoint@{WIT_VERSION}"
KEYLESS_INTERFACE = f"{WIT_PACKAGE}/keyless@{WIT_VERSION}"

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
        "[method]solve.ends-by",
        "[method]solve.task-type",
        "[static]solve.create-with-times",
        "[static]solve-times.create",
        "[static]solve-times.from-text",
        "[method]solve-times.to-text",
        "[method]solve-times.task-type",
        "[method]solve-times.observations",
        "[method]solve-times.observe",
        "[method]solve-times.first-wait-ms",
        "[static]solve-times.min-observations",
        "is-fresh",
        "solution-json",
    ),
    ACCOUNT_INTERFACE: (
        "threads-info-request",
        "parse-threads-info",
        "balance-request",
        "parse-balance",
        "[static]thread-gate.create",
        "[method]thread-gate.capacity",
        "[method]thread-gate.enter",
        "[method]thread-gate.admission",
        "[method]thread-gate.leave",
        "[method]thread-gate.set-plan",
        "[method]thread-gate.running",
        "[method]thread-gate.queued",
    ),
    ENDPOINT_INTERFACE: (
        "read-request",
        "read-format",
        "render-submitted",
        "render-state",
        "render-states",
        "render-threads",
        "render-balance",
        "render-reported",
        "render-failure",
        "render-refusal",
        "report-request",
        "parse-report",
    ),
    KEYLESS_INTERFACE: (
        "[static]keyless-solve.create",
        "[static]keyless-solve.create-with-times",
        "[static]keyless-solve.restore",
        "[method]keyless-solve.poll-output",
        "[method]keyless-solve.handle-response",
        "[method]keyless-solve.handle-transport-error",
        "[method]keyless-solve.snapshot",
        "[method]keyless-solve.task-id",
        "[method]keyless-solve.deadline",
        "[method]keyless-solve.ends-by",
        "[method]keyless-solve.task-type",
        "with-key",
        "without-key",
    ),
}

PACKAGED_WASM = Path(__file__).with_name("captchaai_engine.wasm")

#: The wasmtime-py major versions whose private C bindings ``_wit`` is tested with in CI
#: (bindings/python/test.sh runs the suite on 51.0.0, 50.0.1 and 49.0.0; pyproject.toml allows
#: nothing newer, so a plain install takes this path). Any other version runs on the public
#: component API.
FAST_PATH_WASMTIME = (49, 50, 51)
#: Set to ``1`` (or ``true``/``yes``) to use the public component API on any wasmtime version.
PUBLIC_API_ENV = "CAPTCHAAI_ENGINE_PUBLIC_API"


class CallPathWarning(RuntimeWarning):
    """The engine runs on wasmtime-py's public component API (same results, slower calls)
    because the installed wasmtime is not one the fast path is tested with."""


def warn_on_stderr(message: str, category: type[Warning], stacklevel: int) -> None:
    """A warning through the warnings module (its filters apply: ``-W ignore::...`` silences it)
    that is always shown on stderr, never on stdout: some frameworks (Airflow) send warnings
    into their logging on stdout, where one would mix with a command's output, e.g.
    ``airflow pools set captchaai $(python -c '...plan_threads()...')``."""

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: TextIO | None = None, line: str | None = None) -> None:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

    with warnings.catch_warnings():
        warnings.showwarning = show
        warnings.warn(message, category, stacklevel=stacklevel)


def wasmtime_version() -> str:
    """The installed wasmtime-py version ("unknown" if its metadata is missing)."""
    try:
        return metadata.version("wasmtime")
    except metadata.PackageNotFoundError:
        return "unknown"


def _major(version: str) -> int | None:
    head = version.split(".", 1)[0]
    return int(head) if head.isdigit() else None


def choose_call_layer(version: str | None = None, env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """Which layer calls the engine, and why: ``("fast", reason)`` or ``("public", reason)``."""
    version = wasmtime_version() if version is None else version
    env = os.environ if env is None else env
    if env.get(PUBLIC_API_ENV, "").strip().lower() in ("1", "true", "yes"):
        return "public", f"${PUBLIC_API_ENV} is set"
    if _major(version) not in FAST_PATH_WASMTIME:
        tested = ", ".join(f"{major}.x" for major in FAST_PATH_WASMTIME)
        return "public", (f"wasmtime {version} is not a version captchaai-engine's fast call path is tested with "
                          f"({tested})")
    return "fast", f"wasmtime {version}"


_layer: ModuleType | None = None
_layer_name = ""
_layer_lock = threading.Lock()


def call_layer() -> ModuleType:
    """The module whose ``Signature`` and ``call`` the instances use (chosen once per process).
    Falling back to the public API warns once (:class:`CallPathWarning`), unless it was asked
    for with ``$CAPTCHAAI_ENGINE_PUBLIC_API``."""
    global _layer, _layer_name
    if _layer is None:
        with _layer_lock:
            if _layer is None:
                name, reason = choose_call_layer()
                layer: ModuleType
                if name == "fast":
                    try:
                        from . import _wit

                        layer = _wit
                    except (ImportError, AttributeError) as error:  # the private bindings moved
                        name, reason = "public", f"{reason}: its private bindings did not load ({error})"
                if name == "public":
                    from . import _public

                    layer = _public

                    if not os.environ.get(PUBLIC_API_ENV):
                        warn_on_stderr(f"{reason}; using wasmtime-py's public component API instead (same "
                                       "results, slower calls)", CallPathWarning, stacklevel=5)
                _layer, _layer_name = layer, name
    return _layer


def call_layer_name() -> str:
    """``"fast"`` or ``"public"``: the layer in use (choosing it if none was chosen yet)."""
    call_layer()
    return _layer_name


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
        self.exports: dict[str, Any] = {}
        for interface, names in FUNCTIONS.items():
            iface = self.component.get_export_index(interface)
            if iface is None:
                raise RuntimeError(f"{path} does not export {interface}: not engine {WIT_VERSION}")
            for name in names:
                index = self.component.get_export_index(name, iface)
                if index is None:
                    raise RuntimeError(f"{path} does not export {interface}#{name}")
                self.exports[name] = index
        self.layer = call_layer()
        self.signatures: dict[str, Any] = {}
        self._lock = threading.Lock()

    def instantiate(self, layer: ModuleType | None = None) -> Instance:
        """A new instance in its own Store, calling through ``layer`` (default: the process's)."""
        store = wasmtime.Store(self.engine)
        instance = self.linker.instantiate(store, self.component)
        funcs = {}
        for name, index in self.exports.items():
            func = instance.get_func(store, index)
            if func is None:
                raise RuntimeError(f"export {name} is not a function")
            funcs[name] = func
        if layer is not None and layer is not self.layer:
            signatures = {name: layer.Signature(name, func.type(store)) for name, func in funcs.items()}
        else:
            layer = self.layer
            with self._lock:
                if not self.signatures:
                    self.signatures = {name: layer.Signature(name, func.type(store)) for name, func in funcs.items()}
            signatures = self.signatures
        return Instance(store, {name: (func, signatures[name]) for name, func in funcs.items()}, layer.call)


class Instance:
    """One instance of the component in its own Store. Not thread-safe: callers serialize. A trap
    leaves it unusable: that call and every later one raise :class:`EngineTrap`."""

    def __init__(self, store: wasmtime.Store, funcs: dict[str, tuple[Any, Any]], call: Any) -> None:
        self.store = store
        self._funcs = funcs
        self._call = call
        self.trapped = False

    def call(self, name: str, *args: Any) -> Any:
        if self.trapped:
            raise EngineTrap("this engine instance trapped earlier and cannot be used")
        func, signature = self._funcs[name]
        try:
            return self._call(self.store, func, signature, args)
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


_loaded: Loaded | None = None
_load_lock = threading.Lock()


def load() -> Loaded:
    """The process-wide compiled component (compiled on first use, ~0.4 s)."""
    global _loaded
    if _loaded is None:
        with _load_lock:
            if _loaded is None:
                _loaded = Loaded(wasm_path())
    return _loaded


_shared: Instance | None = None
_shared_lock = threading.Lock()


def call_shared(name: str, *args: Any) -> Any:
    """A stateless engine function on a process-wide instance (replaced if it ever trapped)."""
    global _shared
    with _shared_lock:
        if _shared is None or _shared.trapped:
            _shared = load().instantiate()
        return _shared.call(name, *args)
