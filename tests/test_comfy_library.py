"""daotai.comfy's library half, called directly (no ComfyUI, no torch): script, cameras, previz, check, sequence."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from daotai.comfy.camera_node import (
    clip_indexes,
    pack_wan_embedding,
    plucker_rays,
    shot_cameras,
    wan_camera_embedding,
    wan_length,
)
from daotai.comfy.check import check_clip
from daotai.comfy.driver import drive
from daotai.comfy.previz import render_previz
from daotai.comfy.script import load_director_script, script_problem
from daotai.comfy.sequence import assemble_shots, chosen_shots, shots_in_folder
from daotai.errors import Cancelled, OptionError, ScriptError
from daotai.plan import geometry
from daotai.render.base import RunContext

SCRIPT = {
    "fps": 12, "size": "320x180", "scene": "office",
    "characters": [{"id": "red", "colour": [0.9, 0.1, 0.1], "position": [-0.6, 0.0]}],
    "shots": [
        {"shot_id": "pan", "duration": 1.0, "subject": "red", "framing": "wide",
         "camera": {"type": "pan", "rotate": [20, 0, 0]}},
        {"shot_id": "push", "duration": 1.0, "subject": "red", "framing": "full",
         "camera": {"type": "dolly", "motion": [0, 0, -0.6]}, "transition": {"type": "crossfade", "duration": 0.25}},
    ],
}


@pytest.fixture(scope="module")
def director():
    return load_director_script(json.dumps(SCRIPT))


# ------------------------------------------------------------------ script


def test_script_from_json_yaml_and_file_plan_the_same(tmp_path, director):
    import yaml

    as_yaml = load_director_script(yaml.safe_dump(SCRIPT))
    path = tmp_path / "script.json"
    path.write_text(json.dumps(SCRIPT), encoding="utf-8")
    from_file = load_director_script(path=str(path))
    assert as_yaml.plan == director.plan == from_file.plan
    assert from_file.source == path and director.source is None
    assert director.shot_ids == ("pan", "push") and director.shot("").shot_id == "pan"
    assert "2 shots" in director.summary()


def test_a_bad_script_is_refused_with_every_json_path():
    bad = {"shots": [{"shot_id": "a", "camera": {"fov": 190}}, {"shot_id": "b", "duration": -1}]}
    with pytest.raises(ScriptError) as caught:
        load_director_script(json.dumps(bad))
    paths = {issue.path for issue in caught.value.issues}
    assert {"shots[0].camera.fov", "shots[1].duration"} <= paths
    message = script_problem(json.dumps(bad))
    assert "shots[0].camera.fov: 190" in message and "shots[1].duration" in message
    assert script_problem(json.dumps(SCRIPT)) is None


def test_script_inputs_are_checked(tmp_path):
    with pytest.raises(ScriptError, match="script_text"):
        load_director_script("  ")
    with pytest.raises(ScriptError, match="both given"):
        load_director_script(json.dumps(SCRIPT), path=str(tmp_path / "x.json"))
    with pytest.raises(ScriptError, match="does not exist"):
        load_director_script(path=str(tmp_path / "missing.json"))
    assert (load_director_script(json.dumps(SCRIPT), preset="preview").plan.width, ) == (640,)


def test_an_unknown_shot_names_the_valid_ones(director):
    with pytest.raises(OptionError, match="valid options: pan, push"):
        director.shot("nope")


# ------------------------------------------------------------------ cameras


def test_camera_matrices_equal_the_plans(director):
    shot = director.shot("push")
    cams = shot_cameras(director.plan, shot)
    assert cams.frames == shot.frames == 12
    for i, frame in enumerate(shot.cameras):
        assert cams.cam_to_world[i].ravel().tolist() == list(frame.cam_to_world)
        assert cams.K[i].ravel().tolist() == list(frame.K)
        assert cams.fov[i] == frame.fov
    assert np.allclose(cams.world_to_camera() @ cams.cam_to_world, np.eye(4), atol=1e-12)
    assert np.allclose(cams.relative_cv()[0], np.eye(4), atol=1e-12)
    data = cams.to_dict()
    assert data["frames"][5]["cam_to_world"] == cams.cam_to_world[5].tolist()
    assert np.allclose(np.array(data["frames"][5]["cam_to_world_opencv"]), geometry.gl_to_cv(cams.cam_to_world[5]))


def _cameractrl_rays(rel_cv: np.ndarray, fx: float, fy: float, cx: float, cy: float, w: int, h: int) -> np.ndarray:
    """Plücker rays written out the CameraCtrl way: OpenCV pixel rays (x, y, 1) through pixel centres."""
    j, i = np.meshgrid(np.arange(h) + 0.5, np.arange(w) + 0.5, indexing="ij")
    d = np.stack([(i - cx) / fx, (j - cy) / fy, np.ones_like(i)], axis=-1)
    d = d / np.linalg.norm(d, axis=-1, keepdims=True)
    d = d @ rel_cv[:3, :3].T
    o = np.broadcast_to(rel_cv[:3, 3], d.shape)
    return np.concatenate([np.cross(o, d), d], axis=-1)


def test_plucker_rays_follow_cameractrl(director):
    shot = director.shot("push")
    cams = shot_cameras(director.plan, shot)
    rays = plucker_rays(cams, 64, 32)  # 320x180 covered into 64x32: scale 0.2, rows cropped
    assert rays.shape == (12, 32, 64, 6) and rays.dtype == np.float32
    fx = cams.K[7][0, 0] * 0.2
    expected = _cameractrl_rays(cams.relative_cv()[7], fx, fx, 32.0, 16.0, 64, 32)
    assert np.allclose(rays[7], expected, atol=1e-5)
    assert np.allclose(rays[0][..., :3], 0.0, atol=1e-6)  # the first camera sits at the origin
    assert np.allclose(cams.relative_cv()[-1][:3, 3], [0.0, 0.0, 0.6], atol=0.02)  # pushed in 0.6 m: +z in OpenCV axes


def test_wan_embedding_packs_four_frames_per_latent_frame(director):
    cams = shot_cameras(director.plan, director.shot("pan"))
    assert wan_length(cams) == 13 and wan_length(cams, fps=16) == 17
    embedding, rays = wan_camera_embedding(cams, 32, 16)
    assert embedding.shape == (1, 24, 4, 16, 32) and rays.shape == (13, 16, 32, 6)
    padded = np.concatenate([rays[:1]] * 3 + [rays])  # (16, H, W, 6)
    for group in range(4):
        for channel in range(6):
            for k in range(4):
                assert np.array_equal(embedding[0, 4 * channel + k, group], padded[4 * group + k, ..., channel])
    assert clip_indexes(cams, 13) == [*range(12), 11]  # one frame past the shot repeats its last camera
    assert clip_indexes(cams, 17, fps=16)[-1] == 11 and clip_indexes(cams, 17, fps=16)[8] == 6
    with pytest.raises(ValueError):
        pack_wan_embedding(rays[:12])


def test_wan_embedding_refuses_sizes_the_model_cannot_take(director):
    cams = shot_cameras(director.plan, director.shot("pan"))
    with pytest.raises(OptionError) as caught:
        wan_camera_embedding(cams, 100, 64, length=12)
    assert [i.path for i in caught.value.issues] == ["width", "length"]


# ------------------------------------------------------------------ previz


def test_previz_equals_the_backends_frames(director):
    from daotai.events import Frame
    from daotai.render.base import RenderJob
    from daotai.render.registry import create_backend

    shot = director.shot("push")
    previz = drive(render_previz(director.plan, shot), RunContext())
    backend = create_backend("previz", {})
    try:
        frames = [e for e in backend.render(RenderJob(director.plan, shot), RunContext()) if isinstance(e, Frame)]
    finally:
        backend.close()
    assert previz.rgb.shape == (12, 180, 320, 3)
    for i, frame in enumerate(frames):
        assert np.array_equal(previz.rgb[i], frame.rgb)
        assert np.array_equal(previz.depth[i], frame.depth)
        assert np.array_equal(previz.mask[i], frame.mask)
    assert previz.character_mask().sum() > 0 and np.array_equal(previz.character_mask("red"), previz.mask == 1)
    preview = previz.depth_preview()
    assert preview.dtype == np.uint8 and preview[0][previz.mask[0] == 1].mean() > preview[0][0, 0]  # figure nearer than sky
    with pytest.raises(OptionError):
        previz.character_mask("blue")


def test_previz_stops_when_cancelled(director):
    ctx = RunContext()
    with pytest.raises(Cancelled):
        drive(render_previz(director.plan, director.shot("pan"), ctx=ctx), ctx, interrupted=lambda: True)


def test_previz_glimpses_go_to_their_own_hook_and_a_hook_that_raises_ends_the_render(director):
    shot = director.shot("pan")
    seen = []
    ctx = RunContext(glimpse_every_s=0.0)
    previz = drive(render_previz(director.plan, shot, ctx=ctx), ctx, on_glimpse=seen.append)
    assert [g.index for g in seen] == list(range(shot.frames))  # every frame, at no pause between pictures
    assert all(np.array_equal(g.rgb, f) for g, f in zip(seen, previz.rgb, strict=True))  # small already: as drawn
    assert drive(render_previz(director.plan, shot), RunContext(), on_glimpse=seen.append).rgb.shape == previz.rgb.shape
    assert len(seen) == shot.frames  # a context that asks for none makes none

    def stop(_):
        raise KeyboardInterrupt

    ctx = RunContext(glimpse_every_s=0.0)
    with pytest.raises(KeyboardInterrupt):
        drive(render_previz(director.plan, shot, ctx=ctx), ctx, on_glimpse=stop)


# ------------------------------------------------------------------ camera check


@pytest.fixture(scope="module")
def pan_frames(director):
    return drive(render_previz(director.plan, director.shot("pan")), RunContext()).rgb


def test_check_passes_the_planned_pan_and_flags_it_reversed(director, pan_frames):
    shot = director.shot("pan")
    good = check_clip(director.plan, shot, pan_frames)
    assert good.ok and good.adherence.component("horizontal").direction_ok
    reversed_ = check_clip(director.plan, shot, pan_frames[::-1])
    assert not reversed_.ok
    assert reversed_.adherence.component("horizontal").direction_ok is False
    assert "WRONG direction" in reversed_.report() and json.loads(reversed_.to_json())["ok"] is False


def test_check_puts_a_clip_at_another_rate_on_the_plan_grid(director, pan_frames):
    shot = director.shot("pan")
    doubled = np.repeat(pan_frames, 2, axis=0)  # the same motion at 24 fps
    result = check_clip(director.plan, shot, doubled, fps=24)
    assert result.frames_checked == 12 and result.ok
    with pytest.raises(OptionError, match="aspect ratio"):
        check_clip(director.plan, shot, pan_frames[:, :, :200])


# ------------------------------------------------------------------ sequence


@pytest.fixture(scope="module")
def rendered(director, tmp_path_factory):
    from daotai.run.pipeline import run
    from daotai.run.records import Finished
    from daotai.run.settings import PipelineSettings

    out = tmp_path_factory.mktemp("render")
    for event in run(director.plan, out, PipelineSettings(camera_qc=False)):
        if isinstance(event, Finished):
            return out
    raise AssertionError("the render did not finish")


def test_sequence_from_the_render_shots_equals_the_render_sequence(director, rendered, tmp_path):
    shots = shots_in_folder(director.plan, rendered)
    assert set(shots) == {"pan", "push"}
    result = drive(assemble_shots(director.plan, shots, tmp_path / "seq"), RunContext())
    assert result.sequence.read_bytes() == (rendered / "sequence.mp4").read_bytes()
    assert result.frames == director.plan.total_frames == 12 + 12 - 3
    assert result.timeline[0].name == "timeline.otio" and result.timeline[0].is_file()
    assert [p.name for p in result.shots] == ["pan.mp4", "push.mp4"]
    # 12 fps has no SMPTE timecode: FCP XML and EDL are written at 24 fps in real time, and said so
    assert [p.name for p in result.timeline] == ["timeline.otio", "timeline.xml", "timeline.edl"]
    assert "written at 24 fps in real time" in result.editorial_note and result.editorial_note in result.summary()
    manifest = json.loads((rendered / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["timeline_editorial"]["fps"] == 24 and manifest["timeline_editorial"]["source_fps"] == 12


def test_sequence_from_frames_and_a_choice_of_shots(director, pan_frames, tmp_path):
    from daotai.encode.read import probe

    plan = chosen_shots(director.plan, "pan")
    longer = np.concatenate([pan_frames, pan_frames[-1:]])  # 13 frames, a model's 4k+1 rounding: the last one drops
    result = drive(assemble_shots(plan, {"pan": longer}, tmp_path), RunContext())
    assert probe(result.sequence).frames == 12 and probe(tmp_path / "shots" / "pan.mp4").frames == 12
    with pytest.raises(OptionError, match="must cover the shot's 12 frames"):
        drive(assemble_shots(plan, {"pan": pan_frames[:11]}, tmp_path / "short"), RunContext())
    with pytest.raises(OptionError, match="must be the plan's size"):
        drive(assemble_shots(plan, {"pan": pan_frames[:, :90]}, tmp_path / "small"), RunContext())
    with pytest.raises(OptionError, match="shot_ids: 'nope'"):
        chosen_shots(director.plan, "pan, nope")
    with pytest.raises(OptionError, match="has no video"):
        drive(assemble_shots(director.plan, {"pan": pan_frames}, tmp_path / "b"), RunContext())


def test_sequence_of_shots_with_dialogue_gets_subtitles(director, pan_frames, tmp_path):
    from daotai.plan.model import DialoguePlan, ShotSoundPlan

    plan = chosen_shots(director.plan, "pan")
    spoken = plan.shots[0].model_copy(update={"sound": ShotSoundPlan(dialogue=(DialoguePlan(character="red",
                                                                                             line="Hello."),))})
    plan = plan.model_copy(update={"shots": (spoken,)})
    result = drive(assemble_shots(plan, {"pan": pan_frames}, tmp_path), RunContext())
    assert [p.relative_to(tmp_path).as_posix() for p in result.subtitles] == [
        "sequence.srt", "sequence.vtt", "shots/pan.srt", "shots/pan.vtt"]
    assert (tmp_path / "sequence.srt").read_text(encoding="utf-8") == "1\n00:00:00,000 --> 00:00:01,000\nRED: Hello.\n"


def test_the_wan_size_comes_from_the_plan(director):
    from daotai.comfy.camera_node import wan_size

    width, height = wan_size(director.plan, director.shot("pan"))
    assert width % 16 == 0 and height % 16 == 0 and math.isclose(width / height, 320 / 180, rel_tol=0.1)


def test_only_the_node_layer_imports_comfyui_or_torch():
    import ast

    source = Path(__file__).resolve().parents[1] / "src" / "daotai" / "comfy"
    for path in source.glob("*.py"):
        imported = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module.split(".")[0])
        if path.name != "nodes.py":
            assert not imported & {"comfy_api", "comfy", "torch", "folder_paths"}, path.name
