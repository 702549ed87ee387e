"""Storyboard pages from the command line: ``daotai render --boards pdf`` and ``daotai boards DIR``
write the pages the web console prints; a PDF reader opens them (poppler's pdfinfo and pdftotext)
and finds the captions, dialogue included."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from daotai.deliver.boards import PAGE_SIZE, board_pages, columns_for, to_pdf, wrap
from daotai.deliver.contact_sheet import _font
from daotai.plan.planner import plan_script
from daotai.script.load import validate_script

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = {
    "title": "Night shift",
    "fps": 12,
    "size": "96x64",
    "scene": {"name": "test stage", "set_pieces": []},
    "characters": [{"id": "mia", "name": "Mia", "position": [0.0, 0.0]}, {"id": "lin", "name": "林",
                                                                         "position": [1.0, 0.0]}],
    "shots": [
        {"shot_id": f"s{i}", "duration": 0.5, "camera": "static", "action": "Mia waits by the door"}
        for i in range(5)
    ],
}
SCRIPT["shots"][0]["dialogue"] = [{"character": "mia", "line": "Where were you?"}]
SCRIPT["shots"][1]["dialogue"] = [{"character": "lin", "line": "我在家。", "language": "zh"}]
SCRIPT["shots"][2]["transition"] = {"type": "fade", "duration": 0.25}  # 2 frames at 12 fps: 0.333 s


def daotai(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "daotai.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, COLUMNS="200"), timeout=300)


def poppler(tool: str, *args: str) -> str:
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} (poppler-utils) is not installed")
    result = subprocess.run([tool, *args], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "Error" not in result.stderr, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    folder = tmp_path_factory.mktemp("boards")
    script = folder / "script.json"
    script.write_text(json.dumps(SCRIPT, ensure_ascii=False), encoding="utf-8")
    result = daotai("render", str(script), "-o", str(folder / "out"), "--no-controls", "--no-cache", "--boards", "pdf")
    assert result.returncode == 0, result.stderr
    return folder / "out"


def test_render_writes_a_pdf_a_reader_opens(rendered):
    pdf = rendered / "boards.pdf"
    info = poppler("pdfinfo", str(pdf))
    assert "Pages:           1" in info and "A4" in info and "Title:           Night shift" in info
    text = poppler("pdftotext", "-layout", str(pdf), "-")
    for words in ("Night shift", "page 1 of 1", "1. s0 · medium · static · 0.5 s", "5. s4", "Mia waits by the door",
                  "Mia: “Where were you?”", "林: “我在家。”", "in: fade 0.333 s"):
        assert words in text, words
    manifest = json.loads((rendered / "manifest.json").read_text())
    assert "boards.pdf" in manifest["files"]


def test_boards_command_writes_png_pages_into_a_render(rendered):
    from daotai.plan.layout import RenderLayout
    from daotai.run.recheck import check_files

    result = daotai("boards", str(rendered), "--format", "png", "--per-page", "4")
    assert result.returncode == 0, result.stderr
    pages = sorted((rendered / "boards").glob("*.png"))
    assert [p.name for p in pages] == ["page_01.png", "page_02.png"]  # 5 shots, 4 a page
    with Image.open(pages[0]) as first:
        assert first.size == PAGE_SIZE
        page = np.asarray(first.convert("RGB"))
    # 2 columns: the first panel's frame (the shot's middle frame, a lit previz stage) is not blank
    assert page[200:400, 100:700].std() > 5
    # and again with more a page: the stale second page goes
    assert daotai("boards", str(rendered), "--format", "png", "--per-page", "6").returncode == 0
    assert [p.name for p in sorted((rendered / "boards").glob("*.png"))] == ["page_01.png"]
    manifest = json.loads((rendered / "manifest.json").read_text())
    assert check_files(RenderLayout.find(rendered), manifest)["ok"]  # written later on purpose, not foreign


def test_boards_command_refuses_bad_options_with_the_rule(rendered, tmp_path):
    result = daotai("boards", str(rendered), "--format", "tiff")
    assert result.returncode == 2 and "--format: 'tiff' must be one of pdf, png" in result.stderr
    result = daotai("boards", str(rendered), "--per-page", "5")
    assert result.returncode == 2 and "--per-page: 5 must be one of 4, 6, 8, 9, 12" in result.stderr
    result = daotai("boards", str(tmp_path))
    assert result.returncode == 1 and "has no plan.json" in result.stderr and "Traceback" not in result.stderr


def test_pages_and_pdf_without_frames(tmp_path):
    plan = plan_script(validate_script({**SCRIPT, "shots": SCRIPT["shots"] * 1}))
    pages = board_pages(plan, {}, per_page=4)
    assert len(pages) == 2 and columns_for(4) == 2 and columns_for(9) == 3 and columns_for(12) == 4
    assert any(t.text == "Mia: “Where were you?”" for t in pages[0].texts)
    path = tmp_path / "b.pdf"
    path.write_bytes(to_pdf(pages, "Night shift"))
    assert "Pages:           2" in poppler("pdfinfo", str(path))
    with pytest.raises(ValueError, match="per_page"):
        board_pages(plan, {}, per_page=5)


def test_wrap_breaks_at_spaces_and_between_chinese_characters():
    font = _font(20)
    lines = wrap("one two three four five six seven eight nine ten", font, 120)
    assert len(lines) > 2 and all(font.getlength(line) <= 120 for line in lines)
    assert " ".join(lines) == "one two three four five six seven eight nine ten"
    chinese = wrap("今天晚上我们在老地方见面吧好不好", font, 100)
    assert len(chinese) > 1 and "".join(chinese) == "今天晚上我们在老地方见面吧好不好"
