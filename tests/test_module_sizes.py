"""Size limits that keep the package readable: no module over 800 lines, no function over 120.

A module past the limit is several modules under one name (split it along its seams); a function
past it is several steps under one name (name the steps). Comment and docstring lines count: they
are part of what a reader has to hold.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "daotai"
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 120


def oversized(root: Path = SRC) -> list[str]:
    """Every module and function of the tree past its limit, as ``path[:line name]: N lines``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(root.parent)
        lines = text.count("\n")
        if lines > MAX_MODULE_LINES:
            found.append(f"{rel}: {lines} lines (modules: at most {MAX_MODULE_LINES})")
        for node in ast.walk(ast.parse(text, str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{rel}:{node.lineno} {node.name}: {length} lines "
                                 f"(functions: at most {MAX_FUNCTION_LINES})")
    return found


def test_no_module_or_function_is_past_its_size():
    assert oversized() == []


def test_no_module_is_named_only_camera():
    # Four modules were once called camera/cameras (the plan's grammar, QC's adherence check, the
    # camera files, the ComfyUI node): each name now says which camera it is about.
    assert sorted(str(p.relative_to(SRC)) for p in SRC.rglob("camera*.py") if p.stem in ("camera", "cameras")) == []


def test_the_check_finds_a_long_module_and_a_long_function(tmp_path):
    package = tmp_path / "daotai"
    package.mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    (package / "long.py").write_text("def long():\n" + body + "\n" * (MAX_MODULE_LINES - MAX_FUNCTION_LINES))
    (package / "short.py").write_text("def short():\n    return 1\n")
    found = oversized(package)
    assert len(found) == 2, found
    assert found[0].startswith("daotai/long.py: 801 lines") and found[1].startswith("daotai/long.py:1 long: 121 lines")
