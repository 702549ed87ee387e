"""wan-vace-mlx: Wan-VACE in MLX against diffusers' WanVACEPipeline on tiny random weights, its 4/8-bit
conversions, the memory plan, and a camera-move script rendered through ``--backend wan-vace-mlx``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

mx = pytest.importorskip("mlx.core", reason='MLX not installed: pip install "mlx[cpu]" (Linux) or "daotai[mlx]"')
torch = pytest.importorskip("torch", reason="parity tests compare against torch: pip install 'daotai[neural]'")
diffusers = pytest.importorskip("diffusers", reason="parity tests need diffusers: pip install 'daotai[neural]'")

from builders import build_wan, build_wan_vace, plan_from  # noqa: E402
from daotai.errors import BackendError  # noqa: E402
from daotai.events import Frame  # noqa: E402
from daotai.render.base import RenderJob, RunContext  # noqa: E402

REFERENCE_RGB = (200, 120, 40)
SCRIPT = {
    "title": "camera move", "fps": 24, "size": [64, 64], "seed": 7, "scene": "office",
    "characters": [{"id": "ana", "appearance": "blue shirt", "reference_images": ["ana.png"]},
                   {"id": "bo", "appearance": "glasses"}],
    "shots": [
        {"shot_id": "s01", "duration": 0.5, "camera": {"type": "dolly", "motion": [0, 0, -0.5]}, "subject": "ana"},
        {"shot_id": "s02", "duration": 0.5, "camera": {"type": "pan", "rotate": [20, 0, 0]}, "subject": "bo",
         "characters": ["bo"], "framing": "close_up"},
    ],
}


def rel_l2(a, b) -> float:
    """||a - b|| / ||b|| in float64."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def psnr_u8(a: np.ndarray, b: np.ndarray) -> float:
    """PSNR in dB of two uint8 arrays (inf when identical)."""
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


@pytest.fixture(scope="module")
def vace_folder(tmp_path_factory) -> Path:
    """The tiny random WanVACEPipeline of tests/builders.py (3 blocks, VACE on 0 and 2)."""
    return build_wan_vace(tmp_path_factory.mktemp("vace_mlx") / "vace")


@pytest.fixture(scope="module")
def pipe(vace_folder):
    return diffusers.WanVACEPipeline.from_pretrained(vace_folder).to("cpu")


def _textured(width: int, height: int, seed: int):
    """A PIL RGB image of smooth random colour (so resizing has something to get wrong)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (4, 4, 3), dtype=np.uint8)
    return Image.fromarray(small).resize((width, height), Image.Resampling.BICUBIC)


def _depth_like_video(frames: int, size: int) -> list:
    """Grey frames with a moving gradient: what a previz depth preview looks like to the model."""
    from PIL import Image

    y, x = np.mgrid[0:size, 0:size].astype(np.float32) / size
    out = []
    for f in range(frames):
        grey = np.clip(255 * (0.3 + 0.6 * np.sin(3 * x + 0.4 * f) * y), 0, 255).astype(np.uint8)
        out.append(Image.fromarray(np.repeat(grey[:, :, None], 3, axis=2)))
    return out


def test_vace_transformer_matches_diffusers(vace_folder, pipe):
    """Control shorter than the latents (padded with zeros, as diffusers does) and a scale per layer."""
    from daotai.mlx.pipeline import load_transformer
    from daotai.mlx.vace import WanVACETransformer

    g = torch.Generator().manual_seed(1)
    x = torch.randn(1, 16, 3, 8, 6, generator=g)
    t = torch.tensor([700.0])
    text = torch.randn(1, 7, 32, generator=g)
    control = torch.randn(1, 96, 2, 8, 6, generator=g)
    with torch.no_grad():
        ref = pipe.transformer(x, t, text, control_hidden_states=control,
                               control_hidden_states_scale=torch.tensor([0.7, 1.3])).sample.numpy()
    model = load_transformer(vace_folder / "transformer")
    assert isinstance(model, WanVACETransformer)
    out = model(mx.array(x.numpy()), mx.array(t.numpy()), mx.array(text.numpy()), mx.array(control.numpy()),
                [0.7, 1.3])
    assert rel_l2(np.array(out), ref) < 1e-4


@pytest.mark.parametrize("with_mask", [False, True])
def test_control_latents_match_the_pipelines_preparation(vace_folder, pipe, with_mask):
    """Video split by the mask, references letterboxed on white and put in front, mask folded 8x8."""
    from daotai.mlx.pipeline import load_vae_encoder
    from daotai.mlx.vace import control_latents, frames_to_video, reference_canvas

    video = _depth_like_video(9, 32)
    # a reference not a multiple of 8 (Lanczos-rounded to 40x24 first), and one that is letterboxed
    references = [_textured(45, 27, 1), _textured(16, 32, 2)]
    mask = None
    if with_mask:  # soft values: the split thresholds at 0.5, the mask channels keep the values
        rng = np.random.default_rng(3)
        mask = rng.choice([0.0, 0.3, 0.7, 1.0], size=(9, 32, 32)).astype(np.float32)
    with torch.no_grad():
        t_video, t_mask, t_refs = pipe.preprocess_conditions(
            video, None if mask is None else np.repeat(mask[..., None], 3, axis=3), references, 1, 32, 32, 9,
            torch.float32, torch.device("cpu"))
        expected = torch.cat([pipe.prepare_video_latents(t_video, t_mask, t_refs),
                              pipe.prepare_masks(t_mask, t_refs)], dim=1).numpy()
    canvases = [reference_canvas(r, 32, 32) for r in references]
    np.testing.assert_allclose(np.stack([np.array(c) for c in canvases]), torch.stack(t_refs[0]).numpy(), atol=2e-6)
    got = np.array(control_latents(load_vae_encoder(vace_folder / "vae"),
                                   frames_to_video([np.asarray(f) for f in video]), canvases, mask))
    assert got.shape == expected.shape == (1, 96, 2 + 3, 4, 4)
    assert rel_l2(got, expected) < 1e-5
    np.testing.assert_array_equal(got[:, 32:], expected[:, 32:])  # the mask channels exactly


def _scheduler(kind: str):
    if kind == "euler":
        return diffusers.FlowMatchEulerDiscreteScheduler(shift=3.0)
    return diffusers.UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True, flow_shift=3.0)


@pytest.mark.parametrize("kind,steps", [("euler", 3), ("unipc", 4)])
def test_sampling_matches_wan_vace_pipeline_step_by_step(vace_folder, pipe, tmp_path, kind, steps):
    """Same embeddings, initial latents, control video and two references; CFG 5, conditioning scale 0.8."""
    from daotai.mlx.pipeline import (
        SampleSettings,
        decode_to_uint8,
        denoise,
        load_transformer,
        load_vae_decoder,
        load_vae_encoder,
    )
    from daotai.mlx.scheduler import sampler_from_folder
    from daotai.mlx.vace import ControlledModel, control_latents, frames_to_video, reference_canvas

    video = _depth_like_video(9, 32)
    references = [_textured(24, 32, 4), _textured(256, 256, 5)]
    g = torch.Generator().manual_seed(4)
    latents = torch.randn(1, 16, 3 + len(references), 4, 4, generator=g)
    cond, uncond = torch.randn(1, 12, 32, generator=g), torch.randn(1, 12, 32, generator=g)
    scheduler = _scheduler(kind)
    scheduler.save_config(tmp_path / "scheduler")
    pipe.scheduler = scheduler
    steps_seen: list[np.ndarray] = []

    def record(_pipe, _i, _t, tensors):
        steps_seen.append(tensors["latents"].numpy().copy())
        return {}

    with torch.no_grad():
        ref = pipe(video=video, reference_images=references, conditioning_scale=0.8, prompt_embeds=cond,
                   negative_prompt_embeds=uncond, latents=latents.clone(), height=32, width=32, num_frames=9,
                   num_inference_steps=steps, guidance_scale=5.0, output_type="np",
                   callback_on_step_end=record, callback_on_step_end_tensor_inputs=["latents"]).frames[0]
    ref_u8 = np.round(np.clip(ref, 0, 1) * 255).astype(np.uint8)  # (9, 32, 32, 3)

    control = control_latents(load_vae_encoder(vace_folder / "vae"),
                              frames_to_video([np.asarray(f) for f in video]),
                              [reference_canvas(r, 32, 32) for r in references])
    model = ControlledModel(load_transformer(vace_folder / "transformer"), control, (0.8, 0.8))
    settings = SampleSettings(steps=steps, guidance=5.0, shift=3.0, sampler=sampler_from_folder(tmp_path / "scheduler"))
    ours = mx.array(latents.numpy())
    errors = []
    for i, stepped, _ in denoise(model, ours, mx.array(cond.numpy()), mx.array(uncond.numpy()), settings):
        ours = stepped
        errors.append(rel_l2(np.array(ours), steps_seen[i]))
    assert len(errors) == len(steps_seen) == steps
    assert max(errors) <= 1e-4, errors
    frames = decode_to_uint8(load_vae_decoder(vace_folder / "vae"), ours[:, :, len(references):])
    assert frames.shape == ref_u8.shape == (9, 32, 32, 3)
    assert psnr_u8(frames, ref_u8) >= 60.0


@pytest.fixture(scope="module")
def vace64(tmp_path_factory) -> Path:
    """A tiny VACE folder whose widths divide by 64, so group-64 quantisation covers every block linear."""
    return build_wan_vace(tmp_path_factory.mktemp("vace_mlx64") / "vace64", attention_head_dim=32, ffn_dim=128)


# Bounds with headroom over what was measured (tiny model, diffusers' default init, float32 reference):
# 4-bit g64: velocity 0.054, latents after 4 steps 0.034, frames 35.2 dB; 8-bit: 0.0031, 0.0016, 85.6 dB.
QUANT_BOUNDS = {4: (0.08, 0.06, 30.0), 8: (0.006, 0.004, 60.0)}


@pytest.mark.parametrize("bits", [4, 8])
def test_conversion_quantises_main_and_control_blocks_within_bound(vace64, tmp_path, bits):
    """Relative L2 of one velocity and of the latents after 4 controlled steps against float32, and the
    PSNR of the decoded frames."""
    from daotai.mlx.convert import convert, load_converted_transformer
    from daotai.mlx.memory import folder_footprint
    from daotai.mlx.pipeline import (
        SampleSettings,
        decode_to_uint8,
        denoise,
        load_transformer,
        load_vae_decoder,
        load_vae_encoder,
    )
    from daotai.mlx.vace import ControlledModel, control_latents, frames_to_video

    velocity_bound, latents_bound, psnr_bound = QUANT_BOUNDS[bits]
    dest = convert(vace64, tmp_path / f"q{bits}", bits=bits, group_size=64)
    layers = json.loads((dest / "mlx_manifest.json").read_text())["quantized_layers"]
    assert any(p.startswith("vace_blocks.0.proj_in") for p in layers)
    assert {p.split(".")[0] for p in layers} == {"blocks", "vace_blocks"}
    fp = folder_footprint(dest)
    assert fp.transformer_bits == bits and fp.control_blocks == 2

    g = np.random.default_rng(6)
    x = mx.array(g.standard_normal((1, 16, 3, 8, 8), dtype=np.float32))
    text = mx.array(g.standard_normal((1, 9, 32), dtype=np.float32))
    control = mx.array(g.standard_normal((1, 96, 3, 8, 8), dtype=np.float32))
    t = mx.array([600.0])
    full, quant = load_transformer(vace64 / "transformer"), load_converted_transformer(dest)
    assert rel_l2(np.array(quant(x, t, text, control)), np.array(full(x, t, text, control))) < velocity_bound

    ramp = np.arange(32, dtype=np.uint8)[None, :, None] * 3
    video = frames_to_video([np.full((32, 32, 3), v, np.uint8) + ramp for v in range(0, 90, 10)])
    ctl = control_latents(load_vae_encoder(vace64 / "vae"), video)
    start = mx.array(g.standard_normal((1, 16, 3, 4, 4), dtype=np.float32))
    cond = mx.array(g.standard_normal((1, 12, 32), dtype=np.float32))
    uncond = mx.array(g.standard_normal((1, 12, 32), dtype=np.float32))
    decoder = load_vae_decoder(vace64 / "vae")

    def sample(model):
        steps = denoise(ControlledModel(model, ctl, (1.0, 1.0)), start, cond, uncond,
                        SampleSettings(steps=4, guidance=5.0, shift=3.0))
        latents = [stepped for _, stepped, _ in steps][-1]
        return np.array(latents), decode_to_uint8(decoder, latents)

    (full_latents, full_frames), (quant_latents, quant_frames) = sample(full), sample(quant)
    assert rel_l2(quant_latents, full_latents) < latents_bound
    assert psnr_u8(quant_frames, full_frames) >= psnr_bound


def _script(tmp_path: Path):
    from PIL import Image

    Image.new("RGB", (48, 64), REFERENCE_RGB).save(tmp_path / "ana.png")
    return plan_from(tmp_path / "camera.json", SCRIPT)


def test_memory_plan_refuses_before_loading(vace_folder, tmp_path, monkeypatch):
    from daotai.mlx.memory import Budget, check_plan, folder_footprint, footprint_peak
    from daotai.render.registry import create_backend

    plan, _ = _script(tmp_path)
    fp = folder_footprint(vace_folder)
    assert fp.control_blocks == 2
    # two reference images are 8 pixel frames' worth of latents: counted, but never offered as video frames
    assert check_plan(fp, 64, 64, 9, Budget(10**12, "test"), reference_frames=8) == footprint_peak(fp, 64, 64, 17)
    # the control branch and the reference frames are part of the estimate
    assert footprint_peak(fp, 64, 64, 9 + 8) > footprint_peak(fp.__class__(**{**fp.__dict__, "control_blocks": 0}),
                                                              64, 64, 9)
    monkeypatch.setenv("DAOTAI_MLX_MEMORY_GB", "0.001")
    backend = create_backend("wan-vace-mlx", {"model": str(vace_folder), "steps": 2})
    try:
        with pytest.raises(BackendError, match=r"wan-vace-mlx: .* needs .* rule: estimated peak <= budget"):
            list(backend.render(RenderJob(plan, plan.shots[0], controls=False), RunContext()))
        assert backend.parts is None  # nothing was loaded
    finally:
        backend.close()


def test_text_to_video_folder_is_refused_by_name(tmp_path):
    from daotai.render.registry import create_backend

    plan, _ = _script(tmp_path)
    backend = create_backend("wan-vace-mlx", {"model": str(build_wan(tmp_path / "t2v")), "steps": 2})
    try:
        with pytest.raises(BackendError, match="not a Wan-VACE model"):
            list(backend.render(RenderJob(plan, plan.shots[0], controls=False), RunContext()))
    finally:
        backend.close()


def test_camera_move_renders_through_the_cli_with_previz_depth_as_control(vace_folder, tmp_path, monkeypatch):
    """`daotai render --backend wan-vace-mlx`: each shot's control video is its previz depth at the native
    frame times, and one reference per character goes in (ana's file, bo's colour swatch)."""
    from typer.testing import CliRunner

    import daotai.mlx.vace as vace
    from daotai.cli import app
    from daotai.encode.read import probe
    from daotai.render.neural.request import family_defaults, native_request
    from daotai.render.neural.retime import plan_to_native_indexes
    from daotai.render.previz.backend import PrevizBackend
    from daotai.render.previz.control import depth_to_preview

    calls: list[dict] = []
    original = vace.control_latents

    def recording(encoder, video, references=(), mask=None):
        calls.append({"video": np.array(video), "references": [np.array(r) for r in references], "mask": mask})
        out = original(encoder, video, references, mask)
        calls[-1]["shape"] = tuple(out.shape)
        return out

    monkeypatch.setattr(vace, "control_latents", recording)
    plan, script = _script(tmp_path)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["render", str(script), "--backend", "wan-vace-mlx", "--model", str(vace_folder),
                                      "--steps", "2", "-o", str(out)])
    assert result.exit_code == 0, result.output[-3000:]
    for shot in plan.shots:
        assert probe(out / "shots" / f"{shot.shot_id}.mp4").frames == shot.frames
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["settings"]["backend"] == "wan-vace-mlx"
    assert len(calls) == len(plan.shots) == 2

    previz = PrevizBackend(labels=False)
    try:
        for shot, call in zip(plan.shots, calls, strict=True):
            request = native_request(plan, shot, family_defaults("wan-vace"))
            video = call["video"]  # (1, 3, F, H, W) in [-1, 1]
            assert video.shape == (1, 3, request.frames, 64, 64) and call["mask"] is None
            depth = [e.depth for e in previz.render(RenderJob(plan, shot, controls=True), RunContext())
                     if isinstance(e, Frame)]
            indexes = plan_to_native_indexes(shot.frames, plan.fps, request.frames, request.fps)
            for native_index, plan_index in enumerate(indexes):
                expected = depth_to_preview(depth[plan_index], 0.05, 500.0).astype(np.float32)  # near = white
                for channel in range(3):
                    np.testing.assert_allclose(video[0, channel, native_index], 2 * expected / 255 - 1, atol=1e-6)
            assert len(call["references"]) == len(shot.characters)
            latent_frames = (request.frames - 1) // 4 + 1
            assert call["shape"] == (1, 96, len(shot.characters) + latent_frames, 8, 8)
    finally:
        previz.close()
    assert not np.array_equal(calls[0]["video"], calls[1]["video"])  # each shot its own camera move
    # s01: ana's reference file (48x64 letterboxed on white in the 64x64 canvas), then bo's swatch
    ana, bo = calls[0]["references"]
    colour = 2 * np.array(REFERENCE_RGB, np.float32) / 255 - 1
    np.testing.assert_allclose(ana[:, :, 8:56], np.broadcast_to(colour[:, None, None], (3, 64, 48)), atol=1e-6)
    assert (ana[:, :, :8] == 1.0).all() and (ana[:, :, 56:] == 1.0).all()
    bo_colour = next(c.colour for c in plan.characters if c.id == "bo")
    expected_bo = 2 * np.array([round(255 * c) for c in bo_colour], np.float32) / 255 - 1
    np.testing.assert_allclose(bo[:, 0, 0], expected_bo, atol=1e-6)
    np.testing.assert_array_equal(calls[1]["references"][0], bo)
    notes = " | ".join(manifest["shots"][0]["notices"])
    assert "estimated peak" in notes and "no reference image for bo" in notes
