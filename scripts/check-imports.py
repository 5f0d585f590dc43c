#!/usr/bin/env python3
"""Fails when modules import each other in a circle, or against the order a crate root states.

Checks every Rust crate of the repository (each folder with a Cargo.toml and a src/, found by
walking the tree: the workspace members, the edge app, the fuzz crate, the hello component, and
a test folder's shared `tests/*/mod.rs` tree such as host-tests' support), the Python package
(bindings/python/src/captchaai_engine) and the JavaScript package (bindings/js/src).

A Rust module depends on every sibling it names as `crate::name` (or `super::name` in a
top-level file), directly or through a name the crate root re-exports; a Python module on every
module of the package it imports, at the top or inside a function; a JavaScript file on every
file of the package it `require`s or imports (`./x.cjs`, `./x.js` for `x.d.ts`). Test-only code
(`#[cfg(test)] mod` blocks at the end of a Rust file, `tests/` folders but their shared support
tree) is left out, since tests may look anywhere; so are `src/bin/` (each file its own crate).

A crate root whose doc says its modules each depend "only on those listed before it" must list
every module (as `name`, in that section of the doc, up to the next heading) and each module may
import only modules listed before it: that order is read from the doc and enforced here.

Usage: scripts/check-imports.py [--graph]   (exit 1 and the faults printed when any exists)
"""
import ast
import os
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PYTHON_PACKAGES = ["bindings/python/src/captchaai_engine"]
JS_PACKAGES = ["bindings/js/src"]
# Folders never searched for crates: build output, installed packages, caches.
SKIP_DIRS = {"target", "node_modules", "__pycache__", "venv"}


def rust_crates() -> list:
    """Every crate's src/ (and every shared `tests/NAME/mod.rs` tree), relative to ROOT."""
    found = []
    for here, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        path = pathlib.Path(here)
        if "Cargo.toml" in files and (path / "src").is_dir():
            found.append((path / "src").relative_to(ROOT).as_posix())
        if path.parent.name == "tests" and "mod.rs" in files and (path.parent.parent / "Cargo.toml").exists():
            found.append(path.relative_to(ROOT).as_posix())
    return sorted(found)


def rust_module_name(crate: pathlib.Path, path: pathlib.Path) -> str:
    rel = path.relative_to(crate).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "mod":
        parts.pop()
    if parts in ([], ["lib"], ["main"]):  # [] is a support tree's mod.rs
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
    for root in ("lib.rs", "main.rs", "mod.rs"):
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
    files = sorted(p for p in crate.rglob("*.rs") if "bin" not in p.relative_to(crate).parts[:1])
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


ORDER_CLAIM = re.compile(r"depends? only on (?:those|the ones|the modules) listed before it", re.I)


def stated_order(crate: pathlib.Path, modules: set) -> list | None:
    """The module order the crate root's doc states (see the module doc), or None if it states
    none: the crate's module names in `backticks`, first mention first, from the line making the
    claim up to the next heading."""
    for root in ("lib.rs", "main.rs"):
        path = crate / root
        if not path.exists():
            continue
        doc = [line[3:].strip() for line in path.read_text().splitlines() if line.startswith("//!")]
        for i, line in enumerate(doc):
            if ORDER_CLAIM.search(line):
                section = [line]
                for rest in doc[i + 1 :]:
                    if rest.startswith("#"):
                        break
                    section.append(rest)
                order = []
                for name in re.findall(r"`([a-z_][a-z0-9_]*)`", " ".join(section)):
                    if name in modules and name not in order:
                        order.append(name)
                return order
    return None


def order_faults(graph: dict, order: list) -> list:
    """Each module the order leaves out, and each import of a module listed after the importer."""
    faults = [f"{m} is not in the stated order" for m in sorted(graph) if m not in order]
    rank = {m: i for i, m in enumerate(order)}
    for module in sorted(graph):
        for dep in sorted(graph[module]):
            if module in rank and dep in rank and rank[dep] > rank[module]:
                faults.append(f"{module} -> {dep}, listed after it")
    return faults


JS_SUFFIXES = (".cjs", ".mjs", ".js", ".d.ts")
JS_IMPORT = re.compile(
    r"""\brequire\(\s*['"](\.[^'"]+)['"]\s*\)|\bimport\(\s*['"](\.[^'"]+)['"]\s*\)|\bfrom\s*['"](\.[^'"]+)['"]"""
)


def js_graph(package: pathlib.Path) -> dict:
    """Each file of the package (by file name) and the files of the package it loads."""
    files = sorted(p for p in package.rglob("*") if p.is_file() and p.name.endswith(JS_SUFFIXES))
    graph: dict = {}
    for path in files:
        text = re.sub(r"/\*.*?\*/", "", path.read_text(), flags=re.S)
        text = re.sub(r"^\s*//[^\n]*", "", text, flags=re.M)
        deps = set()
        for spec in (next(filter(None, m)) for m in JS_IMPORT.findall(text)):
            target = (path.parent / spec).resolve()
            candidates = [target, target.with_name(target.name.removesuffix(".js") + ".d.ts")]
            candidates += [target.with_name(target.name + s) for s in JS_SUFFIXES]
            hit = next((c for c in candidates if c.is_file() and package.resolve() in c.parents), None)
            if hit is not None:
                deps.add(hit.relative_to(package.resolve()).as_posix())
        module = path.relative_to(package).as_posix()
        graph[module] = deps - {module}
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
    checks = []
    for crate in rust_crates():
        graph = rust_graph(ROOT / crate)
        checks.append((crate, graph, stated_order(ROOT / crate, set(graph))))
    checks += [(p, python_graph(ROOT / p), None) for p in PYTHON_PACKAGES]
    checks += [(p, js_graph(ROOT / p), None) for p in JS_PACKAGES]
    for name, graph, order in checks:
        if show:
            for module in sorted(graph):
                print(f"{name}: {module} -> {', '.join(sorted(graph[module])) or '-'}")
        found = circles(graph)
        for comp in found:
            edges = [f"{a} -> {b}" for a in comp for b in sorted(graph[a]) if b in comp]
            print(f"import circle in {name}: {', '.join(comp)} ({'; '.join(edges)})")
        faults = order_faults(graph, order) if order is not None else []
        for fault in faults:
            print(f"import order in {name} (its root's doc lists the order): {fault}")
        failed = failed or bool(found or faults)
        if not (found or faults):
            stated = ", in the stated order" if order is not None else ""
            print(f"imports: {name}: {len(graph)} modules, no circle{stated}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
