"""wan-camera: Plücker rays from the plan, their packing, the camera adapter and its published weights, a render."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from daotai.plan import geometry
from daotai.render.wan_camera import (
    CameraRays,
    group_indexes,
    map_published_adapter,
    pack_rays,
    plucker_frame,
    relative_cv_poses,
)

SCRIPT = {
    "title": "orbit",
    "fps": 24,
    "size": [64, 64],
    "seed": 5,
    "scene": "office",
    "characters": [{"id": "ana", "appearance": "blue shirt"}],
    "shots": [
        {"shot_id": "s01", "duration": 0.5, "camera": {"type": "orbit", "orbit": 40}, "subject": "ana"},
        {"shot_id": "s02", "duration": 0.5, "camera": {"type": "pan", "rotate": [25, 5, 0]}, "subject": "ana"},
    ],
}


def plan_of(tmp_path: Path, script: dict = SCRIPT):
    from daotai.plan.planner import plan_script
    from daotai.script.load import load_script

    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    return path, plan_script(load_script(path))


def shot_poses(shot) -> np.ndarray:
    return np.stack([np.reshape(c.cam_to_world, (4, 4)) for c in shot.cameras])  # (F, 4, 4) OpenGL axes


def reference_rays(pose_cv: np.ndarray, intrinsics, width: int, height: int) -> np.ndarray:
    """CameraCtrl's ray construction written out: OpenCV pixel rays (+z forward), rotated; moment = o x d."""
    fx, fy, cx, cy = intrinsics
    u, v = np.meshgrid(np.arange(width) + 0.5, np.arange(height) + 0.5)
    d = np.stack([(u - cx) / fx, (v - cy) / fy, np.ones_like(u)], axis=-1)
    d /= np.linalg.norm(d, axis=-1, keepdims=True)
    d = d @ pose_cv[:3, :3].T  # (H, W, 3)
    m = np.cross(np.broadcast_to(pose_cv[:3, 3], d.shape), d)
    return np.concatenate([m, d], axis=-1).transpose(2, 0, 1)  # (6, H, W)


# ---------------------------------------------------------------- Plücker identities


def test_plucker_rays_have_unit_directions_and_moment_origin_cross_direction(tmp_path):
    _, plan = plan_of(tmp_path)
    shot = plan.shots[0]  # orbit: the camera centre moves
    poses = relative_cv_poses(shot_poses(shot))
    K = geometry.intrinsics_from_matrix(np.reshape(shot.cameras[0].K, (3, 3)))
    assert np.allclose(poses[0], np.eye(4), atol=1e-12)  # relative to frame 0
    for i in (0, len(poses) // 2, len(poses) - 1):
        rays = plucker_frame(poses[i], K, plan.width, plan.height).astype(np.float64)  # (6, H, W)
        moment, direction = rays[:3], rays[3:]
        assert np.allclose(np.linalg.norm(direction, axis=0), 1.0, atol=1e-6)
        origin = poses[i][:3, 3]
        assert np.allclose(moment, np.cross(origin, direction, axis=0), atol=1e-6)
        assert np.allclose((moment * direction).sum(axis=0), 0.0, atol=1e-6)  # m . d = 0 for any line
        assert np.allclose(rays, reference_rays(poses[i], K, plan.width, plan.height), atol=1e-5)
    assert np.abs(plucker_frame(poses[-1], K, plan.width, plan.height)[:3]).max() > 0.1  # the orbit moved


def test_a_pure_rotation_keeps_the_moments(tmp_path):
    _, plan = plan_of(tmp_path)
    shot = plan.shots[1]  # pan + tilt about the camera centre
    poses = relative_cv_poses(shot_poses(shot))
    K = geometry.intrinsics_from_matrix(np.reshape(shot.cameras[0].K, (3, 3)))
    first = plucker_frame(poses[0], K, 64, 64)
    last = plucker_frame(poses[-1], K, 64, 64)
    assert np.allclose(first[:3], 0.0, atol=1e-6) and np.allclose(last[:3], first[:3], atol=1e-6)
    assert np.abs(last[3:] - first[3:]).max() > 0.2  # the directions turned
    # Away from the origin too: a camera rotated about its centre o keeps m = o x d for its new d,
    # so the moment of the ray through any fixed world direction is unchanged.
    o = np.array([1.0, -2.0, 0.5])
    a, b = np.eye(4), np.eye(4)
    a[:3, 3] = b[:3, 3] = o
    b[:3, :3] = geometry_rotation_y(30.0)
    ra, rb = plucker_frame(a, K, 64, 64), plucker_frame(b, K, 64, 64)
    for rays in (ra, rb):
        assert np.allclose(rays[:3], np.cross(o, rays[3:], axis=0), atol=1e-6)


def geometry_rotation_y(deg: float) -> np.ndarray:
    c, s = np.cos(np.radians(deg)), np.sin(np.radians(deg))
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])


def test_relative_poses_are_in_opencv_axes():
    # A camera looking down -z (OpenGL) that moves 1 m to its right: OpenCV's +x is also right.
    poses = np.stack([np.eye(4), np.eye(4)])
    poses[1, 0, 3] = 1.0
    rel = relative_cv_poses(poses)
    assert np.allclose(rel[1][:3, 3], [1, 0, 0])
    poses[1, 0, 3], poses[1, 1, 3] = 0.0, 1.0  # up in OpenGL = -y in OpenCV
    assert np.allclose(relative_cv_poses(poses)[1][:3, 3], [0, -1, 0])
    poses[1, 1, 3], poses[1, 2, 3] = 0.0, -1.0  # forward (-z OpenGL) = +z OpenCV
    assert np.allclose(relative_cv_poses(poses)[1][:3, 3], [0, 0, 1])


# ---------------------------------------------------------------- packing


def published_packing(video: np.ndarray, stride: int) -> np.ndarray:
    """The Control-Camera pipelines' packing, restated in torch: (1, 6, F, H, W) -> (1, 6*stride, F_latent, H, W)."""
    import torch

    x = torch.from_numpy(video)
    x = torch.cat([torch.repeat_interleave(x[:, :, :1], stride, dim=2), x[:, :, 1:]], dim=2).transpose(1, 2)
    b, f, c, h, w = x.shape
    x = x.contiguous().view(b, f // stride, stride, c, h, w).transpose(2, 3)
    return x.contiguous().view(b, f // stride, c * stride, h, w).transpose(1, 2).numpy()


@pytest.mark.parametrize("frames", [1, 5, 9, 21, 81])
def test_packing_shapes_for_4k_plus_1_frames(frames):
    pytest.importorskip("torch")
    rng = np.random.default_rng(frames)
    rays = rng.standard_normal((frames, 6, 16, 24)).astype(np.float32)
    packed = pack_rays(rays, 4)
    assert packed.shape == (24, (frames - 1) // 4 + 1, 16, 24)
    assert np.array_equal(packed, published_packing(rays.transpose(1, 0, 2, 3)[None], 4)[0])
    assert np.array_equal(packed[:, 0].reshape(6, 4, 16, 24), np.repeat(rays[0][:, None], 4, axis=1))


def test_packing_refuses_other_frame_counts():
    from daotai.errors import BackendError

    with pytest.raises(BackendError, match="is not 4k\\+1"):
        group_indexes(8, 4)
    assert group_indexes(9, 4) == [[0, 0, 0, 0], [1, 2, 3, 4], [5, 6, 7, 8]]


def test_camera_rays_pack_one_latent_frame_at_a_time(tmp_path):
    _, plan = plan_of(tmp_path)
    shot = plan.shots[0]
    poses = relative_cv_poses(shot_poses(shot)[:9])
    K = geometry.intrinsics_from_matrix(np.reshape(shot.cameras[0].K, (3, 3)))
    source = CameraRays(poses, (K,) * 9, 64, 64, 4)
    full = pack_rays(np.stack([source.frame(i) for i in range(9)]), 4)
    assert source.latent_frames == 3
    for j in range(3):
        assert np.array_equal(source.packed(j), full[:, j])
    for i in (0, 4, 8):  # the fast per-frame path gives plucker_frame's rays
        assert np.allclose(source.frame(i), plucker_frame(poses[i], K, 64, 64), atol=1e-6)


# ---------------------------------------------------------------- the adapter and its published weights


def reference_adapter(state: dict, rays):
    """The published adapter's forward from its own tensors: PixelUnshuffle, patch conv, residual blocks."""
    import torch.nn.functional as F

    b, c, f, h, w = rays.shape
    x = rays.permute(0, 2, 1, 3, 4).reshape(b * f, c, h, w)
    weight = state["control_adapter.conv.weight"]
    downscale = int(round((weight.shape[1] / c) ** 0.5))
    x = F.conv2d(F.pixel_unshuffle(x, downscale), weight, state["control_adapter.conv.bias"], stride=weight.shape[2:])
    i = 0
    while f"control_adapter.residual_blocks.{i}.conv1.weight" in state:
        p = f"control_adapter.residual_blocks.{i}."
        y = F.relu(F.conv2d(x, state[p + "conv1.weight"], state[p + "conv1.bias"], padding=1))
        x = x + F.conv2d(y, state[p + "conv2.weight"], state[p + "conv2.bias"], padding=1)
        i += 1
    return x.reshape(b, f, *x.shape[1:]).permute(0, 2, 1, 3, 4)


@pytest.mark.parametrize("prefix", ["", "model.diffusion_model.", "diffusion_model."])
def test_published_weight_names_map_onto_the_adapter(prefix):
    torch = pytest.importorskip("torch")
    from builders import published_camera_adapter
    from daotai.render.wan_camera import adapter_shape, make_adapter

    published = published_camera_adapter(dim=24, seed=3, blocks=2, prefix=prefix)
    checkpoint = {**published, f"{prefix}blocks.0.self_attn.q.weight": torch.zeros(4, 4),  # the transformer's own
                  f"{prefix}patch_embedding.weight": torch.zeros(4, 4)}
    mapped = map_published_adapter(checkpoint)
    assert sorted(mapped) == sorted(["proj.weight", "proj.bias"] + [f"blocks.{i}.{c}.{p}" for i in range(2)
                                                                     for c in ("conv1", "conv2")
                                                                     for p in ("weight", "bias")])
    shape = adapter_shape(mapped, 24)
    assert (shape.in_channels, shape.downscale, shape.dim, shape.patch, shape.blocks) == (24, 8, 24, (2, 2), 2)
    adapter = make_adapter(shape)
    adapter.load_state_dict(mapped, strict=True)
    rays = torch.randn(1, 24, 3, 32, 48)
    plain = {k[len(prefix):]: v for k, v in published.items()}
    with torch.no_grad():
        got = adapter(rays)
        want = reference_adapter(plain, rays)
    assert got.shape == (1, 24, 3, 2, 3)
    assert torch.allclose(got, want, atol=1e-5)


def test_unknown_adapter_keys_and_missing_projection_are_refused():
    torch = pytest.importorskip("torch")
    from daotai.errors import BackendError

    with pytest.raises(BackendError, match="not part of the Control-Camera adapter"):
        map_published_adapter({"control_adapter.conv.weight": torch.zeros(1), "control_adapter.extra.weight": torch.zeros(1)})
    with pytest.raises(BackendError, match="no control_adapter.conv.weight"):
        map_published_adapter({"blocks.0.self_attn.q.weight": torch.zeros(1)})


def test_a_zero_initialised_adapter_leaves_the_transformer_output_unchanged(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("diffusers")
    from builders import wan_transformer
    from daotai.render.wan_camera import AdapterShape, CameraControl, make_adapter

    transformer = wan_transformer(seed=1)
    latents = torch.randn(1, 16, 3, 8, 8)  # 9 frames of 64x64 through a 4x/8x VAE
    text = torch.randn(1, 6, 32)
    step = torch.tensor([500])

    def run():
        with torch.no_grad():
            return transformer(hidden_states=latents, timestep=step, encoder_hidden_states=text, return_dict=False)[0]

    before = run()
    _, plan = plan_of(tmp_path)
    shot = plan.shots[0]
    K = geometry.intrinsics_from_matrix(np.reshape(shot.cameras[0].K, (3, 3)))
    rays = CameraRays(relative_cv_poses(shot_poses(shot)[:9]), (K,) * 9, 64, 64, 4)
    shape = AdapterShape(24, 8, 24, (2, 2), 1)
    control = CameraControl(transformer, make_adapter(shape, zero=True), latent_channels=16)
    control.set_shot(rays, 1.0)
    assert torch.equal(run(), before)
    control.remove()
    torch.manual_seed(0)
    control = CameraControl(transformer, make_adapter(shape), latent_channels=16)
    control.set_shot(rays, 1.0)
    changed = run()
    assert not torch.allclose(changed, before)  # a trained (here random) adapter does steer the output
    control.set_shot(rays, 0.0)
    assert torch.equal(run(), before)  # adapter_scale=0 is the plain model
    control.remove()


# ---------------------------------------------------------------- a render through the command line


def test_an_orbit_renders_through_the_command_line_and_its_rays_reach_the_adapter(tiny_wan_camera, tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    from typer.testing import CliRunner

    from daotai.cli import app
    from daotai.encode.read import probe
    from daotai.render import wan_camera
    from daotai.render.neural.request import family_defaults, native_request
    from daotai.render.neural.retime import plan_to_native_indexes

    seen: list[np.ndarray] = []
    starts: list = []
    make = wan_camera.make_adapter

    def recording(shape, zero=False):
        adapter = make(shape, zero)
        adapter.register_forward_hook(lambda module, args, out: seen.append(args[0].detach().float().numpy().copy()))
        return adapter

    monkeypatch.setattr(wan_camera, "make_adapter", recording)
    original_set = wan_camera.CameraControl.set_shot
    monkeypatch.setattr(wan_camera.CameraControl, "set_shot",
                        lambda self, rays, scale, start=None: (starts.append(start), original_set(self, rays, scale, start)))
    script, plan = plan_of(tmp_path)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["render", str(script), "--backend", "wan-camera", "-O", f"model={tiny_wan_camera}",
                                      "--device", "cpu", "--steps", "2", "-o", str(out)])
    assert result.exit_code == 0, result.output
    for shot in plan.shots:
        assert probe(out / "shots" / f"{shot.shot_id}.mp4").frames == shot.frames
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["settings"]["backend"] == "wan-camera"
    # `daotai render` writes every shot's camera for other tools beside the videos (hashed in the manifest).
    assert {f"cameras/{s.shot_id}.pose.txt" for s in plan.shots} <= set(manifest["files"])
    assert any("camera adapter" in n and "previz frame as start latents" in n for n in manifest["shots"][0]["notices"])

    request = native_request(plan, plan.shots[0], family_defaults("wan-camera"))
    latent_frames = (request.frames - 1) // 4 + 1
    assert len(seen) == 2 * latent_frames  # once per latent frame per shot (reused by every step)
    for packed in seen:
        assert packed.shape == (1, 24, 1, request.height, request.width)
    # The orbit's rays, computed here from the plan's cameras at the native frame times.
    shot = plan.shots[0]
    native = plan_to_native_indexes(shot.frames, plan.fps, request.frames, request.fps)
    poses = shot_poses(shot)
    flip = np.diag([1.0, -1.0, -1.0, 1.0])
    first = poses[native[0]] @ flip
    K = geometry.intrinsics_from_matrix(np.reshape(shot.cameras[0].K, (3, 3)))
    for j, indexes in enumerate(group_indexes(request.frames, 4)):
        packed = seen[j][0, :, 0].reshape(6, 4, request.height, request.width)
        for t, i in enumerate(indexes):
            pose = np.linalg.inv(first) @ poses[native[i]] @ flip
            assert np.allclose(packed[:, t], reference_rays(pose, K, 64, 64), atol=1e-4)
    assert np.allclose(seen[0][0, :12], 0.0, atol=1e-6)  # frame 0 is the origin: no moment
    assert np.abs(seen[latent_frames - 1][0, :12]).max() > 0.05  # the orbit moved the camera centre
    assert all(s is not None and tuple(s.shape) == (1, 16, latent_frames, 8, 8) for s in starts)
    assert torch.count_nonzero(starts[0][:, :, 1:]) == 0 and torch.count_nonzero(starts[0][:, :, 0]) > 0


def test_missing_adapter_weights_are_named(tmp_path, tiny_wan):
    from typer.testing import CliRunner

    from daotai.cli import app

    script, _ = plan_of(tmp_path)
    result = CliRunner().invoke(app, ["render", str(script), "--backend", "wan-camera", "-O", f"model={tiny_wan}",
                                      "--device", "cpu", "--steps", "1", "-o", str(tmp_path / "out")])
    message = str(result.exception)  # the CLI's main() prints it; the test runner keeps the exception
    assert "no camera adapter weights" in message and "-O adapter=" in message


def test_an_image_to_video_checkpoint_starts_from_the_first_previz_frame(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    pytest.importorskip("diffusers")
    from diffusers import WanImageToVideoPipeline

    from builders import build_wan_camera_i2v
    from daotai.events import Frame
    from daotai.render.base import RenderJob, RunContext
    from daotai.render.neural.retime import resize_rgb
    from daotai.render.previz.backend import PrevizBackend
    from daotai.run.pipeline import run
    from daotai.run.records import Finished
    from daotai.run.settings import PipelineSettings

    model = build_wan_camera_i2v(tmp_path / "i2v")
    images, inputs = [], []
    original = WanImageToVideoPipeline.__call__

    def recording(self, *args, **kwargs):
        images.append(np.asarray(kwargs["image"]).copy())
        hook = self.transformer.patch_embedding.register_forward_pre_hook(
            lambda module, args: inputs.append(args[0].detach().clone()))
        try:
            return original(self, *args, **kwargs)
        finally:
            hook.remove()

    monkeypatch.setattr(WanImageToVideoPipeline, "__call__", recording)
    script = {**SCRIPT, "shots": SCRIPT["shots"][:1]}
    _, plan = plan_of(tmp_path, script)
    settings = PipelineSettings(backend="wan-camera", options={"model": str(model), "device": "cpu", "steps": 2})
    events = list(run(plan, tmp_path / "out", settings))
    assert isinstance(events[-1], Finished)
    previz = PrevizBackend(labels=False)
    try:
        first = next(e.rgb for e in previz.render(RenderJob(plan, plan.shots[0], controls=False), RunContext())
                     if isinstance(e, Frame))
    finally:
        previz.close()
    assert len(images) == 1 and np.array_equal(images[0], resize_rgb(first, 64, 64))
    # diffusers' image conditioning (noise 16 + mask 4 + image latents 16) reaches the transformer in the
    # Fun layout: noise, then the image's latent frame and zeros.
    x = inputs[0]
    assert x.shape[1] == 32 and torch.count_nonzero(x[:, 16:, 1:]) == 0 and torch.count_nonzero(x[:, 16:, :1]) > 0
    notices = [e.text for e in events if hasattr(e, "text")]
    assert any("previz frame as the image" in n for n in notices)


def test_the_published_checkpoint_layout_loads_its_transformer_and_adapter(tmp_path, tiny_wan, monkeypatch):
    torch = pytest.importorskip("torch")
    from builders import published_camera_checkpoint
    from daotai.render import wan_camera
    from daotai.run.pipeline import run
    from daotai.run.records import Finished
    from daotai.run.settings import PipelineSettings

    checkpoint, source = published_camera_checkpoint(tmp_path / "published", seed=4)
    built = []
    original = wan_camera.WanCameraBackend._build

    def keep(self, *args):
        pipe, resolved = original(self, *args)
        built.append(pipe)
        return pipe, resolved

    monkeypatch.setattr(wan_camera.WanCameraBackend, "_build", keep)
    script = {**SCRIPT, "shots": SCRIPT["shots"][:1]}
    _, plan = plan_of(tmp_path, script)
    settings = PipelineSettings(backend="wan-camera", options={
        "model": str(tiny_wan), "checkpoint": str(checkpoint), "device": "cpu", "steps": 1})
    events = list(run(plan, tmp_path / "out", settings))
    assert isinstance(events[-1], Finished)
    transformer = built[0].transformer
    # The plain text-to-video folder's transformer (16 channels) was replaced by the checkpoint's (Fun layout).
    assert transformer.patch_embedding.in_channels == 32
    assert transformer.condition_embedder.image_embedder is not None
    want = source.state_dict()
    got = {k: v for k, v in transformer.state_dict().items() if not k.startswith("camera_adapter.")}
    assert set(got) == set(want) and all(torch.equal(got[k], want[k]) for k in want)
    adapter = transformer.camera_adapter.state_dict()
    from builders import published_camera_adapter

    published = map_published_adapter(published_camera_adapter(24, 5))
    assert all(torch.equal(adapter[k], published[k]) for k in published)
    notice = next(e.text for e in events if hasattr(e, "text") and "camera adapter (" in e.text)
    assert "diffusion_pytorch_model.safetensors sha256 " in notice
