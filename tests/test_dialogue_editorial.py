"""Dialogue as editorial material: subtitles (SRT, WebVTT) of the sequence and each shot read back
by PyAV with the times assembly gives the shots, one OTIO marker per line, the lines in FCP XML
and EDL, and the planner's warning when a shot is too short for its lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import av
import opentimelineio as otio
import pytest

from daotai.deliver.subtitles import frame_ms, sequence_cues, split_frames, to_srt, to_vtt, write_subtitles
from daotai.plan.layout import RenderLayout
from daotai.plan.planner import plan_script
from daotai.plan.reading import needed_seconds
from daotai.run.pipeline import run
from daotai.run.records import Finished
from daotai.run.settings import PipelineSettings
from daotai.script.load import validate_script

ROOT = Path(__file__).resolve().parent.parent

# 24 fps: a = 24 frames from 0; b = 24 frames, its 0.25 s crossfade (6 frames) starts it at 18;
# c = 18 frames from 42 after a dip to black (no overlap); 60 frames in all.
SCRIPT = {
    "fps": 24,
    "size": "96x64",
    "scene": {"name": "test stage", "set_pieces": []},
    "characters": [{"id": "mia", "name": "Mia", "position": [-0.5, 0.0]}, {"id": "bo", "name": "Bo",
                                                                           "position": [0.5, 0.0]}],
    "shots": [
        {"shot_id": "a", "duration": 1.0, "camera": "static",
         "dialogue": [{"character": "mia", "line": "Where were you last night?"}, {"character": "bo", "line": "Out."}]},
        {"shot_id": "b", "duration": 1.0, "camera": "static", "transition": {"type": "crossfade", "duration": 0.25},
         "dialogue": [{"character": "bo", "line": "With friends."}]},
        {"shot_id": "c", "duration": 0.75, "camera": "static", "transition": {"type": "fade", "duration": 0.5},
         "dialogue": [{"character": "mia", "line": "好的。", "language": "zh"}]},
    ],
}
# The crossfade's overlap (frames 18-23) is split at its middle: a's lines end and b's begin at
# frame 21. a's 21 frames go to its lines in proportion to their reading time (1.67 s : 0.33 s),
# so frame 18 (17.5 rounded half up) ends Mia's line.
SEQUENCE_CUES = [(0, 750, "MIA: Where were you last night?"), (750, 875, "BO: Out."),
                 (875, 1750, "BO: With friends."), (1750, 2500, "MIA: 好的。")]


@pytest.fixture(scope="module")
def render(tmp_path_factory):
    out = tmp_path_factory.mktemp("dialogue") / "out"
    plan = plan_script(validate_script(SCRIPT))
    events = list(run(plan, out, PipelineSettings(controls=False, camera_qc=False)))
    assert isinstance(events[-1], Finished)
    return plan, out, events


def read_subtitles(path: Path) -> list[tuple[int, int, str]]:
    """(start ms, end ms, text) of every cue, as FFmpeg's demuxer and decoder read the file."""
    cues = []
    with av.open(str(path)) as container:
        stream = container.streams.subtitles[0]
        assert stream.time_base == Fraction(1, 1000)
        for packet in container.demux(stream):
            if packet.size == 0:
                continue
            for subtitle in packet.decode():
                text = subtitle.dialogue.decode("utf-8").replace("\\N", " ")
                cues.append((packet.pts, packet.pts + packet.duration, text))
    return cues


def test_plan_timing_as_assembled():
    plan = plan_script(validate_script(SCRIPT))
    assert [(s.start_frame, s.frames) for s in plan.shots] == [(0, 24), (18, 24), (42, 18)]
    assert plan.total_frames == 60


@pytest.mark.parametrize("name", ["sequence.srt", "sequence.vtt"])
def test_sequence_subtitles_read_back_with_assembly_times(render, name):
    _, out, _ = render
    assert read_subtitles(out / name) == SEQUENCE_CUES


def test_shot_subtitles_count_from_the_shot_file_start(render):
    _, out, _ = render
    # a alone: its 24 frames split 20 : 4 (1.67 s : 0.33 s of reading)
    assert read_subtitles(out / "shots" / "a.srt") == [(0, 833, "MIA: Where were you last night?"),
                                                      (833, 1000, "BO: Out.")]
    assert read_subtitles(out / "shots" / "b.vtt") == [(0, 1000, "BO: With friends.")]
    assert read_subtitles(out / "shots" / "c.srt") == [(0, 750, "MIA: 好的。")]
    assert (out / "sequence.vtt").read_text(encoding="utf-8").startswith("WEBVTT\n")


def test_subtitles_are_published_deliverables(render):
    from daotai.run.recheck import check_files
    from daotai.server.schemas import MEDIA_TYPES
    from daotai.server.worker import collect_outputs

    _, out, events = render
    names = {o.name for o in collect_outputs(out)}
    assert {"srt", "vtt", "shot_srt.a", "shot_vtt.a", "shot_srt.c", "shot_vtt.c"} <= names
    assert MEDIA_TYPES[".srt"] == "application/x-subrip" and MEDIA_TYPES[".vtt"] == "text/vtt"
    said = {(e.kind, e.shot_id) for e in events if type(e).__name__ == "Output"}
    assert {("srt", None), ("vtt", None), ("shot_srt", "b"), ("shot_vtt", "b")} <= said
    manifest = json.loads((out / "manifest.json").read_text())
    assert check_files(RenderLayout.find(out), manifest)["ok"]


def _dialogue_markers(clip: otio.schema.Clip) -> list[otio.schema.Marker]:
    return [m for m in clip.markers if "dialogue" in m.metadata.get("daotai", {})]


def test_otio_has_one_marker_per_line_at_the_subtitle_times(render):
    _, out, _ = render
    timeline = otio.adapters.read_from_file(str(out / "timeline.otio"))
    found = []
    for clip in timeline.tracks[0].find_clips():
        placed = clip.range_in_parent().start_time  # the clip's first frame on the sequence
        for marker in _dialogue_markers(clip):
            start = placed + (marker.marked_range.start_time - clip.source_range.start_time)
            end = start + marker.marked_range.duration
            shown, marked = clip.source_range, marker.marked_range  # the marker lies within what the clip shows
            assert shown.start_time <= marked.start_time and marked.end_time_exclusive() <= shown.end_time_exclusive()
            found.append((frame_ms(int(start.value), Fraction(24)), frame_ms(int(end.value), Fraction(24)), marker.name,
                          marker.metadata["daotai"]["dialogue"]["speaker"], marker.metadata["daotai"]["dialogue"]["line"]))
    assert [f[:3] for f in found] == SEQUENCE_CUES
    assert [f[3:] for f in found] == [("Mia", "Where were you last night?"), ("Bo", "Out."), ("Bo", "With friends."),
                                      ("Mia", "好的。")]


def test_fcp_xml_and_edl_carry_the_lines(render):
    _, out, _ = render
    xml = (out / "timeline.xml").read_text(encoding="utf-8")
    for _, _, text in SEQUENCE_CUES:
        assert f"<name>{text}</name>" in xml
    read = otio.adapters.read_from_file(str(out / "timeline.xml"))
    assert sum(len(_named(c.markers, ":")) for c in read.tracks[0].find_clips()) == 4
    edl = (out / "timeline.edl").read_text(encoding="utf-8")
    locators = [line for line in edl.splitlines() if line.startswith("* LOC:")]
    assert any("MIA: WHERE WERE YOU LAST NIGHT?" in line for line in locators)
    assert any("BO: WITH FRIENDS." in line for line in locators)
    # the adapter repeats a dissolve's outgoing clip (and its locators) in the dissolve's event
    assert len({line for line in locators if "CYAN" in line}) == 4


def _named(markers, fragment: str) -> list:
    return [m for m in markers if fragment in m.name]


def test_no_dialogue_no_subtitles(tmp_path):
    silent = {**SCRIPT, "shots": [{k: v for k, v in s.items() if k != "dialogue"} for s in SCRIPT["shots"]]}
    plan = plan_script(validate_script(silent))
    assert sequence_cues(plan) == [] and write_subtitles(plan, RenderLayout(tmp_path)) == []
    assert list(tmp_path.iterdir()) == []


def test_split_frames_is_proportional_and_abutting():
    assert split_frames(0, 21, [1.0, 1.0, 2.0]) == [(0, 5), (5, 11), (11, 21)]  # 5.25, 10.5 rounded half up
    assert split_frames(10, 13, [100.0, 0.001, 0.001]) == [(10, 11), (11, 12), (12, 13)]  # a frame each at least
    with pytest.raises(ValueError):
        split_frames(0, 1, [1.0, 1.0])


def test_too_short_a_shot_shows_its_lines_together():
    plan = plan_script(validate_script({**SCRIPT, "fps": 2}))  # a: 2 frames for 2 lines, b overlaps it
    cues = [c for c in sequence_cues(plan) if c.shot_id == "a"]
    assert len(cues) == 1 and cues[0].label == "MIA: Where were you last night? / BO: Out."


def test_text_is_escaped_for_each_format():
    plan = plan_script(validate_script({**SCRIPT, "shots": [
        {"shot_id": "a", "duration": 2.0, "dialogue": [{"character": "mia", "line": "a <b> & c --> d"}]}]}))
    cues = sequence_cues(plan)
    assert "MIA: a <b> & c -> d" in to_srt(cues, Fraction(24))
    assert "MIA: a &lt;b&gt; &amp; c --&gt; d" in to_vtt(cues, Fraction(24))


def test_reading_rate_rule():
    assert needed_seconds(" ".join(["word"] * 60)) == pytest.approx(20.0)  # 3 words a second
    assert needed_seconds("Incomprehensibilities") == pytest.approx(21 / 17)  # long words: 17 characters a second
    assert needed_seconds("今天天气怎么样？") == pytest.approx(7 / 4.5)  # punctuation is not read


def test_sixty_words_in_one_second_is_warned_in_plan_and_validate(tmp_path):
    data = {"characters": [{"id": "mia", "name": "Mia"}],
            "shots": [{"shot_id": "rush", "duration": 1.0, "dialogue": [{"character": "mia",
                                                                          "line": " ".join(["word"] * 60)}]},
                      {"shot_id": "calm", "duration": 2.0, "dialogue": [{"character": "mia", "line": "Fine."}]}]}
    plan = plan_script(validate_script(data))
    (warning,) = [w for w in plan.shots[0].warnings if "dialogue" in w]
    assert "needs 20.0 s" in warning and "shot lasts 1 s" in warning and "line 1 (Mia)" in warning
    assert not any("dialogue" in w for w in plan.shots[1].warnings)
    script = tmp_path / "rush.json"
    script.write_text(json.dumps(data))
    result = subprocess.run([sys.executable, "-m", "daotai.cli", "validate", str(script)], capture_output=True,
                            text=True, cwd=ROOT, env=dict(os.environ, COLUMNS="400"), timeout=120)
    assert result.returncode == 0
    assert "rush: dialogue needs 20.0 s but the shot lasts 1 s" in result.stderr


def test_long_lines_wrap_as_subtitles_do():
    from daotai.deliver.subtitles import wrapped

    english = wrapped("MIA: " + " ".join(["rain"] * 30))
    assert len(english) > 2 and all(len(line) <= 42 for line in english)
    chinese = wrapped("林：今天晚上我们在老地方见面吧，不见不散，好不好？")
    assert [len(line) for line in chinese] == [16, 9]
