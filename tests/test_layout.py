"""RenderLayout: every deliverable's path classifies back to its kind and shot, for any valid shot id."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daotai.plan.layout import CONTAINERS, RUN_KINDS, SHOT_KINDS, RenderLayout, public_name
from daotai.script.fields import ID_PATTERN

# Shot ids the script schema allows, plus ones built from the control files' endings.
TRICKY = ["a_depth", "x_depth_preview", "m_mask", "depth", "mask", "index", "sequence", "s_depth_preview_mask",
          "a_depth_depth", "shot-1", "0", "Z" * 64]
shot_ids = st.from_regex(ID_PATTERN, fullmatch=True) | st.sampled_from(TRICKY) | st.builds(
    lambda stem, ending: stem + ending, st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_\-]{0,30}", fullmatch=True),
    st.sampled_from(["_depth", "_depth_preview", "_mask", "_depth_mask", "_mask_depth"]))


@given(shot_id=shot_ids, container=st.sampled_from(CONTAINERS))
def test_every_shot_path_classifies_back(shot_id, container):
    layout = RenderLayout(Path("/renders/out"), container)
    files = layout.shot_files(shot_id, controls=True)
    assert set(files) == set(SHOT_KINDS)
    assert len(set(files.values())) == len(files)
    for kind, rel in files.items():
        assert layout.classify(rel) == (kind, shot_id)
        assert layout.classify(PurePosixPath(rel)) == (kind, shot_id)
        assert layout.name_of(rel) == f"{kind}.{shot_id}" == public_name(kind, shot_id)
        assert layout.path(kind, shot_id) == layout.root / rel
    assert layout.shot(shot_id) == layout.root / "shots" / f"{shot_id}{container}"
    assert layout.depth(shot_id).name == f"{shot_id}_depth.mkv"
    assert layout.depth_preview(shot_id).name == f"{shot_id}_depth_preview.mp4"
    assert layout.mask(shot_id).name == f"{shot_id}_mask.mkv"


@given(ids=st.lists(shot_ids, min_size=1, max_size=6, unique=True), controls=st.booleans())
def test_deliverables_have_unique_names_that_read_back(ids, controls):
    layout = RenderLayout(Path("out"))
    found = layout.deliverables(ids, controls)
    assert len(set(found.values())) == len(found)
    for name, rel in found.items():
        assert layout.name_of(rel) == name
    assert ("control_index" in found) == controls
    assert {"video", "plan", "qc", "manifest", "contact_sheet", "timeline"} <= set(found)


def test_whole_render_files():
    layout = RenderLayout(Path("out"), ".mov")
    expected = {
        "sequence": "sequence.mov", "plan": "plan.json", "control_index": "control/index.json", "qc": "qc.json",
        "contact_sheet": "contact_sheet.png", "timeline": "timeline.otio", "manifest": "manifest.json",
        "thumbnail": "thumbnail.jpg", "spritesheet": "spritesheet.jpg", "srt": "sequence.srt",
        "vtt": "sequence.vtt", "boards": "boards.pdf", "timeline_xml": "timeline.xml",
        "timeline_edl": "timeline.edl", "sequence_camera_usd": "cameras/sequence.usda",
        "sequence_enhanced": "sequence_enhanced.mov", "enhance_manifest": "enhance.json",
    }
    assert set(expected) == set(RUN_KINDS)
    for kind, rel in expected.items():
        assert layout.relative(kind) == rel
        assert layout.path(kind) == Path("out") / rel
        assert layout.classify(rel) == (kind, None)
    properties = ("sequence", "plan", "control_index", "qc", "contact_sheet", "timeline", "manifest",
                  "thumbnail", "spritesheet")
    assert [getattr(layout, name) for name in properties] == [Path("out") / expected[k] for k in properties]
    assert layout.name_of("sequence.mov") == "video"


@pytest.mark.parametrize("rel", [
    "shots/a.mov", "sequence.mov", "timeline.mp4", "timeline.a0.edl", "timeline.a1.xml", "cameras/a.json",
    "cameras/sub/a.usda", "cameras/.usda", "takes/a/take1/a.mp4", "enhance.json/x", "control/a.mkv",
    "control/a_depth.mp4", "control/a_depth_preview.mkv", "control/_depth.mkv", "control/.a_depth.mkv",
    "shots/sub/a.mp4", "shots/.a.mp4", "shots/.a.mp4.0badc0de.partial.mp4", "../plan.json", "/plan.json",
    "shots/a.b.mp4", "shots/.mp4", "control/index.json/x", "", "shots", "control/a_mask.mkv.part",
])
def test_other_names_are_not_deliverables(rel):
    with pytest.raises(ValueError):
        RenderLayout(Path("out")).classify(rel)


@pytest.mark.parametrize("bad", ["", "a/b", "../x", ".x", "a.b", "-a", "x" * 65, None])
def test_invalid_shot_ids_get_no_path(bad):
    with pytest.raises(ValueError):
        RenderLayout(Path("out")).shot(bad)
    with pytest.raises(ValueError):
        public_name("mask", bad)


def test_kinds_are_checked():
    layout = RenderLayout(Path("out"))
    with pytest.raises(ValueError):
        layout.relative("thumbnails")
    with pytest.raises(ValueError):
        layout.relative("qc", "s01")  # a whole-render file has no shot
    with pytest.raises(ValueError):
        RenderLayout(Path("out"), ".mkv")


def test_containers_are_the_encoders():
    from daotai.encode.video import CODECS, EncodeSettings

    assert {EncodeSettings(codec=c).container for c in CODECS} == set(CONTAINERS)


def test_find_reads_the_container_from_a_render_folder(tmp_path):
    assert RenderLayout.find(tmp_path).container == ".mp4"
    (tmp_path / "shots").mkdir()
    (tmp_path / "shots" / "a.mov").write_bytes(b"")
    assert RenderLayout.find(tmp_path).container == ".mov"
    (tmp_path / "sequence.mp4").write_bytes(b"")
    assert RenderLayout.find(tmp_path) == RenderLayout(tmp_path, ".mp4")


def test_make_folders(tmp_path):
    RenderLayout(tmp_path / "a").make_folders(controls=False)
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["shots"]
    RenderLayout(tmp_path / "b").make_folders(controls=True)
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["control", "shots"]


def test_pipeline_shot_files_follow_the_layout():
    from daotai.run.settings import PipelineSettings, layout_for
    from daotai.run.shots import shot_files

    for codec, controls in (("h264", True), ("prores", False)):
        settings = PipelineSettings(codec=codec, controls=controls)
        layout = layout_for(Path("out"), settings)
        assert shot_files("s01", settings) == layout.shot_files("s01", controls)
    assert layout_for(Path("out"), PipelineSettings(codec="prores")).sequence == Path("out/sequence.mov")


def test_layout_is_light():
    """Pure path arithmetic: importing it loads no numpy and no video library."""
    code = "import sys, daotai.plan.layout, daotai.files; print(sorted({'numpy', 'av'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_subtitles_and_board_pages_read_back():
    from daotai.plan.layout import board_page_id

    layout = RenderLayout(Path("out"))
    assert layout.relative("shot_srt", "a_depth") == "shots/a_depth.srt"
    assert layout.classify("shots/a_depth.vtt") == ("shot_vtt", "a_depth")
    assert layout.classify("shots/s1.srt") == ("shot_srt", "s1") and layout.name_of("shots/s1.srt") == "shot_srt.s1"
    assert layout.relative("board_page", board_page_id(3)) == "boards/page_03.png"
    assert layout.classify("boards/page_12.png") == ("board_page", "12")
    assert layout.name_of("sequence.srt") == "srt" and layout.name_of("boards.pdf") == "boards"
    for bad in ("boards/page_1.png", "boards/page_01.jpg", "boards/x.png", "shots/a.b.srt", "control/a.srt"):
        with pytest.raises(ValueError):
            layout.classify(bad)
    with pytest.raises(ValueError, match="page"):
        board_page_id(0)


def test_public_names_parse_back():
    from daotai.plan.layout import ITEM_KINDS, NUMBERED_KINDS, RUN_KINDS, parse_public_name, public_name

    for kind in (k for k in ITEM_KINDS if k not in NUMBERED_KINDS):
        for shot_id in ("s01", "a_depth", "shot-2"):
            assert parse_public_name(public_name(kind, shot_id)) == (kind, shot_id)
    for kind in RUN_KINDS:
        assert parse_public_name(public_name(kind)) == (kind, None)
    assert parse_public_name(public_name("board_page", "07")) == ("board_page", "07")
    assert parse_public_name(public_name("timeline_audio_edl", "2")) == ("timeline_audio_edl", "2")
    for bad in ("shot.", "shot.a.b", "nope", "movie.s01", "board_page.x", "board_page.7", "timeline_audio_edl.0",
                "timeline_audio_edl.a1"):
        with pytest.raises(ValueError, match="public name"):
            parse_public_name(bad)
