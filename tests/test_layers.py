"""The layers hold: no import runs against the documented direction, and no import loop exists.

The direction (README, "Layers"), lowest first — a module may import its own layer and any
layer before it:

    errors, events, catalog, files, diskspace, plugins  ←  script  ←  plan  ←  render  ←  encode  ←  post  ←  qc
      ←  deliver  ←  run  ←  front ends (cli, doctor, maccheck, server, cluster, draft, comfy)

``run`` is the pipeline: one render from plan to delivered folder, and what sits beside it at
that level (the shot cache, retakes, the fidelity-gated encoder, ``daotai qc DIR``'s recheck,
--dry-run's estimate, the stages' progress labels).

``runtime`` and ``mlx`` are side layers: they may import the bottom layers, ``script`` and
``plan`` (and ``mlx`` may import ``runtime``); ``render`` and everything after it may import them.
Imports inside functions count as much as those at the top of a module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "daotai"
ORDER = ("bottom", "script", "plan", "render", "encode", "post", "qc", "deliver", "run", "front")
BOTTOM = {"errors", "events", "catalog", "files", "diskspace", "plugins", "__init__"}
FRONT = {"cli", "doctor", "maccheck", "server", "cluster", "draft", "comfy"}
SIDE = {"runtime": {"bottom", "script", "plan"}, "mlx": {"bottom", "script", "plan", "runtime"}}


def layer_of(module: str) -> str:
    """The layer of a ``daotai.*`` module name."""
    top = module.split(".")[1] if "." in module else "__init__"
    if top in BOTTOM:
        return "bottom"
    if top in FRONT:
        return "front"
    if top in SIDE or top in ORDER:
        return top
    raise AssertionError(f"{module}: its package {top!r} has no documented layer; add it to the README and here")


def allowed(importer: str, imported: str) -> bool:
    """Whether a module of layer ``importer`` may import one of layer ``imported``."""
    if importer == imported:
        return True
    if importer in SIDE:
        return imported in SIDE[importer]
    if imported in SIDE:
        return ORDER.index(importer) >= ORDER.index("render")
    return ORDER.index(imported) < ORDER.index(importer)


def module_name(path: Path, src: Path = SRC) -> str:
    parts = ("daotai", *path.relative_to(src).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> list[tuple[str, int]]:
    """Every ``daotai`` module a file imports (anywhere in it), with the line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found += [(n, node.lineno) for n in names if n == "daotai" or n.startswith("daotai.")]
    return found


def graph(src: Path = SRC) -> dict[str, list[tuple[str, int]]]:
    """Module → the daotai modules it imports (names resolved to modules that exist)."""
    modules = {module_name(p, src): p for p in src.rglob("*.py")}
    edges: dict[str, list[tuple[str, int]]] = {}
    for name, path in modules.items():
        targets = []
        for target, line in imports_of(path):
            while target not in modules and "." in target:  # `from pkg import name`: name may be an attribute
                target = target.rsplit(".", 1)[0]
            if target in modules and target != name:
                targets.append((target, line))
        edges[name] = targets
    return edges


def upward_imports(edges: dict[str, list[tuple[str, int]]]) -> list[str]:
    return sorted({f"{a}:{line} imports {b} ({layer_of(a)} -> {layer_of(b)})"
                  for a, targets in edges.items() for b, line in targets
                   if a != "daotai" and b != "daotai" and not allowed(layer_of(a), layer_of(b))})


def loops(edges: dict[str, list[tuple[str, int]]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target, _ in edges.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return groups


def test_no_import_runs_against_the_layers():
    assert upward_imports(graph()) == []


def test_no_import_loops():
    edges = {k: [(t, line) for t, line in v if t != "daotai"] for k, v in graph().items()}
    assert loops(edges) == []


def test_the_check_catches_an_upward_import(tmp_path):
    """A deliberate upward import (plan importing the pipeline, daotai.run) is reported, with its line."""
    import shutil

    copy = tmp_path / "daotai"
    shutil.copytree(SRC, copy, ignore=shutil.ignore_patterns("__pycache__"))
    timing = copy / "plan" / "timing.py"
    timing.write_text(timing.read_text(encoding="utf-8") + "\n\ndef _bad():\n    from daotai.run.pipeline import run\n",
                      encoding="utf-8")
    found = upward_imports(graph(copy))
    assert len(found) == 1 and found[0].startswith("daotai.plan.timing:") and "(plan -> run)" in found[0]


@pytest.mark.parametrize("importer, imported, ok", [
    ("plan", "script", True), ("script", "plan", False), ("render", "runtime", True), ("runtime", "render", False),
    ("mlx", "runtime", True), ("plan", "runtime", False), ("front", "run", True), ("run", "front", False), ("qc", "deliver", False),
])
def test_the_direction_itself(importer, imported, ok):
    assert allowed(importer, imported) is ok


def test_no_code_outside_the_backends_compares_a_backend_name():
    """Backend-specific behaviour is a hook on the backend's spec (render/spec.py), not a name compared elsewhere."""
    import re

    pattern = re.compile(r"""(?<![.\w])backend\s*(?:==|!=)\s*["']|["']\s*(?:==|!=)\s*backend\b""")
    found = [f"{path.relative_to(SRC)}:{number}" for path in sorted(SRC.rglob("*.py"))
             if path.relative_to(SRC).parts[0] != "render"
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert found == []
