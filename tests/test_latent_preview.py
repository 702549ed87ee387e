"""The live picture of a neural shot while it denoises: a linear map from latents to colour, fitted on
the model's own finished shots (render.neural.latent_preview), and the glimpses it gives."""

from __future__ import annotations

import numpy as np
import pytest

from daotai.events import GLIMPSE_WIDTH, Frame, Glimpse
from daotai.render.neural.latent_preview import LatentPreview, frame_for

CHANNELS, LATENT_FRAMES, HEIGHT, WIDTH, SCALE = 4, 5, 6, 10, 8


def decoded_through(weights: np.ndarray, latents: np.ndarray) -> np.ndarray:
    """Frames a perfectly linear 'VAE' would decode: each latent pixel's colour over a SCALE x SCALE
    block, four frames per latent frame after the first (Wan's 4x temporal packing). (F, H, W, 3) uint8."""
    grid = latents[0]  # (C, T', H', W')
    frames = 1 + 4 * (LATENT_FRAMES - 1)
    out = []
    for f in range(frames):
        t = round(f * (LATENT_FRAMES - 1) / (frames - 1))
        colour = np.concatenate([grid[:, t].reshape(CHANNELS, -1).T, np.ones((HEIGHT * WIDTH, 1))], axis=1) @ weights
        picture = colour.reshape(HEIGHT, WIDTH, 3).round().astype(np.uint8)
        out.append(picture.repeat(SCALE, axis=0).repeat(SCALE, axis=1))
    return np.stack(out)


def test_the_map_learned_from_one_shot_shows_another_shots_latents_in_their_colours():
    rng = np.random.default_rng(3)
    weights = np.concatenate([rng.uniform(-18, 18, (CHANNELS, 3)), [[128.0, 110.0, 140.0]]])
    first = rng.normal(size=(1, CHANNELS, LATENT_FRAMES, HEIGHT, WIDTH))
    preview = LatentPreview()
    assert preview.picture(first, 17) is None  # nothing fitted yet: no picture, not a wrong one
    assert preview.fit(first, decoded_through(weights, first))
    second = rng.normal(size=(1, CHANNELS, LATENT_FRAMES, HEIGHT, WIDTH))
    index, picture = preview.picture(second, 17)
    assert index == 8  # the middle latent frame sits in the middle of a 17-frame shot
    assert picture.dtype == np.uint8 and picture.shape == (HEIGHT * GLIMPSE_WIDTH // WIDTH, GLIMPSE_WIDTH, 3)
    import cv2

    middle = second[0][:, LATENT_FRAMES // 2].reshape(CHANNELS, -1).T  # (H' W', C)
    colour = np.concatenate([middle, np.ones((len(middle), 1))], axis=1) @ weights
    truth = colour.reshape(HEIGHT, WIDTH, 3).round().astype(np.uint8)  # what frame 8 decodes to, per latent pixel
    expected = cv2.resize(truth, picture.shape[1::-1], interpolation=cv2.INTER_LINEAR)
    assert np.abs(picture.astype(int) - expected).max() <= 2  # the colours of the frame it will decode to


def test_latents_the_map_cannot_read_give_no_picture():
    preview = LatentPreview()
    packed = np.zeros((1, 120, CHANNELS))  # a pipeline that keeps its latents as tokens (LTX-Video)
    assert not preview.fit(packed, np.zeros((9, 16, 16, 3), np.uint8))
    assert preview.weights is None
    latents = np.random.default_rng(0).normal(size=(1, CHANNELS, 2, 4, 4))
    assert preview.fit(latents, np.full((5, 32, 32, 3), 90, np.uint8))
    assert preview.picture(packed, 5) is None
    assert preview.picture(np.zeros((1, CHANNELS + 2, 2, 4, 4)), 5) is None  # another model's channels
    assert preview.picture(latents, 5) is not None


def test_packed_latents_are_unpacked_with_the_pipelines_own_method_only_when_their_grid_fits():
    torch = pytest.importorskip("torch")
    pytest.importorskip("diffusers")
    from types import SimpleNamespace

    from diffusers import LTXPipeline

    from daotai.render.neural.latent_preview import as_video_latents

    pipe = SimpleNamespace(_unpack_latents=LTXPipeline._unpack_latents, vae_temporal_compression_ratio=8,
                           vae_spatial_compression_ratio=32, transformer_spatial_patch_size=1,
                           transformer_temporal_patch_size=1)
    video = torch.randn(1, 128, 3, 2, 4)  # 17 frames at 128x64 px: 3 x 2 x 4 latent cells of 128 channels
    packed = video.permute(0, 2, 3, 4, 1).reshape(1, 24, 128)  # (B, tokens, channels), as LTX denoises them
    assert torch.equal(as_video_latents(pipe, packed, 17, 64, 128), video)
    assert as_video_latents(pipe, torch.cat([packed, packed[:, :3]], 1), 17, 64, 128) is None  # condition tokens
    assert as_video_latents(pipe, video, 999, 1, 1) is video  # a video grid already
    assert as_video_latents(SimpleNamespace(), packed, 17, 64, 128) is None  # no unpacking to use


def test_a_fitted_map_is_kept_in_the_cache_folder_under_its_model_unless_caching_is_off(tmp_path, monkeypatch):
    from daotai.render.neural.latent_preview import MAPS_FILE, keep_map, recall_map

    monkeypatch.setenv("DAOTAI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DAOTAI_NO_CACHE", "1")
    weights = np.arange(15, dtype=np.float32).reshape(5, 3) / 7
    keep_map("wan:model-a", weights)
    assert not (tmp_path / "cache").exists() and recall_map("wan:model-a") is None
    monkeypatch.delenv("DAOTAI_NO_CACHE")
    keep_map("wan:model-a", weights)
    keep_map("ltx:model-b", weights[:3])
    assert np.allclose(recall_map("wan:model-a"), weights, atol=1e-6)
    assert recall_map("ltx:model-b").shape == (3, 3) and recall_map("wan:other") is None
    (tmp_path / "cache" / MAPS_FILE).write_text("{not json")
    assert recall_map("wan:model-a") is None  # a damaged file costs only the picture
    keep_map("wan:model-a", weights)  # and is replaced whole
    assert np.allclose(recall_map("wan:model-a"), weights, atol=1e-6)


def test_a_latent_frame_pairs_with_the_frame_at_the_same_place_in_the_shot():
    assert [frame_for(t, 5, 17) for t in range(5)] == [0, 4, 8, 12, 16]
    assert frame_for(0, 1, 30) == 0 and frame_for(3, 4, 1) == 0


@pytest.mark.slow
@pytest.mark.parametrize("family", ["wan", "ltx"])
def test_a_neural_shot_shows_its_latents_while_it_denoises_once_the_model_has_finished_a_shot(family, request):
    """Wan's latents are a video grid, LTX-Video's are packed tokens read through its own unpacking.
    Only when the run asks for glimpses; the frames are the same byte for byte either way."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("diffusers")
    from daotai.plan.planner import plan_script
    from daotai.render.base import RenderJob, RunContext
    from daotai.render.ltx import LTXBackend
    from daotai.render.wan import WanBackend
    from daotai.script.load import validate_script
    from test_neural_render import SCRIPT

    script = {**SCRIPT, "characters": [{"id": "ana", "appearance": "blue shirt"}, {"id": "bo", "appearance": "glasses"}]}
    plan = plan_script(validate_script(script))
    make = {"wan": WanBackend, "ltx": LTXBackend}[family]
    backend = make(model=str(request.getfixturevalue(f"tiny_{family}")), device="cpu", steps=3)

    def render(shot, ctx):
        return list(backend.render(RenderJob(plan, shot, controls=False), ctx))

    try:
        plain = render(plan.shots[1], RunContext())
        assert backend.runner.latest_latents is None  # nothing kept when no one looks
        first = render(plan.shots[0], RunContext(glimpse_every_s=0))
        shown, picture = [], backend.runner.latent_preview.picture

        def recording(latents, frames):
            shown.append((latents, backend.runner.latest_latents[0]))  # (what the picture reads, the sample)
            return picture(latents, frames)

        backend.runner.latent_preview.picture = recording
        second = render(plan.shots[1], RunContext(glimpse_every_s=0))
        weights = backend.runner.latent_preview.weights
    finally:
        backend.close()
    assert not any(isinstance(e, Glimpse) for e in plain + first)  # no map before a shot was finished
    assert weights is not None and weights.shape[1] == 3
    glimpses = [e for e in second if isinstance(e, Glimpse)]
    assert [(g.step, g.steps) for g in glimpses] == [(1, 3), (2, 3), (3, 3)]
    last_glimpse = max(i for i, e in enumerate(second) if isinstance(e, Glimpse))
    assert last_glimpse < min(i for i, e in enumerate(second) if isinstance(e, Frame))  # while denoising
    assert all(g.shot_id == "s02" and g.rgb.shape == (GLIMPSE_WIDTH, GLIMPSE_WIDTH, 3) for g in glimpses)
    assert 0 < glimpses[0].index < plan.shots[1].frames - 1
    frames = [e.rgb for e in second if isinstance(e, Frame)]
    assert len(frames) == plan.shots[1].frames
    assert all(np.array_equal(a.rgb, b) for a, b in zip([e for e in plain if isinstance(e, Frame)], frames, strict=True))
    if family == "wan":  # a video grid: the picture reads each step's clean estimate, not the noisy sample
        assert len(shown) == 3 and all(read.shape == sample.shape and bool(torch.isfinite(read).all())
                                       and not torch.allclose(read, sample.float()) for read, sample in shown)


@pytest.mark.slow
def test_a_served_neural_job_shows_its_second_shot_forming_before_it_is_decoded(tmp_path, tiny_wan):
    """A real `daotai serve`: the preview events of a shot still denoising carry its step (the picture
    itself is written as every glimpse is; its size is pinned by the in-process test above)."""
    pytest.importorskip("fastapi")
    httpx = pytest.importorskip("httpx")
    import json

    from daotai.server.testing import ServerProcess

    script = {"fps": 24, "size": "64x64", "seed": 5, "characters": [{"id": "ana", "colour": "#3366cc"}],
              "options": {"model": str(tiny_wan), "steps": 4},
              "shots": [{"shot_id": "a", "duration": 0.5, "subject": "ana", "camera": "push_in"},
                        {"shot_id": "b", "duration": 0.5, "subject": "ana", "camera": "pan_left"}]}
    server = ServerProcess(tmp_path / "serve").start()
    previews = []
    try:
        job_id = httpx.post(f"{server.url}/v1/jobs", params={"backend": "wan"}, json=script, timeout=30).json()["id"]
        with httpx.stream("GET", f"{server.url}/v1/jobs/{job_id}/events", timeout=300) as stream:
            event = None
            for line in stream.iter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event == "preview":
                    previews.append(json.loads(line[6:]))
        status = httpx.get(f"{server.url}/v1/jobs/{job_id}").json()["status"]
    finally:
        server.stop()
    assert status == "completed"
    denoising = [p for p in previews if "step" in p]
    assert denoising and {p["shot_id"] for p in denoising} == {"b"}  # the first shot fitted the map
    assert all(p["steps"] == 4 and 1 <= p["step"] <= 4 for p in denoising)
    assert denoising[0]["step"] == 1  # the first step of a shot always shows
    assert {p["shot_id"] for p in previews if p["index"] == 0 and "step" not in p} == {"a", "b"}  # decoded frames too


@pytest.mark.slow
def test_an_h3_shot_shows_the_clean_estimate_of_its_frames_while_it_denoises(tmp_path, tiny_h3, monkeypatch):
    """MiniMax-H3 packs its latents as rows of one sequence and gives no tensors to the step callback:
    a forward hook keeps x0 = x_t + (1 - t) v of the generated rows, read as a grid of patch cells."""
    pytest.importorskip("diffusers")
    import json

    from PIL import Image

    from daotai.render.base import RunContext
    from test_h3 import REFERENCE_RGB, SCRIPT, backend_for, events_of, plan_of

    monkeypatch.setenv("DAOTAI_CONFIG_DIR", str(tmp_path / "config"))  # the licence acceptance stays here
    Image.new("RGB", (48, 64), REFERENCE_RGB).save(tmp_path / "lin.png")
    (tmp_path / "h3.json").write_text(json.dumps(SCRIPT))
    plan = plan_of(tmp_path / "h3.json")
    shot = plan.shots[1]  # t2va, one generation
    backend = backend_for(tiny_h3)
    try:
        plain = events_of(backend, plan, shot)
        first = events_of(backend, plan, shot, RunContext(glimpse_every_s=0))
        second = events_of(backend, plan, shot, RunContext(glimpse_every_s=0))
    finally:
        backend.close()
    assert not any(isinstance(e, Glimpse) for e in plain + first)
    glimpses = [e for e in second if isinstance(e, Glimpse)]
    assert glimpses and all(g.step is not None and g.steps == glimpses[0].steps for g in glimpses)
    assert [g.step for g in glimpses] == list(range(1, len(glimpses) + 1))
    assert all(g.rgb.shape[1] == GLIMPSE_WIDTH and g.rgb.dtype == np.uint8 for g in glimpses)
    frames = [e.rgb for e in second if isinstance(e, Frame)]
    assert len(frames) == shot.frames
    assert all(np.array_equal(a.rgb, b) for a, b in zip([e for e in plain if isinstance(e, Frame)], frames, strict=True))


@pytest.mark.slow
def test_a_model_loaded_again_shows_its_first_shot_forming_from_the_kept_map(tmp_path, tiny_wan, monkeypatch):
    pytest.importorskip("diffusers")
    from daotai.plan.planner import plan_script
    from daotai.render.base import RenderJob, RunContext
    from daotai.render.wan import WanBackend
    from daotai.script.load import validate_script
    from test_neural_render import SCRIPT

    monkeypatch.setenv("DAOTAI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("DAOTAI_NO_CACHE", raising=False)
    script = {**SCRIPT, "characters": [{"id": "ana", "appearance": "blue shirt"}, {"id": "bo", "appearance": "glasses"}]}
    plan = plan_script(validate_script(script))
    glimpses = []
    for shot in plan.shots:  # each shot on a freshly loaded model: a server started again, say
        backend = WanBackend(model=str(tiny_wan), device="cpu", steps=2)
        try:
            glimpses.append([e for e in backend.render(RenderJob(plan, shot, controls=False),
                                                       RunContext(glimpse_every_s=0)) if isinstance(e, Glimpse)])
        finally:
            backend.close()
    assert glimpses[0] == [] and [g.step for g in glimpses[1]] == [1, 2]
