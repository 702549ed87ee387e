"""daotai.files: atomic writes leave either the whole new file or nothing, and one temp naming scheme."""

from __future__ import annotations

import os
import re
import stat
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from daotai import files
from daotai.files import (
    atomic_path,
    atomic_write_bytes,
    atomic_write_text,
    is_temp_for,
    remove_temp_files,
    sha256_file,
    temp_files_for,
    temp_path,
)

SRC = Path(__file__).resolve().parents[1] / "src" / "daotai"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_write_text_and_bytes_replace_the_target_with_plain_permissions(tmp_path):
    target = tmp_path / "sub" / "plan.json"
    atomic_write_text(target, "一\n")
    assert target.read_bytes() == "一\n".encode()
    atomic_write_bytes(target, b"two")
    assert target.read_bytes() == b"two"
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~_umask()
    assert sorted(p.name for p in target.parent.iterdir()) == ["plan.json"]


def test_sha256_file(tmp_path):
    path = tmp_path / "x.bin"
    path.write_bytes(b"abc" * 1000)
    import hashlib

    assert sha256_file(path) == sha256_file(path, chunk=7) == hashlib.sha256(b"abc" * 1000).hexdigest()


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_a_failure_leaves_no_file_at_the_target_and_no_temp(tmp_path, error):
    target = tmp_path / "shot.mp4"
    with pytest.raises(error):
        with atomic_path(target) as temp:
            temp.write_bytes(b"half")
            assert temp.parent == tmp_path and is_temp_for(temp, target)
            raise error()
    assert list(tmp_path.iterdir()) == []


def test_a_failure_leaves_an_existing_target_as_it_was(tmp_path):
    target = tmp_path / "manifest.json"
    target.write_text("old")
    with pytest.raises(TypeError):
        atomic_write_bytes(target, "not bytes")  # type: ignore[arg-type]  # fails while writing
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]


def test_a_folder_is_published_whole_or_not_at_all(tmp_path):
    target = tmp_path / "converted"
    with pytest.raises(OSError):
        with atomic_path(target) as temp:
            (temp / "transformer").mkdir(parents=True)
            (temp / "transformer" / "w.bin").write_bytes(b"w")
            raise OSError("disk full")
    assert list(tmp_path.iterdir()) == []
    with atomic_path(target) as temp:
        (temp / "transformer").mkdir(parents=True)
        (temp / "transformer" / "w.bin").write_bytes(b"w")
    assert (target / "transformer" / "w.bin").read_bytes() == b"w"
    assert [p.name for p in tmp_path.iterdir()] == ["converted"]


def test_temp_names_and_leftover_cleanup(tmp_path):
    target = tmp_path / "s01.mp4"
    temp = temp_path(target)
    assert re.fullmatch(r"\.s01\.mp4\.[0-9a-f]{8}\.partial\.mp4", temp.name) and temp.parent == tmp_path
    assert temp_path(target) != temp  # a fresh random part every time
    assert temp_path(tmp_path / "folder").name.endswith(".partial")
    for name in (temp.name, ".s01.mp4.0badc0de.partial.mp4"):
        (tmp_path / name).write_bytes(b"left by a killed writer")
    others = [".s02.mp4.0badc0de.partial.mp4", ".s01.mp4.0badc0de.partial.mov", "s01.mp4.part",
              ".s01.mp4.xyz.partial.mp4"]
    for name in others:
        (tmp_path / name).write_bytes(b"not ours")
    assert len(temp_files_for(target)) == 2
    assert remove_temp_files(target) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(others)
    assert remove_temp_files(tmp_path / "missing" / "x.mp4") == 0


def test_every_writer_uses_the_one_naming_scheme(tmp_path, monkeypatch):
    """Text files, videos, cluster shot placement and server references all publish through daotai.files."""
    from daotai.cluster.runner import _place
    from daotai.encode import procsink
    from daotai.encode.video import write_gray8
    from daotai.plan.layout import RenderLayout
    from daotai.server.references import _link_or_copy

    moves: list[tuple[Path, Path]] = []
    real_replace = os.replace

    def recording_replace(src, dst):
        moves.append((Path(src), Path(dst)))
        return real_replace(src, dst)

    monkeypatch.setattr(files.os, "replace", recording_replace)
    atomic_write_text(tmp_path / "qc.json", "{}\n")
    write_gray8([np.zeros((16, 16), np.uint8)] * 2, tmp_path / "mask.mkv", Fraction(24))
    _link_or_copy(tmp_path / "qc.json", tmp_path / "references" / "copy.json")
    layout = RenderLayout(tmp_path / "out")
    record = SimpleNamespace(files={"shot": "shots/a.mp4"})
    list(_place(SimpleNamespace(record=record, blobs={"shots/a.mp4": b"video"}, host="h", pid=1), layout, "a"))
    assert {dst for _, dst in moves} == {tmp_path / "qc.json", tmp_path / "mask.mkv",
                                        tmp_path / "references" / "copy.json", layout.shot("a")}
    for src, dst in moves:
        assert src.parent == dst.parent and is_temp_for(src, dst), (src, dst)
    assert procsink.remove_temp_files is remove_temp_files


def test_no_module_makes_temp_files_its_own_way():
    """Temp-then-rename lives in daotai.files only: no other module names temps or renames them itself."""
    pattern = re.compile(r"os\.replace\(|os\.rename\(|mkstemp\(|NamedTemporaryFile\(|[\"']\.partial|\.partial[\"']")
    found = []
    for path in SRC.rglob("*.py"):
        if path == SRC / "files.py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line):
                found.append(f"{path.relative_to(SRC)}:{number}: {line.strip()}")
    assert found == []
