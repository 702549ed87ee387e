"""A real render with --enhance: enhanced copies beside the planned shots, and the timeline
files (.otio, FCP 7 XML, CMX 3600 EDL) read back with opentimelineio against the render."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import opentimelineio as otio
import pytest

from daotai.encode.read import probe
from daotai.plan.planner import plan_script
from daotai.run.pipeline import run
from daotai.run.records import Finished
from daotai.run.settings import PipelineSettings
from daotai.script.load import validate_script

SCRIPT = {
    "fps": 24,
    "size": "256x144",
    "scene": {"name": "test stage", "set_pieces": []},
    "characters": [{"id": "red", "colour": [0.9, 0.1, 0.1], "position": [0.0, 0.0]}],
    "shots": [
        {"shot_id": "wide", "duration": 1.0, "subject": "red", "framing": "wide", "camera": "static",
         "prompt": "a red figure on an empty stage"},
        {"shot_id": "push", "duration": 1.0, "subject": "red", "framing": "full",
         "camera": {"type": "dolly", "motion": [0, 0, -0.5]}, "transition": {"type": "crossfade", "duration": 0.25}},
        {"shot_id": "pan", "duration": 0.75, "subject": "red", "framing": "medium",
         "camera": {"type": "pan", "rotate": [10, 0, 0]}, "transition": {"type": "fade", "duration": 0.5}},
    ],
}


@pytest.fixture(scope="module")
def render(tmp_path_factory):
    out = tmp_path_factory.mktemp("render")
    plan = plan_script(validate_script(SCRIPT))
    result = None
    events = []
    for event in run(plan, out, PipelineSettings(controls=False, enhance="upscale=2,interpolate=x2")):
        events.append(event)
        if isinstance(event, Finished):
            result = event.result
    assert result is not None
    return plan, result, out, events


def test_planned_shots_untouched_and_qc_passes(render):
    plan, result, out, _ = render
    for shot in plan.shots:
        info = probe(out / "shots" / f"{shot.shot_id}.mp4")
        assert (info.width, info.height, info.frames, info.fps) == (256, 144, shot.frames, Fraction(24))
    assert probe(out / "sequence.mp4").frames == plan.total_frames
    # qc compares the planned shots with the plan: the enhanced copies never upset its format checks
    report = json.loads((out / "qc.json").read_text())
    assert report["failures"] is not None
    assert not [f for f in report["failures"] if "format" in f or "frames" in f], report["failures"]
    assert [s["file"] for s in report["shots"]] == [f"{s.shot_id}.mp4" for s in plan.shots]


def test_enhanced_copies_and_sequence(render):
    plan, _, out, events = render
    record = json.loads((out / "enhance.json").read_text())
    assert [s["step"] for s in record["steps"]] == ["interpolate", "upscale"]
    for shot in plan.shots:
        info = probe(out / "shots" / f"{shot.shot_id}_enhanced.mp4")
        assert (info.width, info.height, info.frames, info.fps) == (512, 288, 2 * shot.frames, Fraction(48))
        assert record["shots"][shot.shot_id]["frames"] == 2 * shot.frames
        assert record["shots"][shot.shot_id]["enhanced"] == f"shots/{shot.shot_id}_enhanced.mp4"
    seq = probe(out / "sequence_enhanced.mp4")
    crossfade = 2 * plan.shot("push").transition.frames  # same seconds at twice the rate
    assert (seq.width, seq.height, seq.fps) == (512, 288, Fraction(48))
    assert seq.frames == 2 * sum(s.frames for s in plan.shots) - crossfade == record["sequence"]["frames"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert "shots/push_enhanced.mp4" in json.dumps(manifest)
    assert manifest["timings_s"]["enhance_s"] > 0
    assert manifest["settings"]["enhance"] == "upscale=2,interpolate=x2"
    assert any(getattr(e, "stage", None) == "enhance" and e.shot_id == "pan" for e in events)


def _clips(timeline: otio.schema.Timeline) -> list[otio.schema.Clip]:
    return list(timeline.find_clips())


def test_otio_reads_back_with_metadata(render):
    plan, _, out, _ = render
    timeline = otio.adapters.read_from_file(str(out / "timeline.otio"))
    clips = _clips(timeline)
    assert [c.name for c in clips] == [s.shot_id for s in plan.shots]
    assert timeline.duration() == otio.opentime.RationalTime(plan.total_frames, 24)
    assert timeline.duration().value == probe(out / "sequence.mp4").frames
    for clip, shot in zip(clips, plan.shots, strict=True):
        meta = clip.metadata["daotai"]
        assert (meta["shot_id"], meta["seed"], meta["prompt"], meta["framing"]) == (
            shot.shot_id, shot.seed, shot.prompt, shot.framing)
        camera = shot.move.model_dump(mode="json")
        assert meta["camera"]["type"] == camera["type"]
        assert list(meta["camera"]["motion"]) == camera["motion"]
        media = clip.media_reference
        assert media.target_url == f"shots/{shot.shot_id}.mp4"
        assert media.available_range.duration.value == probe(out / media.target_url).frames
    transitions = [t for t in timeline.tracks[0] if isinstance(t, otio.schema.Transition)]
    assert len(transitions) == 1
    markers = {c.name: [m.name for m in c.markers] for c in clips}
    assert markers["push"] == [f"crossfade into push ({plan.shot('push').transition.frames} frames)"]
    assert markers["pan"] == [f"fade into pan ({plan.shot('pan').transition.frames} frames)"]


def test_fcp_xml_reads_back(render):
    plan, _, out, _ = render
    xml = out / "timeline.xml"
    assert xml.is_file()
    timeline = otio.adapters.read_from_file(str(xml))
    clips = _clips(timeline)
    reference = _clips(otio.adapters.read_from_file(str(out / "timeline.otio")))
    assert [c.name for c in clips] == [s.shot_id for s in plan.shots]
    assert [c.source_range for c in clips] == [c.source_range for c in reference]
    assert [Path(c.media_reference.target_url).name for c in clips] == [f"{s.shot_id}.mp4" for s in plan.shots]
    assert timeline.duration().value == plan.total_frames


def test_edl_reads_back(render):
    plan, _, out, _ = render
    edl = out / "timeline.edl"
    assert edl.is_file()
    timeline = otio.adapters.read_from_file(str(edl), rate=24)
    clips = _clips(timeline)
    assert timeline.duration().value == plan.total_frames
    assert {c.name for c in clips} == {s.shot_id for s in plan.shots}
    wide = next(c for c in clips if c.name == "wide")  # a plain cut: same range as the .otio
    assert wide.media_reference.target_url == "shots/wide.mp4"
    assert "CROSSFADE INTO PUSH" in edl.read_text()


def test_rate_without_smpte_timecode_keeps_the_otio_and_retimes_xml_and_edl(tmp_path):
    from daotai.deliver.timeline import write_timeline

    plan = plan_script(validate_script(dict(SCRIPT, fps=12)))  # both adapters need SMPTE timecode rates
    clips = {s.shot_id: f"shots/{s.shot_id}.mp4" for s in plan.shots}
    written = write_timeline(plan, clips, tmp_path / "timeline.otio")
    assert [p.name for p in written] == ["timeline.otio", "timeline.xml", "timeline.edl"]
    native = otio.adapters.read_from_file(str(tmp_path / "timeline.otio"))
    assert native.duration().value == plan.total_frames and native.duration().rate == 12  # the .otio as rendered
    edl = otio.adapters.read_from_file(str(tmp_path / "timeline.edl"), rate=24)  # the same seconds at 24 fps
    assert edl.duration().to_seconds() == native.duration().to_seconds()


@pytest.mark.parametrize("seconds", [0.125, 5 / 24, 0.25])  # 3, 5 and 6 frames: odd lengths split unevenly
def test_dissolves_use_exactly_the_handles_their_clips_were_trimmed_by(seconds):
    # A k-frame dissolve blends the outgoing clip's last k frames with the incoming clip's first k:
    # the outgoing clip is cut short by out_offset (its handle), the incoming starts in_offset late.
    from daotai.deliver.timeline import TimelineSound, build_timeline

    data = {"fps": 24, "characters": [{"id": "a"}],
            "shots": [{"shot_id": "s", "duration": 1},
                      {"shot_id": "t", "duration": 1, "transition": {"type": "crossfade", "duration": seconds}}]}
    plan = plan_script(validate_script(data))
    k = plan.shots[1].transition.frames
    assert k == round(seconds * 24)
    timeline = build_timeline(plan, {"s": "shots/s.mp4", "t": "shots/t.mp4"},
                              TimelineSound(shots_with_sound=frozenset({"s", "t"})))
    for track in timeline.tracks[:2]:  # V1 and A1 are cut and dissolved alike
        outgoing, dissolve, incoming = list(track)
        assert isinstance(dissolve, otio.schema.Transition), track.name
        in_offset, out_offset = round(dissolve.in_offset.value), round(dissolve.out_offset.value)
        assert in_offset + out_offset == k
        out_end = outgoing.source_range.end_time_exclusive().value
        assert round(outgoing.media_reference.available_range.duration.value - out_end) == out_offset, track.name
        assert round(incoming.source_range.start_time.value) == in_offset, track.name
        assert round(out_end - in_offset) == plan.shots[0].frames - k  # the blend starts k frames from the end
    assert round(timeline.duration().value) == plan.total_frames
