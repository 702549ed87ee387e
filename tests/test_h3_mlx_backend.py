"""`--backend h3-mlx` on Linux (mlx[cpu]) with the tiny random MiniMax-H3 folder of tests/builders.py.

The conditioning runs through diffusers' own blocks in torch, so both backends start from the
same noise at the same seed: the MLX denoising and decoding are checked against the `h3`
backend's whole pipeline on the CPU. The conversion to 4/8-bit and the refusals (missing
weights, wrong bit width, too little memory, a moved source) are checked on the same folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("diffusers")
pytest.importorskip("transformers")
pytest.importorskip("mlx.core")

from daotai.errors import BackendError, OptionError  # noqa: E402
from daotai.events import Audio, Frame, Glimpse, Notice  # noqa: E402
from daotai.render.base import RenderJob, RunContext  # noqa: E402

TESTS = Path(__file__).parent
STEPS = 3  # 3 sigma points: 2 transformer forwards per generation
# Measured here (Linux x86_64 CPU, float32, every shot of SCRIPT): frames 96.2-96.8 dB against the h3
# backend's (at most one uint8 level apart), sound rel. L2 1.6e-7.
PARITY_PSNR_DB = 60.0
PARITY_AUDIO_REL = 1e-5
SCRIPT = {
    "title": "h3 mlx",
    "fps": 24,
    "size": [112, 64],
    "seed": 3,
    "scene": "office",
    "characters": [
        {"id": "lin", "appearance": "blue shirt", "reference_images": ["lin.png"]},
        {"id": "mara", "appearance": "glasses"},
    ],
    "shots": [
        # a camera move and a character with a look: ref2va (previz video and pictures as references)
        {"shot_id": "s1", "duration": 3, "camera": {"type": "dolly", "motion": [0, 0, -0.5]}, "subject": "lin",
         "dialogue": [{"character": "lin", "line": "Morning."}], "sound": "rain on the window"},
        # static, no looks: t2va
        {"shot_id": "s2", "duration": 2, "characters": ["mara"]},
        # longer than one generation (with segment_seconds=5.5): t2va, then a segment continued from its
        # last frame (fl2va)
        {"shot_id": "s3", "duration": 6, "characters": ["mara"]},
    ],
}


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch) -> Path:
    """Licence acceptances go to a folder of the test's own."""
    folder = tmp_path / "config"
    monkeypatch.setenv("DAOTAI_CONFIG_DIR", str(folder))
    return folder


def write_script(folder: Path, shots: tuple[str, ...]) -> Path:
    from PIL import Image

    Image.new("RGB", (48, 64), (200, 120, 40)).save(folder / "lin.png")
    path = folder / "h3mlx.json"
    path.write_text(json.dumps({**SCRIPT, "shots": [s for s in SCRIPT["shots"] if s["shot_id"] in shots]}))
    return path


def plan_of(script: Path):
    from daotai.plan.planner import plan_script
    from daotai.script.load import load_script

    return plan_script(load_script(script))


def render(backend, plan, shot_id: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(frames (F, H, W, 3) uint8, sound (N, C), notices) of one shot."""
    shot = next(s for s in plan.shots if s.shot_id == shot_id)
    frames, sound, notices = [], None, []
    for event in backend.render(RenderJob(plan, shot, controls=False), RunContext()):
        if isinstance(event, Frame):
            frames.append(event.rgb)
        elif isinstance(event, Audio):
            sound = event.samples
        elif isinstance(event, Notice):
            notices.append(event.text)
    assert sound is not None and len(frames) == shot.frames
    return np.stack(frames), sound, notices


def mlx_backend(model: Path, root: Path, **options):
    from daotai.render.h3_mlx import H3MLXBackend
    from daotai.render.spec import BackendEnv

    return H3MLXBackend(env=BackendEnv(reference_root=root),
                        **{"model": str(model), "steps": STEPS, "accept_licence": True, **options})


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


def rel_l2(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a.astype(np.float64) - b) / np.linalg.norm(b.astype(np.float64)))


# ------------------------------------------------------------------ registration and options


def test_h3_mlx_is_a_backend_of_the_h3_family_with_its_own_options():
    from daotai.render.registry import backend_names, spec_for

    assert "h3-mlx" in backend_names()
    spec = spec_for("h3-mlx")
    assert (spec.family, spec.default_model, spec.device_class) == ("h3", "minimax-h3", "apple")
    for bad in ({"guidance": 5}, {"shift": 0}, {"device": "cuda"}, {"offload": "model"}, {"steps": 1},
                {"workflow": "i2v"}, {"segment_seconds": 30}, {"memory_gb": 0}, {"turbo": "no-such-turbo"},
                {"turbo_alpha": 9}):
        with pytest.raises(OptionError):
            spec.validate_options(bad)
    assert spec.validate_options({"workflow": "fl2va", "memory_gb": 96}).memory_gb == 96
    assert spec.validate_options({"shift": 5}).shift == 5.0  # the video schedule's, as -O shift= on h3


# ------------------------------------------------------------------ end to end


@pytest.mark.slow
def test_cli_render_writes_video_with_stereo_sound_and_its_checks(tiny_h3, tmp_path):
    script = write_script(tmp_path, ("s2",))
    out = tmp_path / "out"
    code = ("import sys; sys.path.insert(0, sys.argv.pop(1)); import builders; builders.qwen3vl_without_torchvision(); "
            "from daotai.cli import main; sys.argv[0] = 'daotai'; main()")
    done = subprocess.run(
        [sys.executable, "-c", code, str(TESTS), "render", str(script), "--backend", "h3-mlx", "-O",
         f"model={tiny_h3}", "--steps", str(STEPS), "-O", "accept_licence=true", "-o", str(out)],
        capture_output=True, text=True, timeout=600, env={**os.environ, "DAOTAI_DEBUG": ""},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    from daotai.encode.read import probe

    info = probe(out / "shots" / "s2.mp4")
    assert (info.width, info.height, info.frames) == (112, 64, 48)
    manifest = json.loads((out / "manifest.json").read_text())
    notices = "\n".join(manifest["shots"][0]["notices"])
    assert "h3-mlx: conditioner and VAE encoders on cpu" in notices and "transformer from h3 in MLX (float32)" in notices
    assert "workflow t2va" in notices and "sound: 2 channels at 32000 Hz, 64000 samples" in notices
    qc = json.loads((out / "qc.json").read_text())
    shot = qc["shots"][0]
    assert shot["audio"]["present"] and shot["audio"]["channels"] == 2 and shot["audio"]["ok"]
    assert shot["audio"]["duration_s"] == pytest.approx(2.0, abs=0.03) and not shot["audio"]["clipping_runs"]
    assert qc["sequence"]["audio"]["ok"] and qc["sequence"]["audio"]["channels"] == 2
    # A random model draws noise, not a picture: the checks that judge picture content (camera motion and the
    # camera path read from the frames, encode fidelity on noise) cannot pass on it; every other check must.
    verdicts = {v["check"]: v["ok"] for v in shot["verdicts"]}
    assert {name for name, ok in verdicts.items() if not ok} <= {"camera", "camera_path", "fidelity"}, verdicts
    assert verdicts["judder"] and verdicts["subject"]


@pytest.mark.slow
def test_a_shot_shows_itself_forming_once_the_model_has_decoded_one(tiny_h3, tmp_path, monkeypatch):
    """The server's live view: a sketch of the shot from its latents at each step, as the h3 backend gives."""
    monkeypatch.setenv("DAOTAI_CACHE_DIR", str(tmp_path / "cache"))  # where the model's colour map is kept
    monkeypatch.delenv("DAOTAI_NO_CACHE", raising=False)
    plan = plan_of(write_script(tmp_path, ("s2",)))
    shot = plan.shots[0]

    def rendered(backend, ctx: RunContext) -> tuple[np.ndarray, list[Glimpse]]:
        events = list(backend.render(RenderJob(plan, shot, controls=False), ctx))
        return np.stack([e.rgb for e in events if isinstance(e, Frame)]), [e for e in events if isinstance(e, Glimpse)]

    backend = mlx_backend(tiny_h3, tmp_path)
    plain, none = rendered(backend, RunContext())
    assert none == [] and not (tmp_path / "cache").exists()  # the command line asks for no picture and keeps none
    first, unseen = rendered(backend, RunContext(glimpse_every_s=0.0))
    assert unseen == []  # nothing known yet of how this model's latents look: its frames show once decoded
    second, glimpses = rendered(backend, RunContext(glimpse_every_s=0.0))
    assert [(g.step, g.steps) for g in glimpses] == [(1, STEPS - 1), (2, STEPS - 1)]  # every forward
    for glimpse in glimpses:
        assert glimpse.rgb.dtype == np.uint8 and glimpse.rgb.shape[1] == 320 and 0 < glimpse.index < shot.frames
    assert np.array_equal(plain, first) and np.array_equal(plain, second)  # the picture costs the frames nothing
    # the last step's sketch is the decoded middle frame seen through the fitted map: close to it
    middle = cv2_resize(second[glimpses[-1].index], glimpses[-1].rgb.shape[1::-1])
    assert psnr(glimpses[-1].rgb, middle) > psnr(np.full_like(middle, middle.mean()), middle)
    backend.close()
    again, recalled = rendered(mlx_backend(tiny_h3, tmp_path), RunContext(glimpse_every_s=0.0))
    assert len(recalled) == STEPS - 1 and np.array_equal(again, plain)  # loaded again: the kept map shows the first shot


def cv2_resize(rgb: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    import cv2

    return cv2.resize(rgb, size, interpolation=cv2.INTER_AREA)


@pytest.mark.slow
def test_every_workflow_matches_the_h3_backend_at_the_same_seed(tiny_h3, tmp_path):
    from daotai.render.h3 import H3Backend
    from daotai.render.spec import BackendEnv

    script = write_script(tmp_path, ("s1", "s3"))
    plan = plan_of(script)
    reference = H3Backend(env=BackendEnv(reference_root=tmp_path), model=str(tiny_h3), device="cpu", steps=STEPS,
                          accept_licence=True, segment_seconds=5.5)
    ported = mlx_backend(tiny_h3, tmp_path, segment_seconds=5.5)
    try:
        for shot_id, workflows in (("s1", ("ref2va",)), ("s3", ("t2va", "fl2va"))):
            want_frames, want_sound, _ = render(reference, plan, shot_id)
            frames, sound, notices = render(ported, plan, shot_id)
            assert all(any(f"{w} references" in n for n in notices) for w in workflows)
            assert shot_id != "s3" or any("2 segments of 124 frames" in n for n in notices)
            assert frames.shape == want_frames.shape and sound.shape == want_sound.shape
            assert psnr(frames, want_frames) >= PARITY_PSNR_DB, shot_id
            assert rel_l2(sound, want_sound) < PARITY_AUDIO_REL, shot_id
            assert np.abs(sound).max() > 0 and frames.std() > 1  # something was generated
    finally:
        reference.close()
        ported.close()


# ------------------------------------------------------------------ turbo


@pytest.mark.slow
def test_a_turbo_runs_its_schedule_and_weights_as_the_h3_backend_does_and_fits_a_quantised_model(tiny_h3, tmp_path):
    """-O turbo= on a Mac: the LoRA's steps, shift and alpha read from its file, its factors folded into the MLX
    weights (float, or quantised again); at the same seed the picture is the h3 backend's own."""
    pytest.importorskip("peft")
    from daotai.mlx.h3_convert import convert_h3
    from daotai.render.h3 import H3Backend
    from daotai.render.spec import BackendEnv
    from test_h3_turbo import turbo_file

    turbo = str(turbo_file(tmp_path / "turbo.safetensors", {"steps": "3", "shift": "5.0", "alpha": "0.5"}))
    plan = plan_of(write_script(tmp_path, ("s2",)))
    reference = H3Backend(env=BackendEnv(reference_root=tmp_path), model=str(tiny_h3), device="cpu",
                          accept_licence=True, turbo=turbo)
    try:
        want, want_sound, _ = render(reference, plan, "s2")
    finally:
        reference.close()
    frames, sound, notices = render(mlx_backend(tiny_h3, tmp_path, steps=None, turbo=turbo), plan, "s2")
    plain, _, _ = render(mlx_backend(tiny_h3, tmp_path, steps=4), plan, "s2")  # the same 3 forwards, no LoRA
    assert psnr(frames, want) >= PARITY_PSNR_DB and rel_l2(sound, want_sound) < PARITY_AUDIO_REL
    assert psnr(frames, plain) < PARITY_PSNR_DB - 10  # the LoRA and its shift changed the picture (45.7 dB here)
    assert "h3-mlx: transformer: turbo turbo.safetensors fused at alpha 0.5: 6 layers" in notices
    assert any("h3-mlx: turbo turbo.safetensors" in n and "steps 3 (file metadata)" in n for n in notices)
    # a bare file: steps and shift from the options instead (MLX takes -O shift= as the h3 backend does)
    bare = str(turbo_file(tmp_path / "bare.safetensors", {"alpha": "0.5"}))
    assert np.array_equal(render(mlx_backend(tiny_h3, tmp_path, steps=4, shift=5.0, turbo=bare), plan, "s2")[0], frames)
    quantised = convert_h3(tiny_h3, tmp_path / "h3-q8", bits=8, group_size=32)
    frames_q8, _, notices_q8 = render(mlx_backend(quantised, tmp_path, steps=None, turbo=turbo), plan, "s2")
    assert any("fused at alpha 0.5: 6 layers" in n for n in notices_q8)
    assert psnr(frames_q8, frames) >= 30.0  # 8-bit with the LoRA stays by the float one (as without, above)


def test_a_lora_folds_into_quantised_layers_and_leaves_the_others_bit_for_bit(tiny_h3, tmp_path):
    pytest.importorskip("peft")
    import mlx.core as mx
    import mlx.nn as nn

    from daotai.mlx.h3_convert import MANIFEST, convert_h3, load_converted_partition
    from daotai.mlx.h3_transformer import load_h3_transformer
    from daotai.render.neural.lora import h3_lora_state, resolve_lora
    from daotai.render.neural.lora_mlx import fuse_lora_mlx
    from test_h3_turbo import TARGETS, turbo_file

    lora = resolve_lora(str(turbo_file(tmp_path / "turbo.safetensors")))
    state, prefix = h3_lora_state(lora, "transformer")
    dest = convert_h3(tiny_h3, tmp_path / "h3-q8", bits=8, group_size=32)
    manifest = json.loads((dest / MANIFEST).read_text())
    before = dict(load_converted_partition(dest, "transformer", manifest).named_modules())
    model = load_converted_partition(dest, "transformer", manifest)
    assert fuse_lora_mlx(model, state, prefix, 0.5, lora.path.name) == 2 * len(TARGETS)
    base = dict(load_h3_transformer(tiny_h3 / "transformer").named_modules())  # float32, as published
    changed = 0
    for name, module in model.named_modules():
        if not isinstance(module, nn.QuantizedLinear):
            continue
        weight = np.array(mx.dequantize(module.weight, module.scales, module.biases, module.group_size,
                                        module.bits).astype(mx.float32))
        a_key = f"{prefix}.{name}.lora_A.weight"
        if a_key in state:
            delta = 0.5 * state[f"{prefix}.{name}.lora_B.weight"].numpy() @ state[a_key].numpy()
            step = float(np.abs(np.array(module.scales.astype(mx.float32))).max())  # one quantisation step
            # quantised at conversion, then again with the delta (each within half a step), in the scales' bfloat16
            assert np.abs(weight - (np.array(base[name].weight) + delta)).max() <= 2 * step < np.abs(delta).max(), name
            changed += 1
        else:
            old = before[name]
            assert all(mx.array_equal(getattr(module, k), getattr(old, k)).item()
                       for k in ("weight", "scales", "biases")), name
    assert changed == 2 * len(TARGETS)


def test_a_turbo_for_another_model_is_refused_on_mlx_naming_the_key_and_shapes(tiny_h3, tmp_path):
    pytest.importorskip("peft")
    from test_h3_turbo import turbo_file

    turbo = str(turbo_file(tmp_path / "wide.safetensors", {"steps": "3", "shift": "5"}, in_features=48))
    plan = plan_of(write_script(tmp_path, ("s2",)))
    with pytest.raises(BackendError, match=r"lora: wide\.safetensors: transformer\.transformer_blocks\.0\.attn\.to_q"
                                           r"\.lora_A\.weight has shape \[2, 48\], but layer .* is 32 -> 32"):
        render(mlx_backend(tiny_h3, tmp_path, steps=None, turbo=turbo), plan, "s2")


# ------------------------------------------------------------------ conversion


def test_conversion_writes_hashed_partitions_and_renders(tiny_h3, tmp_path):
    from daotai.files import sha256_file
    from daotai.mlx.h3_convert import MANIFEST, convert_h3, converted_bytes, h3_source

    dest = convert_h3(tiny_h3, tmp_path / "h3-q8", bits=8, group_size=32)
    manifest = json.loads((dest / MANIFEST).read_text())
    assert (manifest["bits"], manifest["group_size"], manifest["partitions"]) == (8, 32, ["transformer",
                                                                                        "transformer_ref"])
    assert all(manifest["quantized_layers"][p] for p in manifest["partitions"])
    for rel, digest in manifest["files"].items():
        assert sha256_file(dest / rel) == digest
    assert sorted(p.name for p in dest.iterdir()) == [MANIFEST, "transformer", "transformer_ref"]
    written = sum(p.stat().st_size for p in dest.rglob("*.safetensors"))
    assert written <= converted_bytes(tiny_h3, 8, 32) <= 1.5 * written  # an upper estimate, not a wild one
    assert h3_source(dest)[:2] == (tiny_h3.resolve(), dest.resolve())

    script = write_script(tmp_path, ("s2",))
    plan = plan_of(script)
    full, full_sound, _ = render(mlx_backend(tiny_h3, tmp_path), plan, "s2")
    frames, sound, notices = render(mlx_backend(dest, tmp_path), plan, "s2")
    assert any("(8-bit group 32)" in n for n in notices)
    assert psnr(frames, full) >= 30.0 and rel_l2(sound, full_sound) < 0.05  # 8-bit stays close to float32


def test_the_cli_converts_minimax_h3_and_refuses_a_wrong_bit_width(tiny_h3, tmp_path):
    def convert(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "daotai.cli", "models", "convert", str(tiny_h3), "--to", "mlx",
                               *args], capture_output=True, text=True, timeout=300)

    done = convert("--bits", "4", "--group-size", "32", "-o", str(tmp_path / "q4"))
    assert done.returncode == 0, done.stderr[-2000:]
    manifest = json.loads((tmp_path / "q4" / "mlx_manifest.json").read_text())
    assert (manifest["format"], manifest["bits"], manifest["group_size"]) == ("daotai-mlx-h3/1", 4, 32)
    refused = convert("--bits", "3", "-o", str(tmp_path / "q3"))
    assert refused.returncode != 0 and "bits" in refused.stderr + refused.stdout
    assert not (tmp_path / "q3").exists()


def test_a_failed_conversion_leaves_nothing_and_bad_settings_are_refused(tiny_h3, tmp_path, monkeypatch):
    import daotai.mlx.h3_transformer as h3_transformer
    from daotai.mlx.h3_convert import convert_h3

    with pytest.raises(BackendError, match="bits"):
        convert_h3(tiny_h3, tmp_path / "bad", bits=3)
    with pytest.raises(BackendError, match="group"):
        convert_h3(tiny_h3, tmp_path / "bad", bits=4, group_size=48)
    with pytest.raises(BackendError, match="not a MiniMax-H3 folder"):
        convert_h3(tmp_path, tmp_path / "bad", bits=4)
    calls = []

    def fail_second(model, path):
        calls.append(path)
        if len(calls) == 2:
            raise OSError("disk full")
        original(model, path)

    original = h3_transformer.save_h3_weights
    monkeypatch.setattr(h3_transformer, "save_h3_weights", fail_second)
    with pytest.raises(OSError, match="disk full"):
        convert_h3(tiny_h3, tmp_path / "out" / "h3-q4", bits=4, group_size=32)
    assert len(calls) == 2 and list((tmp_path / "out").iterdir()) == []  # no folder, no temp left behind


def test_free_space_is_checked_before_converting(tiny_h3, tmp_path):
    from daotai.mlx.h3_convert import converted_bytes
    from daotai.runtime.model_space import check_free_space

    need = converted_bytes(tiny_h3, 4, 64)
    with pytest.raises(BackendError, match=r"needs .* free in .* but .* is free"):
        check_free_space(tmp_path / "h3-q4", need, "models convert minimax-h3", free=lambda _: need // 2)


# ------------------------------------------------------------------ refusals before loading


def test_refusals_name_what_to_do(tiny_h3, tmp_path):
    import shutil

    from daotai.mlx.h3_convert import convert_h3

    script = write_script(tmp_path, ("s2",))
    plan = plan_of(script)
    # too little memory: refused before the conditioner or any partition loads, naming the rule and a way out
    backend = mlx_backend(tiny_h3, tmp_path, memory_gb=0.5)
    with pytest.raises(BackendError, match=r"needs ~\d+ GB but memory_gb=0.5; rule: peak <= working set; use "):
        render(backend, plan, "s2")
    assert backend.runner.pipe is None and not backend.runner.partitions
    # a folder that is not MiniMax-H3
    with pytest.raises(BackendError, match="pull it with: daotai models pull minimax-h3"):
        render(mlx_backend(tmp_path, tmp_path), plan, "s2")
    # the partition a workflow needs is missing from the folder
    partial = tmp_path / "partial"
    shutil.copytree(tiny_h3, partial, ignore=shutil.ignore_patterns("transformer"))
    with pytest.raises(BackendError, match="transformer.*the shots need the t2va workflow"):
        render(mlx_backend(partial, tmp_path), plan, "s2")
    # a converted folder without the partition the shot needs
    converted = convert_h3(tiny_h3, tmp_path / "conv", bits=4, group_size=32, partitions=("transformer_ref",))
    with pytest.raises(BackendError, match="converted without transformer, which the t2va workflow"):
        render(mlx_backend(converted, tmp_path), plan, "s2")
    # a converted folder whose source (conditioner, VAEs) moved away
    source = shutil.copytree(tiny_h3, tmp_path / "src")
    moved = convert_h3(source, tmp_path / "conv2", bits=4, group_size=32, partitions=("transformer",))
    source.rename(tmp_path / "elsewhere")
    with pytest.raises(BackendError, match="source folder .* is missing .* put it back there or convert again"):
        render(mlx_backend(moved, tmp_path), plan, "s2")
    # another model's conversion
    (tmp_path / "wan-conv").mkdir()
    (tmp_path / "wan-conv" / "mlx_manifest.json").write_text(json.dumps({"format": "daotai-mlx/1"}))
    with pytest.raises(BackendError, match="converted for another model"):
        render(mlx_backend(tmp_path / "wan-conv", tmp_path), plan, "s2")
