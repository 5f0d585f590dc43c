#!/usr/bin/env python3
"""Fails when modules import each other in a circle.

Checks the engine (src/), the edge app (edge/src), the emulator (emulator/src) and the Python
package (bindings/python/src/captchaai_engine). A Rust module depends on every sibling it names
as `crate::name` (or `super::name` in a top-level file), directly or through a
name the crate root re-exports; a Python module on every module of
the package it imports, at the top or inside a function. Test-only code (`#[cfg(test)] mod` blocks
at the end of a Rust file, `tests/` folders) is left out, since tests may look anywhere.

Usage: scripts/check-imports.py [--graph]   (exit 1 and the circles printed when any exists)
"""
import ast
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
RUST_CRATES = ["src", "edge/src", "emulator/src"]
PYTHON_PACKAGES = ["bindings/python/src/captchaai_engine"]


def rust_module_name(crate: pathlib.Path, path: pathlib.Path) -> str:
    rel = path.relative_to(crate).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "mod":
        parts.pop()
    if parts in ([], ["lib"], ["main"]):
        return "<root>"
    return parts[0]  # the top-level module: circles are between siblings of the crate root


def strip_rust_tests(text: str) -> str:
    """The file without a trailing `#[cfg(test)] mod ... { ... }` block and without comments."""
    cut = re.search(r"^#\[cfg\(test\)\]\s*\n\s*mod\s+\w+\s*\{", text, re.M)
    if cut:
        text = text[: cut.start()]
    return re.sub(r"//[^\n]*", "", text)


def root_reexports(crate: pathlib.Path) -> dict:
    """Names the crate root re-exports (`pub use module::{A, B}`), mapped to their module."""
    found = {}
    for root in ("lib.rs", "main.rs"):
        path = crate / root
        if not path.exists():
            continue
        text = strip_rust_tests(path.read_text())
        for module, rest in re.findall(r"^\s*(?:pub(?:\([^)]*\))?\s+)?use\s+([a-z_][a-z0-9_]*)::([^;]*);", text, re.M):
            for name in re.findall(r"\b([A-Za-z_][A-Za-z0-9_]*)\b", rest):
                found.setdefault(name, module)
    return found


def rust_graph(crate: pathlib.Path) -> dict:
    graph: dict = {}
    files = sorted(p for p in crate.rglob("*.rs"))
    names = {rust_module_name(crate, p) for p in files}
    reexports = root_reexports(crate)
    for path in files:
        module = rust_module_name(crate, path)
        text = strip_rust_tests(path.read_text())
        if path.parent == crate:  # in a top-level module's file, `super::` is the crate root
            text = re.sub(r"\bsuper::", "crate::", text)
        deps = set(re.findall(r"\bcrate::([a-z_][a-z0-9_]*)", text))
        # `use crate::{a, b::c}` groups.
        for group in re.findall(r"\bcrate::\{([^}]*)\}", text):
            deps |= set(re.findall(r"(?:^|,)\s*([a-z_][a-z0-9_]*)", group))
        for name in set(re.findall(r"\bcrate::([A-Z][A-Za-z0-9_]*|[a-z_][a-z0-9_]*)\b", text)):
            if name in reexports:
                deps.add(reexports[name])
        for group in re.findall(r"\bcrate::\{([^}]*)\}", text):
            deps |= {reexports[n] for n in re.findall(r"\b([A-Za-z_][A-Za-z0-9_]*)\b", group) if n in reexports}
        deps = {d for d in deps if d in names and d != module}
        graph.setdefault(module, set()).update(deps)
    graph.pop("<root>", None)
    for deps in graph.values():
        deps.discard("<root>")
    return graph


def python_graph(package: pathlib.Path) -> dict:
    graph: dict = {}
    pkg = package.name
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        module = ".".join(parts) or "<package>"
        tree = ast.parse(path.read_text())
        deps = set()
        here = parts if path.stem != "__init__" else parts + ["__init__"]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here[: len(here) - node.level]
                    target = base + (node.module.split(".") if node.module else [])
                elif node.module and node.module.split(".")[0] == pkg:
                    target = node.module.split(".")[1:]
                else:
                    continue
                if node.module is None:  # from . import a, b
                    for alias in node.names:
                        deps.add(".".join(target + [alias.name]))
                else:
                    deps.add(".".join(target))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == pkg:
                        deps.add(".".join(alias.name.split(".")[1:]))
        graph[module] = {d for d in deps if d and d != module}
    known = set(graph)
    for module, deps in graph.items():
        graph[module] = {d for d in deps if d in known and d != "<package>"}
    graph.pop("<package>", None)
    return graph


def circles(graph: dict) -> list:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main() -> int:
    show = "--graph" in sys.argv
    failed = False
    checks = [(c, rust_graph(ROOT / c)) for c in RUST_CRATES] + [(p, python_graph(ROOT / p)) for p in PYTHON_PACKAGES]
    for name, graph in checks:
        if show:
            for module in sorted(graph):
                print(f"{name}: {module} -> {', '.join(sorted(graph[module])) or '-'}")
        found = circles(graph)
        for comp in found:
            failed = True
            edges = [f"{a} -> {b}" for a in comp for b in sorted(graph[a]) if b in comp]
            print(f"import circle in {name}: {', '.join(comp)} ({'; '.join(edges)})")
        if not found:
            print(f"imports: {name}: {len(graph)} modules, no circle")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
