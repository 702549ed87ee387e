"""The render layout names every file a render writes: nothing lands under a name it does not know.

A real render of the office example, small, with every optional deliverable asked for
(USD cameras, enhanced copies, board pages, dialogue subtitles, a soundtrack for the audio
EDL), is read back file by file through :class:`RenderLayout`; the layout's own kinds then
each have a media type the server sends them with.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pytest

from daotai.plan.layout import (
    CAMERA_ENDINGS,
    ITEM_KINDS,
    RUN_KINDS,
    RenderLayout,
    audio_edl_name,
    camera_file_name,
    public_name,
)

ROOT = Path(__file__).resolve().parents[1]
# Kinds a render writes only on request or never itself: the server's previews and the pdf boards
# (this render asks for png pages), and shot subtitles of shots without dialogue.
NOT_WRITTEN_HERE = {"thumbnail", "spritesheet", "boards"}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("everything")
    rate = 22050
    tone = (0.2 * np.sin(2 * np.pi * 220 * np.arange(rate * 12) / rate) * 32767).astype("<i2")  # (N,) int16
    with wave.open(str(folder / "bed.wav"), "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(rate)
        handle.writeframes(tone.tobytes())
    script = json.loads((ROOT / "examples" / "office.json").read_text())
    script["soundtrack"] = {"path": "bed.wav"}
    script["fade_out"] = 0.5
    script["shots"][1]["dialogue"] = [{"character": script["characters"][0]["id"], "line": "Morning."}]
    (folder / "office.json").write_text(json.dumps(script))
    out = folder / "out"
    done = subprocess.run(
        [sys.executable, "-m", "daotai.cli", "render", str(folder / "office.json"), "-o", str(out),
         "--resolution", "160x96", "--usd-cameras", "--enhance", "deflicker", "--boards", "png", "--no-cache"],
        capture_output=True, text=True, cwd=ROOT, timeout=600, env={**os.environ, "DAOTAI_DEBUG": ""})
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_every_file_of_a_render_has_a_name_in_the_layout(rendered):
    layout = RenderLayout.find(rendered)
    assert layout.enhanced  # read from enhance.json
    files = sorted(p.relative_to(rendered).as_posix() for p in rendered.rglob("*") if p.is_file())
    unknown = []
    kinds = set()
    for rel in files:
        try:
            kind, item = layout.classify(rel)
        except ValueError:
            unknown.append(rel)
            continue
        kinds.add(kind)
        assert layout.relative(kind, item) == rel  # and the layout makes that very name
    assert unknown == [], f"written under names the layout does not know: {unknown}"
    assert layout.foreign_files() == []
    expected = {*RUN_KINDS, *ITEM_KINDS} - NOT_WRITTEN_HERE
    manifest = json.loads((rendered / "manifest.json").read_text())
    from daotai.deliver.camera_files import usd_available

    if not usd_available():  # asked for, skipped with a warning, and said so in the manifest
        expected -= {"camera_usd", "sequence_camera_usd"}
        assert [s["reason"] for s in manifest["skipped_outputs"]] == ["usd-core is not installed"]
    assert kinds == expected, (sorted(expected - kinds), sorted(kinds - expected))
    assert set(manifest["files"]) == set(files) - {"manifest.json"}


def test_server_sends_every_kind_with_a_media_type(rendered):
    pytest.importorskip("fastapi")
    from daotai.server.schemas import MEDIA_TYPES

    layout = RenderLayout.find(rendered)
    for kind in (*RUN_KINDS, *ITEM_KINDS):
        item = {"board_page": "01", "timeline_audio_edl": "1"}.get(kind, "s01" if kind in ITEM_KINDS else None)
        rel = layout.relative(kind, item)
        assert Path(rel).suffix in MEDIA_TYPES, (kind, rel)
    assert MEDIA_TYPES[".xml"] == "application/xml" and MEDIA_TYPES[".usda"] == "model/vnd.usda"


def test_new_kinds_read_back_and_have_public_names():
    layout = RenderLayout(Path("out"), ".mp4", enhanced=True)
    assert layout.relative("timeline_xml") == "timeline.xml" and layout.name_of("timeline.edl") == "timeline_edl"
    assert layout.classify("timeline.a2.edl") == ("timeline_audio_edl", "2")
    assert layout.name_of("timeline.a2.edl") == "timeline_audio_edl.2" == public_name("timeline_audio_edl", "2")
    assert audio_edl_name("cut", 3) == "cut.a3.edl"
    for kind, ending in CAMERA_ENDINGS.items():
        assert layout.relative(kind, "s01") == f"cameras/s01{ending}" == f"cameras/{camera_file_name(kind, 's01')}"
        assert layout.name_of(f"cameras/s01{ending}") == f"{kind}.s01"
    assert layout.classify("cameras/sequence.usda") == ("sequence_camera_usd", None)
    assert layout.name_of("sequence_enhanced.mp4") == "video_enhanced" and layout.name_of("enhance.json") == "enhance"
    assert layout.classify("shots/s01_enhanced.mp4") == ("shot_enhanced", "s01")
    # without enhanced copies the same name is a shot's own: a shot may be called s01_enhanced
    assert RenderLayout(Path("out")).classify("shots/s01_enhanced.mp4") == ("shot", "s01_enhanced")


def test_takes_are_the_renders_own_files_but_no_deliverable(tmp_path):
    layout = RenderLayout(tmp_path)
    assert layout.take_dir("s01", 2) == tmp_path / "takes" / "s01" / "take2"
    assert layout.shot_takes_dir("s01") == tmp_path / "takes" / "s01"
    assert layout.is_take_file("takes/s01/take2/s01.mp4")
    for bad in ("takes/s01/take0/a.mp4", "takes/s01/a.mp4", "takes/../take1/a.mp4", "takes/s01/take1/x/a.mp4"):
        assert not layout.is_take_file(bad)
    with pytest.raises(ValueError):
        layout.take_dir("../x", 1)
    with pytest.raises(ValueError):
        layout.classify("takes/s01/take2/s01.mp4")
