"""The layout's rules, checked on the source (docs/architecture.md, "Layout"):

* no edits of Python's module search path anywhere (the packages are installed; tests and
  tools run as modules): ``git grep`` of it finds nothing in the repository;
* ``tlm`` never imports ``tb`` or cocotb; core packages (tlm/core, tb/core, tb/agents) import
  no device package, and device packages import no other device's;
* no import cycles among the project's modules (module-level imports);
* no private name (``_x``) imported from another module of the project;
* ruff (configured in pyproject.toml) reports nothing.
"""
from __future__ import annotations

import ast
import shutil
import subprocess
import sys

import pytest

from tests.support import REPO, tool_missing

CORE = ("tlm.core", "tb.core", "tb.agents")


def _tracked() -> list:
    return [f for f in subprocess.run(["git", "ls-files", "*.py"], cwd=REPO, capture_output=True, text=True,
                                      check=True).stdout.split() if (REPO / f).is_file()]


def _module(path: str) -> str:
    mod = path[:-3].replace("/", ".")
    return mod[: -len(".__init__")] if mod.endswith(".__init__") else mod


def _imports(path: str, module_level: bool) -> list:
    """(line, imported module, names) of the file's imports, relative ones resolved."""
    tree = ast.parse((REPO / path).read_text())
    pkg = _module(path) if path.endswith("__init__.py") else _module(path).rpartition(".")[0]
    nodes = tree.body if module_level else list(ast.walk(tree))
    out = []
    for n in nodes:
        if isinstance(n, ast.Import):
            out += [(n.lineno, a.name, ()) for a in n.names]
        elif isinstance(n, ast.ImportFrom):
            base = n.module or ""
            if n.level:
                parts = pkg.split(".")
                base = ".".join(parts[: len(parts) - n.level + 1] + ([base] if base else []))
            out.append((n.lineno, base, tuple(a.name for a in n.names)))
    return out


def _project(mod: str) -> bool:
    return mod.split(".")[0] in ("tlm", "tb", "tests", "tools")


def _device_packages() -> set:
    from tlm.core.registry import devices
    return {d.package.split(".")[1] for d in devices().values()}


DEVICE_PACKAGES = _device_packages()        # ethos_u85, ne16, ...: tlm/<p>, tb/<p>, tests/<p>


def _device(mod: str) -> "str | None":
    """The device package a module belongs to (tlm/<device>/, tb/<device>/, tests/<device>/);
    None for shared ones (core, agents, tests/conformance, tests/nets, ...)."""
    p = mod.split(".")
    if len(p) > 1 and p[0] in ("tlm", "tb", "tests") and p[1] in DEVICE_PACKAGES:
        return p[1]
    return None


def test_no_module_search_path_edits():
    needle = "sys" + ".path"                 # spelt apart, so this file does not match itself
    p = subprocess.run(["git", "grep", "-n", needle], cwd=REPO, capture_output=True, text=True)
    assert p.stdout == "", p.stdout


def test_import_direction():
    bad = []
    for f in _tracked():
        mod = _module(f)
        for line, imp, _ in _imports(f, module_level=False):
            if mod.startswith("tlm") and (imp.split(".")[0] in ("tb", "cocotb", "cocotb_tools")):
                bad.append(f"{f}:{line}: tlm imports {imp}")
            if mod.startswith(CORE) and _device(imp) and not imp.startswith("tests"):
                bad.append(f"{f}:{line}: core module imports device package {imp}")
            own, other = _device(mod), _device(imp)
            if own and other and own != other and _project(imp):
                bad.append(f"{f}:{line}: device {own} imports device {other} ({imp})")
    assert not bad, "\n".join(bad)


def test_no_import_cycles():
    mods = {_module(f): f for f in _tracked()}
    graph = {}
    for mod, f in mods.items():
        deps = set()
        for _, imp, names in _imports(f, module_level=True):
            for cand in [imp] + [f"{imp}.{n}" for n in names]:
                if cand in mods and cand != mod:
                    deps.add(cand)
        graph[mod] = deps
    # Tarjan's strongly connected components
    index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
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
            # a package and its own submodule re-exported by __init__ is not a cycle
            if len(comp) > 1 and not all(c.startswith(min(comp, key=len)) for c in comp):
                cycles.append(sorted(comp))
    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    for v in graph:
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


def test_no_private_names_across_modules():
    mods = {_module(f) for f in _tracked()}
    bad = []
    for f in _tracked():
        for line, imp, names in _imports(f, module_level=False):
            if not _project(imp) or imp == _module(f):
                continue
            priv = [n for n in names if n.startswith("_") and not n.startswith("__") and f"{imp}.{n}" not in mods]
            if priv:
                bad.append(f"{f}:{line}: from {imp} import {', '.join(priv)}")
    assert not bad, "private names imported across modules:\n" + "\n".join(bad)


def test_ruff_is_clean():
    exe = shutil.which("ruff", path=str(REPO / ".venv" / "bin")) or shutil.which("ruff")
    if exe is None:
        tool_missing("ruff not installed (pip install -e '.[test]')")
    p = subprocess.run([exe, "check", "--no-cache", "."], cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr


@pytest.mark.parametrize("path", ["LICENSE"])
def test_license_file(path):
    text = (REPO / path).read_text()
    assert "Apache License" in text and "Version 2.0" in text
