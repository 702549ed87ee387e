"""Tiny random Wan, Wan-VACE and LTX pipelines rendering a two-shot script end to end on CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from builders import build_ltx  # noqa: E402
from daotai.errors import Cancelled  # noqa: E402
from daotai.events import Frame, Notice, Progress  # noqa: E402
from daotai.render.base import RenderJob, RunContext  # noqa: E402

FPS = 24  # the plan's rate; Wan generates at 16, so frames are repeated on the way back
SCRIPT = {
    "title": "two shots",
    "fps": FPS,
    "size": [64, 64],
    "seed": 7,
    "scene": "office",
    "characters": [
        {"id": "ana", "appearance": "blue shirt", "reference_images": ["ana.png"]},
        {"id": "bo", "appearance": "glasses"},
    ],
    "shots": [
        {"shot_id": "s01", "duration": 0.5, "camera": {"type": "dolly", "motion": [0, 0, -0.5]}, "subject": "ana"},
        {"shot_id": "s02", "duration": 0.5, "camera": {"type": "pan", "rotate": [20, 0, 0]}, "subject": "bo",
         "characters": ["bo"], "framing": "close_up"},
    ],
}
REFERENCE_RGB = (200, 120, 40)


@pytest.fixture()
def models(tiny_wan, tiny_vace, tiny_ltx) -> dict[str, Path]:
    """The session's tiny model folders (conftest) by family."""
    return {"wan": tiny_wan, "wan-vace": tiny_vace, "ltx": tiny_ltx}


@pytest.fixture()
def script(tmp_path) -> Path:
    from PIL import Image

    Image.new("RGB", (48, 64), REFERENCE_RGB).save(tmp_path / "ana.png")
    path = tmp_path / "two.json"
    path.write_text(json.dumps(SCRIPT))
    return path


def plan_of(script: Path):
    from daotai.plan.planner import plan_script
    from daotai.script.load import load_script

    return plan_script(load_script(script))


def run_pipeline(plan, out: Path, backend: str, model: Path, source: Path, steps: int = 2):
    """Drive the real pipeline in-process; returns (events, result)."""
    from daotai.run.pipeline import run
    from daotai.run.records import Finished
    from daotai.run.settings import PipelineSettings

    settings = PipelineSettings(backend=backend, options={"model": str(model), "device": "cpu", "steps": steps},
                                camera_qc=True)
    events = list(run(plan, out, settings, source=source))
    assert isinstance(events[-1], Finished)
    return events[:-1], events[-1].result


def assert_delivered(out: Path, plan) -> dict:
    """Every shot and the sequence decode to the planned frame counts; the manifest hashes them."""
    from daotai.encode.read import probe

    for shot in plan.shots:
        info = probe(out / "shots" / f"{shot.shot_id}.mp4")
        assert (info.width, info.height, info.frames) == (64, 64, shot.frames)
    assert probe(out / "sequence.mp4").frames == plan.total_frames
    manifest = json.loads((out / "manifest.json").read_text())
    assert {"shots/s01.mp4", "shots/s02.mp4", "sequence.mp4", "qc.json"} <= set(manifest["files"])
    assert manifest["settings"]["controls"] is False  # neural backends run without control channels
    assert json.loads((out / "qc.json").read_text())  # qc ran (random weights may fail camera checks)
    assert not (out / "control").exists()
    return manifest


def test_wan_renders_two_shots_through_the_command_line(models, script, tmp_path):
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "daotai.cli", "render", str(script), "--backend", "wan", "--model", str(models["wan"]),
         "--device", "cpu", "--steps", "2", "--adaptive", "-o", str(out)],
        capture_output=True, text=True, timeout=180, env={**os.environ, "DAOTAI_DEBUG": ""},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    manifest = assert_delivered(out, plan_of(script))
    assert manifest["settings"]["backend"] == "wan" and manifest["settings"]["options"]["steps"] == 2
    # --adaptive parses and is recorded; on a CPU off a Mac there is no health to act on, so the tier stays.
    assert manifest["settings"]["options"]["adaptive"] is True
    assert all(any(n.startswith("memory tier none (") for n in s["notices"]) for s in manifest["shots"])
    assert "retimed" in done.stderr  # 16 fps native → 24 fps plan, said out loud


def test_vace_gets_each_shots_previz_depth_and_one_reference_per_character(models, script, tmp_path, monkeypatch):
    from diffusers import WanVACEPipeline

    from daotai.render.neural.request import family_defaults, native_request
    from daotai.render.neural.retime import plan_to_native_indexes
    from daotai.render.previz.backend import PrevizBackend
    from daotai.render.previz.control import depth_to_preview

    calls: list[dict] = []
    original = WanVACEPipeline.__call__

    def recording_call(self, *args, **kwargs):
        calls.append({"video": [np.asarray(f).copy() for f in kwargs["video"]],
                      "references": [np.asarray(r).copy() for r in (kwargs["reference_images"] or [])],
                      "frames": kwargs["num_frames"], "size": (kwargs["width"], kwargs["height"]),
                      "prompt": kwargs["prompt"]})
        return original(self, *args, **kwargs)

    monkeypatch.setattr(WanVACEPipeline, "__call__", recording_call)
    plan = plan_of(script)
    _, result = run_pipeline(plan, tmp_path / "out", "wan-vace", models["wan-vace"], script)
    assert_delivered(tmp_path / "out", plan)
    assert len(calls) == 2

    previz = PrevizBackend(labels=False)
    try:
        for shot, call in zip(plan.shots, calls, strict=True):
            request = native_request(plan, shot, family_defaults("wan-vace"))
            assert call["frames"] == request.frames == len(call["video"]) and call["prompt"] == shot.prompt
            depth = [e.depth for e in previz.render(RenderJob(plan, shot, controls=True), RunContext())
                     if isinstance(e, Frame)]
            indexes = plan_to_native_indexes(shot.frames, plan.fps, request.frames, request.fps)
            for native_index, plan_index in enumerate(indexes):
                expected = depth_to_preview(depth[plan_index], 0.05, 500.0)  # (64, 64) uint8, near = white
                got = call["video"][native_index]  # (64, 64, 3) uint8
                assert np.array_equal(got[:, :, 0], expected) and np.array_equal(got[:, :, 1], got[:, :, 2])
            assert len(call["references"]) == len(shot.characters)
    finally:
        previz.close()
    # s01 has both characters: ana's reference file, then bo's colour swatch; s02 has only bo.
    ana, bo = calls[0]["references"]
    assert ana.shape == (64, 48, 3) and (ana == REFERENCE_RGB).all()
    bo_colour = next(c.colour for c in plan.characters if c.id == "bo")
    assert (bo[0, 0] == [int(round(255 * c)) for c in bo_colour]).all()
    assert np.array_equal(calls[1]["references"][0], bo)
    assert not np.array_equal(calls[0]["video"][0], calls[1]["video"][0])  # each shot its own depth


def test_ltx_renders_two_shots_at_its_native_rate(models, script, tmp_path):
    plan = plan_of(script)
    events, result = run_pipeline(plan, tmp_path / "out", "ltx", models["ltx"], script)
    assert_delivered(tmp_path / "out", plan)
    denoise = [e for e in events if isinstance(e, Progress) and e.stage == "denoise"]
    assert [e.done for e in denoise] == [1, 2, 1, 2]
    # LTX generates at 24 fps = the plan's rate: no retiming notice, only the trim to 8k+1.
    assert not any(isinstance(e, Notice) and "retimed" in e.text and "repeating" in e.text for e in events)


def frames_of(backend, plan, shot, ctx=None) -> tuple[np.ndarray, list]:
    events = list(backend.render(RenderJob(plan, shot, controls=False), ctx or RunContext()))
    frames = [e for e in events if isinstance(e, Frame)]
    assert [f.index for f in frames] == list(range(shot.frames))
    return np.stack([f.rgb for f in frames]), events  # (F, H, W, 3) uint8


def test_wan_backend_is_seeded_reuses_its_pipeline_and_reports_steps(models, script):
    from daotai.render.wan import WanBackend

    plan = plan_of(script)
    backend = WanBackend(model=str(models["wan"]), device="cpu", steps=3)
    try:
        first, events = frames_of(backend, plan, plan.shots[0])
        pipe = backend.runner.pipe
        again, events_again = frames_of(backend, plan, plan.shots[0])
        other, _ = frames_of(backend, plan, plan.shots[1])
        assert backend.runner.pipe is pipe  # loaded once, reused across shots
    finally:
        backend.close()
    assert first.shape == (plan.shots[0].frames, 64, 64, 3) and first.dtype == np.uint8
    assert np.array_equal(first, again)  # same seed, same device: same video
    assert not np.array_equal(first[0], other[0])  # another shot seed: another video
    assert [e.done for e in events if isinstance(e, Progress) and e.stage == "denoise"] == [1, 2, 3]
    assert any(isinstance(e, Progress) and e.stage == "load" for e in events)
    assert not any(isinstance(e, Progress) and e.stage == "load" for e in events_again)
    # 12 plan frames at 24 fps from 9 native frames at 16 fps, retimed by motion interpolation:
    # no frame is a repeat of the one before it (repetition would judder)
    distinct = sum(1 for a, b in zip(first, first[1:], strict=False) if not np.array_equal(a, b)) + 1
    assert distinct == 12


def test_cancelling_between_steps_stops_the_render(models, script):
    from daotai.render.wan import WanBackend

    plan = plan_of(script)
    backend = WanBackend(model=str(models["wan"]), device="cpu", steps=6)
    ctx = RunContext()
    seen = []
    try:
        with pytest.raises(Cancelled, match="between denoising steps"):
            for event in backend.render(RenderJob(plan, plan.shots[0], controls=False), ctx):
                seen.append(event)
                if isinstance(event, Progress) and event.stage == "denoise" and event.done == 1:
                    ctx.cancel.set()
    finally:
        backend.close()
    assert not any(isinstance(e, Frame) for e in seen)
    assert max(e.done for e in seen if isinstance(e, Progress) and e.stage == "denoise") < 6
    assert threading.active_count() < 20  # the denoise worker was joined, not leaked per step


def test_ltx_keyframe_is_the_shots_first_previz_frame(script, tiny_ltx, tmp_path, monkeypatch):
    from diffusers import LTXConditionPipeline

    from daotai.errors import BackendError
    from daotai.render.ltx import LTXBackend
    from daotai.render.previz.backend import PrevizBackend

    plan = plan_of(script)
    shot = plan.shots[0]
    seen: list[dict] = []
    original = LTXConditionPipeline.__call__

    def recording_call(self, *args, **kwargs):
        seen.append({"image": np.asarray(kwargs["image"]).copy(), "frame_index": kwargs["frame_index"],
                     "frame_rate": kwargs["frame_rate"]})
        return original(self, *args, **kwargs)

    monkeypatch.setattr(LTXConditionPipeline, "__call__", recording_call)
    backend = LTXBackend(model=str(build_ltx(tmp_path / "ltxc", condition=True)), device="cpu", steps=2,
                         keyframe="previz")
    try:
        frames, _ = frames_of(backend, plan, shot)
    finally:
        backend.close()
    previz = PrevizBackend(labels=False)
    try:
        first = next(e.rgb for e in previz.render(RenderJob(plan, shot, controls=False), RunContext())
                     if isinstance(e, Frame))  # (64, 64, 3) uint8
    finally:
        previz.close()
    assert len(seen) == 1 and seen[0]["frame_index"] == 0 and seen[0]["frame_rate"] == 24
    assert np.array_equal(seen[0]["image"], first)
    assert frames.shape[0] == shot.frames

    plain = LTXBackend(model=str(tiny_ltx), device="cpu", steps=1, keyframe="previz")
    try:
        with pytest.raises(BackendError, match="needs an LTXConditionPipeline model"):
            frames_of(plain, plan, shot)
    finally:
        plain.close()


def test_out_of_memory_retries_once_a_tier_lower_then_fails_clearly(models, script, monkeypatch):
    from diffusers import WanPipeline

    from daotai.errors import BackendError
    from daotai.render.wan import WanBackend

    plan = plan_of(script)
    original = WanPipeline.__call__
    failures = {"left": 1}

    def flaky_call(self, *args, **kwargs):
        if failures["left"] > 0:
            failures["left"] -= 1
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(WanPipeline, "__call__", flaky_call)
    backend = WanBackend(model=str(models["wan"]), device="cpu", steps=1)
    try:
        frames, events = frames_of(backend, plan, plan.shots[0])
        assert any(isinstance(e, Notice) and "retrying once with memory tier model" in e.text for e in events)
        assert backend.runner.tier == "model" and frames.shape[0] == plan.shots[0].frames
        failures["left"] = 2  # fails at this tier and again one lower: no third attempt
        with pytest.raises(BackendError, match="out of memory at 64x64, 9 frames"):
            frames_of(backend, plan, plan.shots[1])
        assert failures["left"] == 0
    finally:
        backend.close()
