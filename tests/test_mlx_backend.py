"""The wan-mlx backend: protocol, seeds, cancellation, conversion and a two-shot render through the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mlx.core", reason='MLX not installed: pip install "mlx[cpu]" (Linux) or "daotai[mlx]"')
pytest.importorskip("torch", reason="the tiny test model is built with diffusers: pip install 'daotai[neural]'")
pytest.importorskip("diffusers", reason="the tiny test model is built with diffusers: pip install 'daotai[neural]'")

from builders import build_wan, plan_from  # noqa: E402
from daotai.errors import BackendError, Cancelled  # noqa: E402
from daotai.events import Frame, Glimpse, Notice, Progress  # noqa: E402
from daotai.render.base import RenderJob, RunContext  # noqa: E402

SCRIPT = {
    "title": "two shots", "fps": 24, "size": [64, 64], "seed": 7, "scene": "office",
    "characters": [{"id": "ana", "appearance": "blue shirt"}, {"id": "bo", "appearance": "glasses"}],
    "shots": [
        {"shot_id": "s01", "duration": 0.5, "camera": {"type": "dolly", "motion": [0, 0, -0.5]}, "subject": "ana"},
        {"shot_id": "s02", "duration": 0.5, "camera": {"type": "pan", "rotate": [20, 0, 0]}, "subject": "bo"},
    ],
}


@pytest.fixture(scope="module")
def wan_folder(tmp_path_factory) -> Path:
    """A random WanPipeline whose widths divide by 64 (so 4-bit group-64 quantises every block linear)."""
    return build_wan(tmp_path_factory.mktemp("mlx_models") / "wan64", attention_head_dim=32, ffn_dim=128)


@pytest.fixture(scope="module")
def converted(wan_folder, tmp_path_factory) -> Path:
    """wan_folder converted through the command line (4-bit, group 64)."""
    dest = tmp_path_factory.mktemp("mlx_conv") / "wan64-q4"
    done = _cli("models", "convert", str(wan_folder), "--to", "mlx", "--bits", "4", "--group-size", "64",
                "-o", str(dest))
    assert done.returncode == 0, done.stderr[-2000:]
    return dest


def _cli(*args: str, timeout: int = 120, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "daotai.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "DAOTAI_DEBUG": "", **env})


def _plan(tmp_path: Path):
    return plan_from(tmp_path / "two.json", SCRIPT)


def _render(backend, plan, shot, ctx=None) -> list:
    return list(backend.render(RenderJob(plan, shot, controls=False), ctx or RunContext()))


def test_backend_yields_every_frame_in_order_and_is_seeded(wan_folder, tmp_path):
    from daotai.render.registry import create_backend

    plan, _ = _plan(tmp_path)
    shot = plan.shots[0]
    backend = create_backend("wan-mlx", {"model": str(wan_folder), "steps": 3})
    try:
        events = _render(backend, plan, shot)
        again = _render(backend, plan, shot)
    finally:
        backend.close()
    frames = [e for e in events if isinstance(e, Frame)]
    assert [f.index for f in frames] == list(range(shot.frames))
    assert all(f.rgb.shape == (64, 64, 3) and f.rgb.dtype == np.uint8 for f in frames)
    steps = [e.done for e in events if isinstance(e, Progress) and e.stage == "denoise"]
    assert steps == [1, 2, 3]
    repeat = [e.rgb for e in again if isinstance(e, Frame)]
    assert all(np.array_equal(a.rgb, b) for a, b in zip(frames, repeat, strict=True))  # same seed, same frames


def test_a_shot_shows_itself_forming_once_the_model_has_decoded_one(wan_folder, tmp_path, monkeypatch):
    """The server's live view on a Mac: each step's clean estimate x0 = x_t - sigma v through the fitted map."""
    from daotai.render.wan_mlx import WanMLXBackend

    monkeypatch.setenv("DAOTAI_CACHE_DIR", str(tmp_path / "cache"))  # where the model's colour map is kept
    monkeypatch.delenv("DAOTAI_NO_CACHE", raising=False)
    plan, _ = _plan(tmp_path)
    backend = WanMLXBackend(model=str(wan_folder), steps=3)
    live = RunContext(glimpse_every_s=0.0)
    try:
        plain = _render(backend, plan, plan.shots[0])
        first = _render(backend, plan, plan.shots[0], live)
        second = _render(backend, plan, plan.shots[1], live)
    finally:
        backend.close()
    assert not any(isinstance(e, Glimpse) for e in plain + first)  # none asked for; then nothing fitted yet
    assert f"wan-mlx:{wan_folder}" in json.loads((tmp_path / "cache" / "latent_maps.json").read_text())
    glimpses = [e for e in second if isinstance(e, Glimpse)]
    assert [(g.step, g.steps) for g in glimpses] == [(1, 3), (2, 3), (3, 3)]
    assert all(g.rgb.dtype == np.uint8 and g.rgb.shape[1] == 320 and g.shot_id == "s02" for g in glimpses)
    assert not np.array_equal(glimpses[0].rgb, glimpses[-1].rgb)  # the estimate moves with the steps
    frames = [[e.rgb for e in events if isinstance(e, Frame)] for events in (plain, first)]
    assert all(np.array_equal(a, b) for a, b in zip(*frames, strict=True))  # the picture costs the frames nothing
    reloaded = WanMLXBackend(model=str(wan_folder), steps=3)
    try:
        recalled = [e for e in _render(reloaded, plan, plan.shots[0], live) if isinstance(e, Glimpse)]
    finally:
        reloaded.close()
    assert len(recalled) == 3  # loaded again, the kept map shows the first shot too


def test_cancel_stops_between_steps(wan_folder, tmp_path):
    from daotai.render.wan_mlx import WanMLXBackend

    plan, _ = _plan(tmp_path)
    backend = WanMLXBackend(model=str(wan_folder), steps=5)
    ctx = RunContext()
    seen = []
    with pytest.raises(Cancelled):
        for event in backend.render(RenderJob(plan, plan.shots[0], controls=False), ctx):
            seen.append(event)
            if isinstance(event, Progress) and event.stage == "denoise" and event.done == 2:
                ctx.cancel.set()
    assert [e.done for e in seen if isinstance(e, Progress) and e.stage == "denoise"] == [1, 2]
    assert not any(isinstance(e, Frame) for e in seen)


def test_converted_folder_manifest_and_deviation(wan_folder, converted):
    import mlx.core as mx

    from daotai.mlx.convert import check_converted, load_converted_transformer
    from daotai.mlx.pipeline import load_transformer

    manifest = json.loads((converted / "mlx_manifest.json").read_text())
    assert manifest["bits"] == 4 and manifest["group_size"] == 64 and len(manifest["quantized_layers"]) == 20
    assert "transformer/diffusion_pytorch_model.safetensors" in manifest["source"]["files"]
    q = load_converted_transformer(converted, verify_source=True)
    ref = load_transformer(wan_folder / "transformer")
    mx.random.seed(5)
    x, t, c = mx.random.normal((1, 16, 3, 8, 8)), mx.array([500.0]), mx.random.normal((1, 6, 32))
    a, b = np.array(q(x, t, c)), np.array(ref(x, t, c))
    err = np.linalg.norm(a - b) / np.linalg.norm(b)
    assert 0.0 < err < 0.05
    # a converted file altered afterwards is refused
    vae_file = next((converted / "vae").glob("*.safetensors"))
    data = vae_file.read_bytes()
    vae_file.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    try:
        with pytest.raises(BackendError, match="sha256"):
            check_converted(converted)
    finally:
        vae_file.write_bytes(data)


def test_convert_rejects_bad_bits_and_group_size(wan_folder, tmp_path):
    bad_group = _cli("models", "convert", str(wan_folder), "--group-size", "48", "-o", str(tmp_path / "a"))
    assert bad_group.returncode != 0 and "group_size=48" in bad_group.stderr
    assert "Traceback" not in bad_group.stderr
    bad_bits = _cli("models", "convert", str(wan_folder), "--bits", "3", "-o", str(tmp_path / "b"))
    assert bad_bits.returncode != 0 and "bits=3" in bad_bits.stderr
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_cli_renders_two_shot_script_with_the_4bit_model(converted, tmp_path):
    from daotai.encode.read import probe

    plan, script = _plan(tmp_path)
    out = tmp_path / "out"
    done = _cli("render", str(script), "--backend", "wan-mlx", "--model", str(converted), "--steps", "2",
                "-o", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    for shot in plan.shots:
        info = probe(out / "shots" / f"{shot.shot_id}.mp4")
        assert (info.width, info.height, info.frames) == (64, 64, shot.frames)
    assert probe(out / "sequence.mp4").frames == plan.total_frames
    manifest = json.loads((out / "manifest.json").read_text())
    assert {"shots/s01.mp4", "shots/s02.mp4", "sequence.mp4", "qc.json"} <= set(manifest["files"])
    assert manifest["settings"]["backend"] == "wan-mlx"
    for shot in manifest["shots"]:  # the sampler and the memory plan are recorded per shot
        notes = " | ".join(shot["notices"])
        assert ("sampler Euler (flow matching), from scheduler/scheduler_config.json "
                "(FlowMatchEulerDiscreteScheduler)") in notes
        assert "estimated peak" in notes and ("total RAM" in notes or "working set" in notes)
    assert json.loads((out / "qc.json").read_text())


def _request(plan, shot):
    """What wan-mlx will ask the model for (size and frames at 16 fps)."""
    from daotai.render.neural.request import effective_defaults, native_request
    from daotai.render.spec import NeuralOptions

    return native_request(plan, shot, effective_defaults("wan", NeuralOptions()))


def test_footprint_is_read_from_headers_of_plain_and_converted_folders(wan_folder, converted):
    import mlx.core as mx
    from mlx.utils import tree_flatten

    from daotai.mlx.convert import load_converted_transformer
    from daotai.mlx.memory import folder_footprint
    from daotai.mlx.pipeline import load_transformer

    plain, quant = folder_footprint(wan_folder), folder_footprint(converted)
    params = dict(tree_flatten(load_transformer(wan_folder / "transformer").parameters()))
    assert plain.transformer_params == sum(v.size for v in params.values())
    assert plain.transformer_bits is None and plain.transformer_bytes == 4 * plain.transformer_params
    assert (plain.dim, plain.ffn_dim) == (64, 128)
    # the converted folder: same model, same parameter count, and exactly the bytes MLX holds
    loaded = dict(tree_flatten(load_converted_transformer(converted).parameters()))
    assert quant.transformer_params == plain.transformer_params
    assert (quant.transformer_bits, quant.group_size) == (4, 64)
    assert quant.transformer_bytes == sum(v.nbytes for v in loaded.values()) < plain.transformer_bytes
    assert quant.other_bytes == plain.other_bytes > 0
    assert all(isinstance(v, mx.array) for v in loaded.values())


def test_plan_over_budget_is_refused_before_anything_loads(wan_folder, tmp_path):
    from daotai.mlx.memory import GB, folder_footprint, footprint_peak
    from daotai.render.wan_mlx import WanMLXBackend

    plan, _ = _plan(tmp_path)
    shot = plan.shots[0]
    req = _request(plan, shot)
    fp = folder_footprint(wan_folder)
    need = footprint_peak(fp, req.width, req.height, req.frames)
    fewer = footprint_peak(fp, req.width, req.height, req.frames - 4)
    backend = WanMLXBackend(model=str(wan_folder), steps=2, memory_gb=(need + fewer) / 2 / GB)
    events = []
    with pytest.raises(BackendError) as info:
        for event in backend.render(RenderJob(plan, shot, controls=False), RunContext()):
            events.append(event)
    msg = str(info.value)
    assert f"at {req.width}x{req.height}, {req.frames} frames, transformer float32 needs" in msg
    assert "rule: estimated peak <= budget" in msg and "memory_gb=" in msg
    # lower bits first (this folder is float32), then the most frames that fit, then a smaller size
    assert "would fit: the transformer at 8-bit (daotai models convert <model> --to mlx --bits 8)" in msg
    assert f"; or {req.frames - 4} frames (~" in msg and f"with {req.frames} frames" in msg
    assert events == [] and backend.parts is None  # refused before the first load event
    # the same shot with room to spare renders, and says what it planned
    roomy = WanMLXBackend(model=str(wan_folder), steps=1, memory_gb=(need * 4) / GB)
    notes = [e.text for e in _render(roomy, plan, shot) if isinstance(e, Notice)]
    assert any("estimated peak" in n and "memory_gb=" in n for n in notes)


def test_cli_refuses_with_the_environment_budget(wan_folder, tmp_path):
    _, script = _plan(tmp_path)
    out = tmp_path / "out"
    done = _cli("render", str(script), "--backend", "wan-mlx", "--model", str(wan_folder), "--steps", "1",
                "-o", str(out), DAOTAI_MLX_MEMORY_GB="0.00001")
    assert done.returncode == 4, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert "DAOTAI_MLX_MEMORY_GB=1e-05" in done.stderr and "rule: estimated peak <= budget" in done.stderr
    assert not list(out.glob("shots/*.mp4"))


def test_unipc_folder_samples_with_unipc(wan_folder, tmp_path):
    """A folder whose scheduler config says UniPC (as Wan2.1's do) runs UniPC, and says so; its 720p
    shift is reported but daotai's default shift for the model runs, as in the torch backend."""
    import shutil

    from diffusers import UniPCMultistepScheduler

    from daotai.render.wan_mlx import WanMLXBackend

    unipc = tmp_path / "wan64-unipc"
    shutil.copytree(wan_folder, unipc)
    shutil.rmtree(unipc / "scheduler")
    UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True, flow_shift=5.0
                            ).save_config(unipc / "scheduler")
    plan, _ = _plan(tmp_path)
    shot = plan.shots[0]
    runs = {}
    for name, folder in (("euler", wan_folder), ("unipc", unipc)):
        backend = WanMLXBackend(model=str(folder), steps=3)
        try:
            runs[name] = _render(backend, plan, shot)
        finally:
            backend.close()
    notes = {k: " | ".join(e.text for e in v if isinstance(e, Notice)) for k, v in runs.items()}
    assert "sampler UniPC (order 2, bh2, flow prediction), from scheduler/scheduler_config.json " \
           "(UniPCMultistepScheduler); 3 steps, shift 3 (the folder's scheduler says 5);" in notes["unipc"]
    assert "sampler Euler (flow matching)" in notes["euler"] and "folder's scheduler says" not in notes["euler"]
    frames = {k: np.stack([e.rgb for e in v if isinstance(e, Frame)]) for k, v in runs.items()}
    assert frames["unipc"].shape == frames["euler"].shape == (shot.frames, 64, 64, 3)
    assert not np.array_equal(frames["unipc"], frames["euler"])  # a different sampler really ran


@pytest.mark.slow
def test_renders_on_a_cpu_only_ray_cluster(wan_folder, tmp_path):
    """wan-mlx declares the `apple` device class, so Ray is asked for CPU slots, never a GPU."""
    pytest.importorskip("ray")
    script = tmp_path / "two.json"
    script.write_text(json.dumps(SCRIPT))
    out = tmp_path / "out"
    done = _cli("render", str(script), "-o", str(out), "--backend", "wan-mlx", "--model", str(wan_folder),
                "--steps", "2", "--cluster", "local", timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["settings"]["cluster"] == "local" and manifest["settings"]["options"]["steps"] == 2
    assert [s["shot_id"] for s in manifest["shots"]] == ["s01", "s02"]
    assert all((out / s["files"]["shot"]).is_file() for s in manifest["shots"])


def _count_transformer_calls(backend) -> list[int]:
    """Wrap the loaded MLX transformer so each forward pass is counted."""
    calls = [0]
    inner = backend.parts["transformer"]

    def counted(*args, **kwargs):
        calls[0] += 1
        return inner(*args, **kwargs)

    backend.parts["transformer"] = counted
    return calls


def test_speed_fast_runs_the_transformer_on_fewer_steps(wan_folder, tmp_path):
    from daotai.render.registry import create_backend
    from daotai.render.speed import computed_steps, levers_for

    plan, _ = _plan(tmp_path)
    shot = plan.shots[0]
    runs = {}
    for speed in ("exact", "fast"):
        backend = create_backend("wan-mlx", {"model": str(wan_folder), "steps": 10, "guidance": 1.0, "speed": speed})
        try:
            _render(backend, plan, shot)  # loads the models
            calls = _count_transformer_calls(backend)
            events = _render(backend, plan, shot)
            runs[speed] = (calls[0], [e.text for e in events if isinstance(e, Notice)])
        finally:
            backend.close()
    expected = sum(computed_steps(10, levers_for("fast", "mps")))
    assert runs["exact"][0] == 10 and runs["fast"][0] == expected < 10  # guidance 1: one pass per computed step
    assert any(f"runs on {expected} of 10 steps" in text for text in runs["fast"][1])


def test_adaptive_goes_lean_after_a_critical_shot(wan_folder, tmp_path):
    from daotai.render.spec import BackendEnv
    from daotai.render.wan_mlx import WanMLXBackend

    calls = []

    def sampler(runtime):
        calls.append(runtime)
        return {"memory_pressure": "critical"}  # as macOS reports it under pressure

    plan, _ = _plan(tmp_path)
    backend = WanMLXBackend(model=str(wan_folder), steps=2, adaptive=True, env=BackendEnv(health_sampler=sampler))
    try:
        first = [e.text for e in _render(backend, plan, plan.shots[0]) if isinstance(e, Notice)]
        assert "memory tier resident" in first and backend.parts["text_encoder"] is not None
        assert any("system memory pressure critical" in t and "next shot runs at memory tier lean" in t for t in first)
        second = [e.text for e in _render(backend, plan, plan.shots[1]) if isinstance(e, Notice)]
        assert any("memory tier resident -> lean" in t for t in second)
        assert backend.parts["text_encoder"] is None  # freed once the prompts were embedded
        third = [e for e in _render(backend, plan, plan.shots[0]) if isinstance(e, Frame)]
        assert len(third) == plan.shots[0].frames  # the encoder comes back for the next shot's prompts
    finally:
        backend.close()
    assert len(calls) == 6 and set(calls) == {None}  # mid-denoise and after decode, per shot


def test_mlx_refuses_torch_only_options(wan_folder):
    from daotai.errors import OptionError
    from daotai.render.registry import create_backend

    with pytest.raises(OptionError, match="options.device: 'cpu' is not an option of the wan-mlx backend"):
        create_backend("wan-mlx", {"model": str(wan_folder), "device": "cpu"})
