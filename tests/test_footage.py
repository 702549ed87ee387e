"""User footage as a shot's motion and camera reference: the script field, the checks before a render, the frames
a backend reads, and tiny MiniMax-H3 and Wan-VACE renders that follow a rehearsal clip instead of the previz."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from builders import pan_frames, write_clip
from daotai.errors import ScriptError
from daotai.render.footage import check_plan_footage, footage_times, probe_footage, read_footage, shot_footage

TESTS = Path(__file__).parent
CLIP_FPS = 30  # a phone's rate, not the plan's: frames are taken at the plan's times
SCRIPT = {
    "title": "rehearsal",
    "fps": 24,
    "size": [112, 64],
    "seed": 5,
    "scene": "office",
    "characters": [{"id": "lin", "appearance": "blue shirt"}, {"id": "mara", "appearance": "glasses"}],
    "shots": [
        # Static camera and no looks would be t2va; the footage makes it ref2va.
        {"shot_id": "s1", "duration": 1, "subject": "lin", "reference_video": {"path": "take.mp4", "in": 0.5,
                                                                               "out": 1.5}},
    ],
}


def plan_of(script: Path):
    from daotai.plan.planner import plan_script
    from daotai.script.load import load_script

    return plan_script(load_script(script))


@pytest.fixture()
def clip(tmp_path) -> Path:
    """A 3 s rehearsal clip at 30 fps, 160x120 (4:3, so a 16:9 shot crops it), panning with a disc moving."""
    return write_clip(tmp_path / "take.mp4", pan_frames(3 * CLIP_FPS, 160, 120), CLIP_FPS)


@pytest.fixture()
def script(tmp_path, clip) -> Path:
    path = tmp_path / "rehearsal.json"
    path.write_text(json.dumps(SCRIPT))
    return path


def decoded(path: Path) -> list[np.ndarray]:
    """Every frame of a clip as PyAV shows it: (H, W, 3) uint8."""
    import av

    with av.open(str(path)) as container:
        return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]


# ------------------------------------------------------------------ the script field


def test_reference_video_spellings_and_rules():
    from daotai.plan.planner import plan_script
    from daotai.script.load import parse_script

    def shot_with(**fields):
        return json.dumps({"characters": [{"id": "a"}], "shots": [{"shot_id": "s", "duration": 4, **fields}]})

    short = parse_script(shot_with(footage="take.MOV"))
    assert short.shots[0].reference_video.path == "take.MOV" and short.shots[0].reference_video.end is None
    plan = plan_script(parse_script(shot_with(reference_video={"path": "t.mp4", "in": 2, "out": 8})))
    footage = plan.shots[0].reference_video
    assert (footage.path, footage.start_s, footage.end_s) == ("t.mp4", 2.0, 8.0)
    assert plan_script(short).shots[0].reference_video.end_s == 4.0  # default: start + the shot's duration
    assert "reference_video" not in parse_script(shot_with()).model_dump()["shots"][0]  # scripts without it unchanged
    cases = {
        "shots[0].reference_video.path: 'notes.txt' must be a video file": {"path": "notes.txt"},
        "shots[0].reference_video: {'path': 't.mp4', 'in': 3, 'out': 2} end 2 must be later than start 3":
            {"path": "t.mp4", "in": 3, "out": 2},
        "may play at most 2x faster or slower": {"path": "t.mp4", "start": 0, "end": 9},
        "shots[0].reference_video.start: -1": {"path": "t.mp4", "start": -1},
        "shots[0].reference_video.speed": {"path": "t.mp4", "speed": 2},
    }
    for message, value in cases.items():
        with pytest.raises(ScriptError) as caught:
            parse_script(shot_with(reference_video=value))
        assert message in str(caught.value), str(caught.value)


def test_json_schema_and_conventions_list_the_field():
    from daotai.script.jsonschema import script_json_schema

    schema = script_json_schema()
    shot = schema["$defs"]["Shot"]["properties"]
    assert "reference_video" in shot
    assert set(schema["$defs"]["ReferenceVideo"]["properties"]) == {"path", "start", "end"}
    conventions = (TESTS.parent / "docs" / "conventions.md").read_text(encoding="utf-8")
    assert "reference_video" in conventions


# ------------------------------------------------------------------ checks before any work


def test_bad_footage_is_refused_with_the_field_named(tmp_path, clip):
    from daotai.plan.planner import plan_script
    from daotai.script.load import parse_script

    (tmp_path / "notes.mp4").write_bytes(b"\x00\x00\x00\x18ftypisom" + b"not a video" * 50)
    write_clip(tmp_path / "short.mp4", pan_frames(15, 64, 48), 30)  # 0.5 s
    shots = [
        {"shot_id": "ok", "duration": 1, "reference_video": "take.mp4"},
        {"shot_id": "gone", "duration": 1, "reference_video": "missing.mp4"},
        {"shot_id": "garbage", "duration": 1, "reference_video": "notes.mp4"},
        {"shot_id": "brief", "duration": 1, "reference_video": {"path": "short.mp4", "start": 0.2}},
    ]
    plan = plan_script(parse_script(json.dumps({"characters": [{"id": "a"}], "shots": shots})))
    with pytest.raises(ScriptError) as caught:
        check_plan_footage(plan, tmp_path)
    issues = {i.path: (i.value, i.rule) for i in caught.value.issues}
    assert set(issues) == {"shots[1].reference_video.path", "shots[2].reference_video.path",
                           "shots[3].reference_video.end"}  # every problem at once; the good file passes
    assert issues["shots[1].reference_video.path"][1].startswith("is not a file")
    assert issues["shots[2].reference_video.path"][1].startswith("could not be decoded as video")
    value, rule = issues["shots[3].reference_video.end"]
    assert value == 1.2 and "is past the end of short.mp4 (0.5 s of video)" in rule
    # Size limits: bytes and pixels a frame.
    info, problems = probe_footage(clip, 0, 1, "shots[0].reference_video.path", max_pixels=160 * 119)
    assert info is None and "is 160x120; a reference video may have at most 19040 pixels" in problems[0].rule
    _, problems = probe_footage(clip, 0, 1, "shots[0].reference_video.path", max_bytes=100)
    assert "a reference video may be at most 100 bytes" in problems[0].rule
    # A sound file in a video's clothes has no picture to follow.
    import av

    with av.open(str(tmp_path / "voice.mp4"), "w") as container:
        stream = container.add_stream("aac", rate=16000)
        samples = np.zeros((1, 16000), np.float32)
        frame = av.AudioFrame.from_ndarray(samples, format="fltp", layout="mono")
        frame.sample_rate = 16000
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            container.mux(packet)
    _, problems = probe_footage(tmp_path / "voice.mp4", 0, 0.5, "shots[0].reference_video.path")
    assert problems[0].rule == "holds no video stream"


def test_the_stretch_is_laid_over_the_shot_and_frames_are_taken_at_its_times(clip):
    frames = decoded(clip)  # 90 frames at 30 fps
    assert footage_times(4, 24.0, 1.0, 0.5, 1.5) == [0.5, 0.5 + 1 / 24, 0.5 + 2 / 24, 0.5 + 3 / 24]
    # Twice as long a stretch as the shot: the footage plays at 2x.
    assert footage_times(3, 24.0, 1.0, 1.0, 3.0) == pytest.approx([1.0, 1.0 + 2 / 24, 1.0 + 4 / 24])
    times = footage_times(24, 24.0, 1.0, 0.5, 1.5)
    got = read_footage(clip, times, 160, 120)  # the clip's own size: no crop, no resize
    assert got.shape == (24, 120, 160, 3)
    for t, picture in zip(times, got, strict=True):
        shown = int(np.floor(t * CLIP_FPS + 1e-6))  # the frame a player shows at t
        assert np.array_equal(picture, frames[shown]), t
    # A 16:9 shot takes the middle of the 4:3 picture (filled, never letterboxed).
    wide = read_footage(clip, [0.5], 64, 36)[0]
    from daotai.render.neural.retime import resize_rgb

    middle = frames[15][15:105]  # 160x90 out of 160x120
    assert np.array_equal(wide, resize_rgb(np.ascontiguousarray(middle), 64, 36))


# ------------------------------------------------------------------ MiniMax-H3: the footage is <Video 1>

h3_needs = pytest.mark.skipif(
    any(__import__("importlib").util.find_spec(m) is None for m in ("torch", "diffusers", "transformers")),
    reason="needs torch, diffusers and transformers")


@pytest.fixture()
def config_dir(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "config"
    monkeypatch.setenv("DAOTAI_CONFIG_DIR", str(folder))
    return folder


@h3_needs
def test_h3_takes_the_footage_as_its_video_reference(tiny_h3, script, clip, config_dir, monkeypatch):
    from diffusers.modular_pipelines import MiniMaxH3ModularPipeline
    from diffusers.modular_pipelines.minimax_h3 import MiniMaxH3ImageReference, MiniMaxH3VideoReference

    from daotai.events import Notice
    from daotai.render.base import RenderJob, RunContext
    from daotai.render.h3 import H3Backend
    from daotai.render.spec import BackendEnv

    calls: list[dict] = []
    original = MiniMaxH3ModularPipeline.__call__

    def recording_call(self, *args, **kwargs):  # the real pipeline runs; its inputs are kept
        calls.append(kwargs)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(MiniMaxH3ModularPipeline, "__call__", recording_call)
    plan = plan_of(script)
    shot = plan.shots[0]
    backend = H3Backend(env=BackendEnv(reference_root=script.parent), model=str(tiny_h3), device="cpu", steps=3,
                        accept_licence=True)
    try:
        events = list(backend.render(RenderJob(plan, shot, controls=False), RunContext()))
        canvas = backend.runner.canvas(plan)
    finally:
        backend.close()
    assert len(calls) == 1
    references = calls[0]["references"]
    assert [type(r) for r in references] == [MiniMaxH3ImageReference, MiniMaxH3ImageReference, MiniMaxH3VideoReference]
    video = references[-1]
    # 24 frames of the 1 s shot at 24 fps, held to the 22-frame minimum if shorter: the clip's 0.5-1.5 s stretch.
    expected = shot_footage(plan, shot, script.parent, 24, 24.0, *canvas)
    assert video.fps == 24.0 and np.array_equal(video.frames, expected)
    assert not np.array_equal(video.frames[0], video.frames[-1])  # it moves: the camera and the disc
    notices = "\n".join(e.text for e in events if isinstance(e, Notice))
    assert "workflow ref2va (the shot follows reference footage)" in notices
    assert "<Video 1> footage take.mp4 0.5–1.5 s (24 frames at 24 fps" in notices
    assert "<Video 1> is reference footage of this very shot" in calls[0]["prompt"]


@pytest.mark.slow
@h3_needs
def test_h3_render_with_footage_through_the_command_line_and_a_bad_clip_refused(tiny_h3, script, tmp_path,
                                                                                  config_dir):
    code = ("import sys; sys.path.insert(0, sys.argv.pop(1)); import builders; builders.qwen3vl_without_torchvision(); "
            "from daotai.cli import main; sys.argv[0] = 'daotai'; main()")

    def render(path: Path, out: Path) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", code, str(TESTS), "render", str(path), "--backend", "h3", "-O", f"model={tiny_h3}",
             "--device", "cpu", "--steps", "2", "-O", "accept_licence=true", "-o", str(out)],
            capture_output=True, text=True, timeout=600, env={**os.environ, "DAOTAI_DEBUG": ""})

    out = tmp_path / "out"
    done = render(script, out)
    assert done.returncode == 0, done.stderr[-3000:]
    from daotai.encode.read import probe

    info = probe(out / "shots" / "s1.mp4")
    assert (info.width, info.height, info.frames) == (112, 64, 24)
    manifest = json.loads((out / "manifest.json").read_text())
    notices = "\n".join(manifest["shots"][0]["notices"])
    assert "<Video 1> footage take.mp4 0.5–1.5 s" in notices
    assert json.loads((out / "plan.json").read_text())["shots"][0]["reference_video"] == {
        "path": "take.mp4", "start_s": 0.5, "end_s": 1.5}
    # A clip that ends before the stretch does: refused before any work (exit 2), the field named, nothing written.
    write_clip(tmp_path / "take.mp4", pan_frames(30, 160, 120), CLIP_FPS)  # now 1 s long
    refused = render(script, tmp_path / "refused")
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert "shots[0].reference_video.end: 1.5 is past the end of take.mp4 (1 s of video)" in refused.stderr
    assert not (tmp_path / "refused").exists()


# ------------------------------------------------------------------ Wan-VACE: the footage is the control video


@pytest.mark.skipif(any(__import__("importlib").util.find_spec(m) is None for m in ("torch", "diffusers")),
                    reason="needs torch and diffusers")
def test_wan_vace_takes_the_footage_as_its_control_video(tiny_vace, script, clip, tmp_path, monkeypatch):
    from diffusers import WanVACEPipeline

    from daotai.render.neural.request import family_defaults, native_request
    from daotai.run.pipeline import run
    from daotai.run.records import Finished
    from daotai.run.settings import PipelineSettings

    calls: list[list[np.ndarray]] = []
    original = WanVACEPipeline.__call__

    def recording_call(self, *args, **kwargs):  # the real pipeline runs; its control video is kept
        calls.append([np.asarray(f).copy() for f in kwargs["video"]])
        return original(self, *args, **kwargs)

    monkeypatch.setattr(WanVACEPipeline, "__call__", recording_call)
    data = {**SCRIPT, "size": [64, 64]}
    data["shots"] = [{**SCRIPT["shots"][0], "duration": 0.5, "reference_video": {"path": "take.mp4", "in": 1}}]
    path = tmp_path / "vace.json"
    path.write_text(json.dumps(data))
    plan = plan_of(path)
    settings = PipelineSettings(backend="wan-vace", options={"model": str(tiny_vace), "device": "cpu", "steps": 2})
    events = list(run(plan, tmp_path / "out", settings, source=path))
    assert isinstance(events[-1], Finished)
    shot = plan.shots[0]
    request = native_request(plan, shot, family_defaults("wan-vace"))
    expected = shot_footage(plan, shot, tmp_path, request.frames, request.fps, request.width, request.height)
    assert len(calls) == 1 and np.array_equal(np.stack(calls[0]), expected)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert "control video: footage take.mp4 1–1.5 s" in "\n".join(manifest["shots"][0]["notices"])


def test_previz_says_it_does_not_follow_footage_and_validate_lists_a_missing_file(script, tmp_path):
    from daotai.events import Notice
    from daotai.run.pipeline import run
    from daotai.run.records import Finished
    from daotai.run.settings import PipelineSettings
    from daotai.script.load import check_reference_files, load_script

    events = list(run(plan_of(script), tmp_path / "out", PipelineSettings(controls=False, camera_qc=False),
                      source=script))
    assert isinstance(events[-1], Finished)
    warnings = [e.text for e in events if isinstance(e, Notice) and e.level == "warning"]
    assert "backend 'previz' does not follow reference footage: s1 render from the plan's camera and blocking" \
        in warnings
    assert check_reference_files(load_script(script), script.parent) == []
    (script.parent / "take.mp4").unlink()
    [missing] = check_reference_files(load_script(script), script.parent)
    assert (missing.path, missing.value) == ("shots[0].reference_video.path", "take.mp4")
