"""Deliverables with sound: OTIO, FCP XML and EDL carry a video track and two audio tracks (shot
sound, soundtrack) that read back with the right durations; the manifest records the sound;
the contact sheet tags shots with dialogue."""

from __future__ import annotations

import json
import wave

import numpy as np
import opentimelineio as otio
import pytest
from PIL import Image

from daotai.deliver.contact_sheet import SPEECH_BG, speech_tag_text
from daotai.events import Audio, Frame
from daotai.plan.planner import plan_script
from daotai.run.pipeline import run
from daotai.run.records import Finished, ShotRecord
from daotai.run.settings import PipelineSettings
from daotai.run.shots import render_shot
from daotai.script.load import validate_script

FPS = 24


class OneShotSpeaks:
    """Flat frames; only shot "b" has sound (mono 32 kHz)."""

    name = "speaks"

    def render(self, job, ctx):
        plan, shot = job.plan, job.shot
        for index in range(shot.frames):
            yield Frame(shot.shot_id, index, np.full((plan.height, plan.width, 3), 90, np.uint8))
        if shot.shot_id == "b":
            n = round(shot.frames / plan.fps * 32000)
            voice = 0.3 * np.sin(2 * np.pi * 180 * np.arange(n) / 32000)
            yield Audio(shot.shot_id, voice[:, None].astype(np.float32), 32000, "mono")

    def close(self):
        pass


class Executor:
    def render_shots(self, plan, out_dir, settings, ctx, source, health):
        records = []
        for shot in plan.shots:
            record = ShotRecord(shot.shot_id)
            yield from render_shot(OneShotSpeaks(), plan, shot, out_dir, settings, ctx, record)
            records.append(record)
        return records


@pytest.fixture(scope="module")
def render(tmp_path_factory):
    folder = tmp_path_factory.mktemp("deliver")
    rate = 44100
    tone = (0.2 * np.sin(2 * np.pi * 330 * np.arange(rate * 10) / rate) * 32767).astype("<i2")
    with wave.open(str(folder / "bed.wav"), "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(rate)
        handle.writeframes(tone.tobytes())
    data = {
        "fps": FPS, "size": "160x96", "characters": [{"id": "hero"}],
        "soundtrack": {"path": "bed.wav", "offset": 0.5, "gain_db": -3},
        "shots": [
            {"shot_id": "a", "duration": 1.0, "dialogue": [{"character": "hero", "line": "Where were you last night?"}]},
            {"shot_id": "b", "duration": 1.5, "transition": {"type": "crossfade", "duration": 0.25}},
            {"shot_id": "c", "duration": 1.0, "transition": {"type": "fade", "duration": 0.5}},
        ],
    }
    (folder / "script.json").write_text(json.dumps(data))
    plan = plan_script(validate_script(data))
    events = list(run(plan, folder / "out", PipelineSettings(controls=False, camera_qc=False),
                      source=folder / "script.json", executor=Executor()))
    assert isinstance(events[-1], Finished)
    return plan, folder / "out"


def track_summary(timeline) -> list[tuple[str, float]]:
    return [(track.kind, track.duration().to_seconds()) for track in timeline.tracks]


def test_otio_has_one_video_and_two_audio_tracks(render):
    plan, out = render
    timeline = otio.adapters.read_from_file(str(out / "timeline.otio"))
    seconds = plan.total_frames / FPS
    kinds = track_summary(timeline)
    assert [k for k, _ in kinds] == ["Video", "Audio", "Audio"]
    assert all(d == pytest.approx(seconds) for _, d in kinds)
    shot_audio = timeline.tracks[1]
    clips = [item for item in shot_audio if isinstance(item, otio.schema.Clip)]
    assert [c.name for c in clips] == ["b audio"]
    assert clips[0].media_reference.target_url == "shots/b.mp4"
    # b's sound sits where b's picture sits
    picture_b = [c for c in timeline.tracks[0] if isinstance(c, otio.schema.Clip) and c.name == "b"][0]
    assert clips[0].trimmed_range_in_parent() == picture_b.trimmed_range_in_parent()
    soundtrack = timeline.tracks[2]
    assert isinstance(soundtrack[0], otio.schema.Gap) and soundtrack[0].duration().to_seconds() == pytest.approx(0.5)
    assert soundtrack[1].metadata["daotai"]["gain_db"] == -3


def test_fcp_xml_and_edls_read_back(render):
    plan, out = render
    seconds = plan.total_frames / FPS
    xml = otio.adapters.read_from_file(str(out / "timeline.xml"))
    kinds = track_summary(xml)
    assert [k for k, _ in kinds] == ["Video", "Audio", "Audio"]
    assert kinds[0][1] == pytest.approx(seconds) and kinds[2][1] == pytest.approx(seconds)
    assert (out / "timeline.edl").is_file()
    for name, reel in (("timeline.a1.edl", "b"), ("timeline.a2.edl", "bed")):
        edl = otio.adapters.read_from_file(str(out / name), rate=FPS)
        (track,) = edl.tracks
        assert track.kind == "Audio"
        clips = [c for c in track if isinstance(c, otio.schema.Clip)]
        assert len(clips) == 1 and reel in clips[0].media_reference.target_url


def test_manifest_records_sound(render):
    plan, out = render
    manifest = json.loads((out / "manifest.json").read_text())
    sound = manifest["sound"]
    assert sound["shots"] == {"a": "soundtrack", "b": "backend", "c": "soundtrack"}
    track = sound["soundtrack"]
    assert track["path"] == "bed.wav" and len(track["sha256"]) == 64 and track["rate"] == 44100
    assert track["duration_s"] == pytest.approx(10.0)
    assert sound["sequence"]["loudness"]["integrated_lufs"] < -10
    assert manifest["shots"][1]["audio"] == {"source": "backend", "rate": 32000, "channels": 1, "layout": "mono",
                                             "samples": 48000}


def test_contact_sheet_tags_dialogue(render):
    plan, out = render
    assert speech_tag_text(plan.shots[0]) == "hero: “Where were you last night?”"
    sheet = np.asarray(Image.open(out / "contact_sheet.png").convert("RGB"))
    corner = sheet[40 + 8:40 + 20, 12 + 2:12 + 40].reshape(-1, 3)  # the first thumbnail's top-left
    assert (np.abs(corner.astype(int) - SPEECH_BG).sum(axis=1) < 30).mean() > 0.3
    second = sheet[40 + 8:40 + 20, 12 + 372 + 2:12 + 372 + 40].reshape(-1, 3)  # shot b has no dialogue
    assert (np.abs(second.astype(int) - SPEECH_BG).sum(axis=1) < 30).mean() == 0


def test_silent_timeline_keeps_one_track():
    from daotai.deliver.timeline import build_timeline

    plan = plan_script(validate_script({"characters": [{"id": "a"}], "shots": [{"shot_id": "s"}]}))
    timeline = build_timeline(plan, {"s": "shots/s.mp4"})
    assert [t.kind for t in timeline.tracks] == ["Video"]


def test_muted_shot_sound_is_switched_off_in_the_timeline():
    from daotai.deliver.timeline import TimelineSound, build_timeline

    plan = plan_script(validate_script({"characters": [{"id": "a"}],
                                        "shots": [{"shot_id": "s", "audio": {"mute": True}}, {"shot_id": "t"}]}))
    timeline = build_timeline(plan, {"s": "shots/s.mp4", "t": "shots/t.mp4"},
                              TimelineSound(shots_with_sound=frozenset({"s", "t"}), muted=frozenset({"s"})))
    assert [(clip.name, clip.enabled) for clip in timeline.tracks[1]] == [("s audio", False), ("t audio", True)]
    assert len(timeline.tracks[2]) == 0  # no soundtrack: an empty A2
