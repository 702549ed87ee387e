"""The mutation bench makes its mistakes in a copy of the source tree, never in the checkout."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _bench():
    spec = importlib.util.spec_from_file_location("mutation_bench", ROOT / "bench" / "mutation.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_a_mutation_is_made_in_a_copy_and_the_working_tree_is_untouched(tmp_path):
    bench = _bench()
    mutation = next(m for m in bench.MUTATIONS if m.name == "script.alias_tui_jin")
    original = (ROOT / mutation.file).read_bytes()
    tree = bench.source_tree(tmp_path, "worktree")
    assert bench.apply(tree, mutation) is None
    copied = (tree / mutation.file).read_text(encoding="utf-8")
    assert mutation.old not in copied and mutation.old in original.decode("utf-8")
    assert (ROOT / mutation.file).read_bytes() == original
    # The copy is what a test run imports: PYTHONPATH puts it before the installed checkout.
    probe = subprocess.run(
        [sys.executable, "-c", "import daotai.script.vocab as v; print(v.__file__, '推进' in v.CAMERA_ALIASES)"],
        env={"PYTHONPATH": str(tree / "src"), "PATH": ""}, capture_output=True, text=True, check=True)
    where, present = probe.stdout.split()
    assert Path(where).is_relative_to(tree) and present == "False"


def test_a_stale_mutation_is_reported_not_skipped(tmp_path):
    bench = _bench()
    stale = bench.Mutation("x.stale", "src/daotai/plan/timing.py", "no such text", "", ("tests/test_plan_timing.py",), "")
    tree = bench.source_tree(tmp_path, "worktree")
    assert "found 0 times" in bench.apply(tree, stale)


def test_every_mutation_names_existing_tests_and_text_found_once():
    bench = _bench()
    names = [m.name for m in bench.MUTATIONS]
    assert len(names) == len(set(names))
    for m in bench.MUTATIONS:
        assert m.tests, m.name
        for test in m.tests:
            assert (ROOT / test.split("::")[0]).is_file(), (m.name, test)
        assert (ROOT / m.file).read_text(encoding="utf-8").count(m.old) == 1, m.name


@pytest.mark.parametrize("argv", [["--list"], ["--list", "--only", "plan."]])
def test_list_runs_nothing(argv, capsys):
    assert _bench().main(argv) == 0
    assert "plan.seed_hash" in capsys.readouterr().out
