"""MiniMax-H3 (`--backend h3`) on the CPU with a tiny random modular pipeline (every component class).

The folder is built once (tests/builders.py: ``build_h3``) and loaded through daotai's checked
loader. torchvision has no CPU wheel for this torch here, so ``qwen3vl_without_torchvision``
stands in for the Qwen3-VL video processor's torchvision path (see its docstring); the CLI runs in
a subprocess that applies the same stand-in before calling daotai's own ``main``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
pytest.importorskip("transformers")

import builders  # noqa: E402
from daotai import catalog  # noqa: E402
from daotai.errors import BackendError, Cancelled, OptionError  # noqa: E402
from daotai.events import Audio, Frame, Notice, Progress  # noqa: E402
from daotai.plan.prompt import compose_h3_prompt, estimate_tokens, h3_prompt_for, h3_workflow  # noqa: E402
from daotai.plan.timing import frames_for, is_snapped, plan_segments, snap_frames  # noqa: E402
from daotai.render.base import RenderJob, RunContext  # noqa: E402

TESTS = Path(__file__).parent
STEPS = 3  # 3 sigma points: 2 transformer forwards per generation
REFERENCE_RGB = (200, 120, 40)
SCRIPT = {
    "title": "h3",
    "fps": 24,
    "size": [112, 64],
    "seed": 3,
    "scene": "office",
    "characters": [
        {"id": "lin", "appearance": "blue shirt", "reference_images": ["lin.png"]},
        {"id": "mara", "appearance": "glasses"},
    ],
    "shots": [
        # A camera move and a character with a look: ref2va, 3 s generated at 5 s and trimmed.
        {"shot_id": "s1", "duration": 3, "camera": {"type": "dolly", "motion": [0, 0, -0.5]}, "subject": "lin",
         "dialogue": [{"character": "lin", "line": "Morning."}], "sound": "rain on the window"},
        # Static, no looks: t2va.
        {"shot_id": "s2", "duration": 2, "characters": ["mara"]},
        # Longer than one generation: t2va, then a segment that continues from its last frame (fl2va).
        {"shot_id": "s3", "duration": 16, "characters": ["mara"]},
    ],
}


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch) -> Path:
    """Each test records licence acceptances in its own config folder, never the user's."""
    folder = tmp_path / "config"
    monkeypatch.setenv("DAOTAI_CONFIG_DIR", str(folder))
    return folder


@pytest.fixture()
def script(tmp_path) -> Path:
    from PIL import Image

    Image.new("RGB", (48, 64), REFERENCE_RGB).save(tmp_path / "lin.png")
    path = tmp_path / "h3.json"
    path.write_text(json.dumps(SCRIPT))
    return path


def plan_of(script: Path):
    from daotai.plan.planner import plan_script
    from daotai.script.load import load_script

    return plan_script(load_script(script))


def backend_for(model: Path, root: Path | None = None, **options):
    from daotai.render.h3 import H3Backend
    from daotai.render.spec import BackendEnv

    options = {"model": str(model), "device": "cpu", "steps": STEPS, "accept_licence": True, **options}
    return H3Backend(env=BackendEnv(reference_root=root), **options)


def events_of(backend, plan, shot, ctx=None) -> list:
    return list(backend.render(RenderJob(plan, shot, controls=False), ctx or RunContext()))


@pytest.fixture()
def recorded(monkeypatch) -> list[dict]:
    """Every MiniMax-H3 pipeline call's inputs (and its video as uint8 frames), in call order."""
    from diffusers.modular_pipelines import MiniMaxH3ModularPipeline

    from daotai.render.neural.retime import to_uint8

    calls: list[dict] = []
    original = MiniMaxH3ModularPipeline.__call__

    def recording_call(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        calls.append({**kwargs, "video_out": to_uint8(out["videos"]), "audio_out": out["audio"].clone()})
        return out

    monkeypatch.setattr(MiniMaxH3ModularPipeline, "__call__", recording_call)
    return calls


# ------------------------------------------------------------------ pure rules


def test_frames_snap_to_17n_plus_5_and_long_shots_split_into_segments():
    assert snap_frames(120, 17, 5) == 124 and snap_frames(1, 17, 5) == 22 and snap_frames(124, 17, 5) == 124
    assert is_snapped(124, 17, 5) and not is_snapped(120, 17, 5)
    assert snap_frames(82, 4) == 85  # the 4k+1 rule is unchanged (offset defaults to 1)
    snap = catalog.family("h3").snap
    assert (snap.frame_step, snap.frame_offset, snap.native_fps) == (17, 5, 24.0)
    assert "h3" not in catalog.snap_rules()  # plans list previz, wan, ltx as before
    for seconds in (0.5, 3, 5, 5.2, 14.9, 15.2, 16, 31, 120):
        segments = plan_segments(seconds, 24.0, 17, 5, 5.0, 15.0)
        assert sum(s.keep for s in segments) == frames_for(seconds, 24.0)
        for segment in segments:
            assert is_snapped(segment.frames, 17, 5) and 5.0 <= segment.frames / 24 <= 15.0
            assert segment.frames >= segment.keep + (1 if segment.index else 0)  # later ones remake the shared frame
        assert [s.start for s in segments] == [sum(s.keep for s in segments[:i]) for i in range(len(segments))]
    assert [(s.frames, s.keep) for s in plan_segments(3, 24.0, 17, 5, 5.0, 15.0)] == [(124, 72)]
    assert len(plan_segments(16, 24.0, 17, 5, 5.0, 15.0)) == 2


def test_workflow_choice_and_labelled_prompt(script):
    plan = plan_of(script)
    s1, s2, s3 = plan.shots
    assert h3_workflow(plan, s1) == ("ref2va", "the camera moves (dolly) and lin has reference images")
    assert h3_workflow(plan, s2)[0] == "t2va" and h3_workflow(plan, s3)[0] == "t2va"
    assert h3_workflow(plan, s2, "fl2va") == ("fl2va", "as asked (workflow option)")
    prompt = h3_prompt_for(plan, s1)
    assert prompt.startswith("<Picture 1> shows lin") and "<Picture 2> is the colour of mara's costume" in prompt
    assert "<Video 1> is a rough previz of this very shot" in prompt
    assert "of lin (<Picture 1>; blue shirt)" in prompt and "dollies in" in prompt  # framing and move in film words
    assert 'lin says: "Morning."' in prompt and "Sound: rain on the window." in prompt
    assert "<Picture" not in h3_prompt_for(plan, s2)  # t2va: no references, no labels
    long = compose_h3_prompt(plan, s1.model_copy(update={"prompt": "word " * 2000}), "ref2va", (("lin", True),),
                             video=True)
    budget = catalog.family("h3").prompt
    assert estimate_tokens(long, budget) <= budget.max_tokens and long.startswith("<Picture 1> shows lin")


def test_options_refuse_what_h3_does_not_take():
    from daotai.render.registry import spec_for

    spec = spec_for("h3")
    assert spec.family == "h3" and spec.default_model == "minimax-h3"
    for bad in ({"guidance": 5}, {"max_sequence_length": 64}, {"speed": "turbo"}, {"workflow": "i2v"},
                {"lora": "missing.safetensors"}, {"weights": "int4"}, {"lora_scale": 9}, {"steps": 1}):
        with pytest.raises(OptionError):
            spec.validate_options(bad)
    assert spec.validate_options({"workflow": "fl2va", "accept_licence": "true"}).workflow == "fl2va"


# ------------------------------------------------------------------ rendering


@pytest.mark.slow
def test_one_script_renders_all_three_workflows_through_the_command_line(tiny_h3, script, tmp_path, config_dir):
    out = tmp_path / "out"
    code = ("import sys; sys.path.insert(0, sys.argv.pop(1)); import builders; builders.qwen3vl_without_torchvision(); "
            "from daotai.cli import main; sys.argv[0] = 'daotai'; main()")
    done = subprocess.run(
        [sys.executable, "-c", code, str(TESTS), "render", str(script), "--backend", "h3", "-O", f"model={tiny_h3}",
         "--device", "cpu", "--steps", str(STEPS), "-O", "accept_licence=true", "-o", str(out)],
        capture_output=True, text=True, timeout=600, env={**os.environ, "DAOTAI_DEBUG": ""},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    from daotai.encode.read import probe

    plan = plan_of(script)
    for shot in plan.shots:
        info = probe(out / "shots" / f"{shot.shot_id}.mp4")
        assert (info.width, info.height, info.frames) == (112, 64, shot.frames)
    manifest = json.loads((out / "manifest.json").read_text())
    notices = {s["shot_id"]: "\n".join(s["notices"]) for s in manifest["shots"]}
    assert "workflow ref2va (the camera moves (dolly) and lin has reference images)" in notices["s1"]
    assert ("ref2va references: <Picture 1> lin (" in notices["s1"] and "<Picture 2> mara (colour swatch #"
            in notices["s1"] and "<Video 1> previz of s1 (72 frames at 24 fps)" in notices["s1"])
    assert "generated 124 frames" in notices["s1"] and "trimmed to 72 (3 s)" in notices["s1"]
    assert "workflow t2va" in notices["s2"] and "trimmed to 48 (2 s)" in notices["s2"]
    assert "2 segments of 209 frames" in notices["s3"]
    assert "segment 2/2 fl2va references: <Picture 1> first frame: the previous segment's last frame" in notices["s3"]
    assert all("licence: MiniMax H3 Community License accepted" in n for n in notices.values())
    assert manifest["settings"]["options"]["accept_licence"] is True
    assert json.loads((config_dir / "licences.json").read_text())["minimax-h3"]["how"] == "-O accept_licence=true"


def test_previz_reference_pictures_and_their_order_reach_the_pipeline(tiny_h3, script, recorded):
    from diffusers.modular_pipelines.minimax_h3 import MiniMaxH3ImageReference, MiniMaxH3VideoReference

    from daotai.render.neural.retime import plan_to_native_indexes, resize_rgb
    from daotai.render.previz.backend import PrevizBackend

    plan = plan_of(script)
    shot = plan.shots[0]
    backend = backend_for(tiny_h3, script.parent)
    try:
        events = events_of(backend, plan, shot)
        canvas = backend.runner.canvas(plan)
    finally:
        backend.close()
    assert canvas == (56, 32)  # 112x64's aspect at the tiny folder's 32-pixel short edge
    assert len(recorded) == 1
    call = recorded[0]
    assert (call["num_frames"], call["width"], call["height"], call["num_inference_steps"]) == (124, 56, 32, STEPS)
    references = call["references"]
    assert [type(r) for r in references] == [MiniMaxH3ImageReference, MiniMaxH3ImageReference, MiniMaxH3VideoReference]
    lin, mara, video = references
    assert np.asarray(lin.image).shape == (64, 48, 3) and (np.asarray(lin.image) == REFERENCE_RGB).all()
    mara_rgb = [int(round(255 * c)) for c in next(c.colour for c in plan.characters if c.id == "mara")]
    assert (np.asarray(mara.image) == mara_rgb).all()  # no reference image: a swatch of its previz colour
    previz = PrevizBackend(labels=False)
    try:
        rgb = [e.rgb for e in previz.render(RenderJob(plan, shot, controls=False), RunContext()) if isinstance(e, Frame)]
    finally:
        previz.close()
    expected = np.stack([resize_rgb(rgb[i], 56, 32) for i in plan_to_native_indexes(shot.frames, 24.0, 72, 24.0)])
    assert video.fps == 24.0 and np.array_equal(video.frames, expected)  # the shot's previz, camera and blocking
    assert call["prompt"].startswith("<Picture 1> shows lin") and "<Video 1>" in call["prompt"]
    order = [e.text for e in events if isinstance(e, Notice) and "references:" in e.text]
    assert order and order[0].index("<Picture 1> lin") < order[0].index("<Picture 2> mara") < order[0].index("<Video 1>")
    denoise = [e.done for e in events if isinstance(e, Progress) and e.stage == "denoise"]
    assert denoise == [1, 2]


def test_short_shot_is_generated_at_five_seconds_and_trimmed_with_its_sound(tiny_h3, script, recorded):
    plan = plan_of(script)
    shot = plan.shots[1]  # 2 s, t2va
    backend = backend_for(tiny_h3)
    try:
        events = events_of(backend, plan, shot)
    finally:
        backend.close()
    assert [c["num_frames"] for c in recorded] == [124] and "references" not in recorded[0]
    frames = [e for e in events if isinstance(e, Frame)]
    assert [f.index for f in frames] == list(range(48)) and frames[0].rgb.shape == (64, 112, 3)
    native = recorded[0]["video_out"]  # (124, 32, 56, 3): the first 48 are shown
    from daotai.render.neural.retime import resize_rgb

    assert np.array_equal(frames[-1].rgb, resize_rgb(native[47], 112, 64))
    audio = [e for e in events if isinstance(e, Audio)]
    assert len(audio) == 1
    sound = audio[0]
    assert (sound.rate, sound.layout, sound.samples.dtype, sound.samples.shape) == (32000, "stereo", np.float32,
                                                                                    (64000, 2))
    generated = recorded[0]["audio_out"][0].numpy()  # (2, 165600): 124 frames of sound
    assert np.allclose(sound.samples.T, np.clip(generated[:, :64000], -1, 1))
    assert any(isinstance(e, Notice) and "generated 124 frames" in e.text and "trimmed to 48" in e.text for e in events)


def test_a_script_at_another_rate_is_retimed_by_interpolation_and_keeps_its_sound_length(tiny_h3, script, tmp_path):
    from daotai.plan.planner import plan_script
    from daotai.script.load import load_script

    other = tmp_path / "thirty.json"
    other.write_text(json.dumps({**SCRIPT, "fps": 30, "shots": [SCRIPT["shots"][1]]}))
    plan = plan_script(load_script(other))
    shot = plan.shots[0]  # 2 s: 60 frames at 30 fps from 48 at 24
    backend = backend_for(tiny_h3)
    try:
        events = events_of(backend, plan, shot)
    finally:
        backend.close()
    assert sum(isinstance(e, Frame) for e in events) == 60
    assert next(e for e in events if isinstance(e, Audio)).samples.shape == (64000, 2)
    assert any(isinstance(e, Notice) and "retimed from 48 frames at 24 fps to 60 at 30 fps by motion interpolation"
               in e.text for e in events)


def test_long_shot_segments_continue_from_the_previous_last_frame(tiny_h3, script, recorded):
    from daotai.render.neural.retime import resize_rgb

    plan = plan_of(script)
    shot = plan.shots[2]  # 16 s: 384 frames from two generations of 209
    backend = backend_for(tiny_h3)
    try:
        events = events_of(backend, plan, shot)
    finally:
        backend.close()
    first, second = recorded
    assert (first["num_frames"], second["num_frames"]) == (209, 209)
    assert "image" not in first and "references" not in first  # t2va
    keyframe = np.asarray(second["image"])  # fl2va's first frame
    assert np.array_equal(keyframe, first["video_out"][191])  # the first segment's last shown frame
    assert "continues seamlessly from <Picture 1>" in second["prompt"]
    frames = [e.rgb for e in events if isinstance(e, Frame)]
    assert len(frames) == 384
    # The join: frame 191 is the first segment's last, 192 the second segment's frame 1 (its frame 0,
    # the shared keyframe, is not shown twice).
    assert np.array_equal(frames[191], resize_rgb(first["video_out"][191], 112, 64))
    assert np.array_equal(frames[192], resize_rgb(second["video_out"][1], 112, 64))
    sound = next(e for e in events if isinstance(e, Audio)).samples
    assert sound.shape == (16 * 32000, 2)
    join = int(round(191 / 24 * 32000))  # the second segment's sound starts at the shared frame
    assert np.allclose(sound[:join, :].T, np.clip(first["audio_out"][0].numpy()[:, :join], -1, 1))
    fade = int(round(32000 / 24))
    assert np.allclose(sound[join + fade: join + fade + 100].T,
                       np.clip(second["audio_out"][0].numpy()[:, fade:fade + 100], -1, 1), atol=1e-6)


def test_forced_fl2va_continues_from_the_previous_shot(tiny_h3, script, recorded):
    plan = plan_of(script)
    backend = backend_for(tiny_h3, script.parent, workflow="fl2va")
    try:
        events_of(backend, plan, plan.shots[0])
        events = events_of(backend, plan, plan.shots[1])
    finally:
        backend.close()
    assert all("image" in c for c in recorded)
    # s2 starts on the last frame s1 showed (frame 71 of its 124).
    assert np.array_equal(np.asarray(recorded[1]["image"]), recorded[0]["video_out"][71])
    assert any(isinstance(e, Notice) and "the previous shot's last frame" in e.text for e in events)


def test_cancelling_between_steps_stops_the_generation(tiny_h3, script):
    plan = plan_of(script)
    backend = backend_for(tiny_h3, steps=6)
    ctx = RunContext()
    seen = []
    try:
        with pytest.raises(Cancelled, match="between denoising steps"):
            for event in backend.render(RenderJob(plan, plan.shots[1], controls=False), ctx):
                seen.append(event)
                if isinstance(event, Progress) and event.stage == "denoise" and event.done == 1:
                    ctx.cancel.set()
    finally:
        backend.close()
    assert not any(isinstance(e, (Frame, Audio)) for e in seen)


# ------------------------------------------------------------------ the loader and the licence


def damaged(source: Path, folder: Path, how: str) -> Path:
    """A copy of the tiny folder broken one way."""
    shutil.copytree(source, folder)
    if how == "missing partition":
        shutil.rmtree(folder / "transformer_ref")
    elif how == "truncated":
        weights = folder / "transformer_ref" / "diffusion_pytorch_model.safetensors"
        weights.write_bytes(weights.read_bytes()[:-100])
    elif how == "pickle":
        weights = folder / "transformer_ref" / "diffusion_pytorch_model.safetensors"
        weights.rename(weights.with_name("diffusion_pytorch_model.bin"))
    elif how == "custom code":
        (folder / "modular_config.json").write_text(json.dumps({"auto_map": {"ModularPipelineBlocks": "x.Blocks"}}))
    return folder


@pytest.mark.parametrize(("how", "message"), [
    ("missing partition", "component 'transformer_ref' (MiniMaxH3Transformer3DModel) is missing; the shots need the "
                          "fl2va, ref2va, t2va workflow"),
    ("truncated", "truncated or padded safetensors file"),
    ("pickle", "pickle weights are refused"),
    ("custom code", "carries its own pipeline code"),
])
def test_a_damaged_folder_is_refused_before_anything_loads(tiny_h3, script, tmp_path, monkeypatch, how, message):
    from daotai.runtime import model_loading

    folder = damaged(tiny_h3, tmp_path / "broken", how)
    loads = []
    monkeypatch.setattr(model_loading, "load_components", lambda *a, **k: loads.append(a) or [])
    plan = plan_of(script)
    backend = backend_for(folder, script.parent)
    try:
        with pytest.raises(BackendError, match=message.replace("(", r"\(").replace(")", r"\)")):
            events_of(backend, plan, plan.shots[0])
    finally:
        backend.close()
    assert loads == [] and backend.runner.pipe is None


def test_a_folder_pulled_for_one_workflow_renders_that_workflow(tiny_h3, script, tmp_path):
    folder = damaged(tiny_h3, tmp_path / "t2va-only", "missing partition")
    plan = plan_of(script)
    backend = backend_for(folder)
    try:
        events = events_of(backend, plan.model_copy(update={"shots": (plan.shots[1],)}), plan.shots[1])
    finally:
        backend.close()
    assert sum(isinstance(e, Frame) for e in events) == plan.shots[1].frames


def test_licence_gate_refuses_then_records_acceptance(tiny_h3, script, config_dir):
    from daotai.render.h3 import H3Backend

    with pytest.raises(OptionError) as refused:
        H3Backend(model=str(tiny_h3), device="cpu")
    text = str(refused.value)
    assert "options.accept_licence" in text and "MiniMax H3 Community License" in text
    assert "revenue threshold" in text and "train other models" in text and "-O accept_licence=true" in text
    assert not (config_dir / "licences.json").exists()

    accepted = H3Backend(model=str(tiny_h3), device="cpu", accept_licence=True)
    assert accepted.licence.startswith("licence: MiniMax H3 Community License accepted now")
    record = json.loads((config_dir / "licences.json").read_text())["minimax-h3"]
    assert record["licence"] == "MiniMax H3 Community License" and record["accepted_at"]
    later = H3Backend(model=str(tiny_h3), device="cpu")  # recorded: no option needed any more
    assert f"accepted {record['accepted_at']} (-O accept_licence=true)" in later.licence

    done = subprocess.run([sys.executable, "-m", "daotai.cli", "render", str(script), "--backend", "h3",
                           "-O", f"model={tiny_h3}", "--device", "cpu", "-o", str(config_dir.parent / "out")],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "DAOTAI_CONFIG_DIR": str(config_dir.parent / "elsewhere")})
    assert done.returncode == 2 and "revenue threshold" in done.stderr


# ------------------------------------------------------------------ memory


class _Runtime:
    def __init__(self, gib: float, kind: str = "cuda"):
        self.kind, self.device, self.memory_bytes = kind, kind, int(gib * 1024**3)


@pytest.mark.parametrize(("gib", "tier", "released"), [
    (139, "none", True),  # one H200: everything but the conditioner resident while denoising
    (79, "model", False),  # an 80 GB card: one component at a time
    (44, "group", False),
    (22, "group", False),
    (14, "sequential", False),
])
def test_memory_planner_picks_a_tier_for_the_released_model(gib, tier, released):
    from daotai.plan.timing import snap_frames as snap
    from daotai.render.h3_options import H3Options
    from daotai.render.h3_runner import H3Runner
    from daotai.render.neural.request import NativeRequest

    runner = H3Runner(H3Options(), "minimax-h3")
    runner.runtime, runner.planned_workflows = _Runtime(gib), {"t2va"}
    chosen = runner._tier_for(NativeRequest(1344, 768, snap(120, 17, 5), 24.0, "", "", 0))
    assert (chosen, runner.release_conditioner) == (tier, released)
    assert "GiB peak estimated" in runner.tier_reason


@pytest.mark.parametrize(("speed", "runs_fp8", "gib", "tier"), [
    ("fast", True, 79, "none"),  # an 80 GB card: FP8 block linears make the partition fit, conditioner released
    ("fast", False, 79, "model"),  # a card without FP8 tensor cores keeps bf16 linears
    ("exact", True, 79, "model"),
    ("fast", True, 44, "group"),  # offloaded: the linears stay bf16, so FP8 counts for nothing
])
def test_the_planner_counts_fast_modes_fp8_linears_only_where_they_apply(monkeypatch, speed, runs_fp8, gib, tier):
    import daotai.render.fp8 as fp8
    from daotai.render.h3_options import H3Options
    from daotai.render.h3_runner import H3Runner
    from daotai.render.neural.request import NativeRequest

    monkeypatch.setattr(fp8, "fp8_supported", lambda device: runs_fp8)  # the card's FP8, as the levers read it
    runner = H3Runner(H3Options(speed=speed), "minimax-h3")
    runner.runtime, runner.planned_workflows = _Runtime(gib), {"t2va"}
    assert runner._tier_for(NativeRequest(1344, 768, 124, 24.0, "", "", 0)) == tier
    assert runner.release_conditioner == (tier == "none")


def test_on_cuda_the_planner_counts_the_video_vae_at_bfloat16_but_for_its_float32_parts():
    import re
    from dataclasses import replace

    from daotai import catalog
    from daotai.render.h3_options import H3Options
    from daotai.render.h3_runner import H3Runner
    from daotai.render.neural.request import NativeRequest
    from daotai.runtime.memory import GIB, estimate

    runner = H3Runner(H3Options(), "minimax-h3")
    runner.runtime, runner.planned_workflows = _Runtime(139), {"t2va"}
    assert runner._tier_for(NativeRequest(1344, 768, 124, 24.0, "", "", 0)) == "none"
    planned = float(re.search(r"~([0-9.]+) GiB", runner.tier_reason).group(1))
    h3 = replace(catalog.footprint("minimax-h3"), releasable_text_encoder=True)
    float32 = estimate(h3, 1344, 768, 124).peak_bytes / GIB  # the device rule's float32 VAE
    assert float32 - planned == pytest.approx(2.75e9 * (4 - catalog.H3_CUDA_VAE_WEIGHT_BYTES) / GIB, abs=0.06)
    assert 2.0 < catalog.H3_CUDA_VAE_WEIGHT_BYTES < 2.5


def test_one_byte_linears_are_the_counted_share_of_the_partition_not_all_of_it():
    """int8 rows and FP8 round the blocks' linears (20.04 of MiniMax-H3's 33.12 B); the AdaLN modulation stays."""
    from daotai import catalog

    h3 = catalog.footprint("minimax-h3")
    assert h3.with_one_byte_linears().transformer_b == pytest.approx(33.1 * (1 - 0.605 / 2))


def test_memory_planner_refuses_with_what_would_fit():
    from daotai.render.h3_options import H3Options
    from daotai.render.h3_runner import H3Runner
    from daotai.render.neural.request import NativeRequest

    runner = H3Runner(H3Options(), "minimax-h3")
    runner.runtime, runner.planned_workflows = _Runtime(6), {"t2va"}
    with pytest.raises(BackendError, match="minimax-h3 at 1344x768, 124 frames needs"):
        runner._tier_for(NativeRequest(1344, 768, 124, 24.0, "", "", 0))


def test_prompts_command_knows_the_h3_budget(script):
    done = subprocess.run([sys.executable, "-m", "daotai.cli", "prompts", str(script), "--model", "h3", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "s1" in done.stdout
    assert "<Picture 1>" in done.stdout or "Static camera" in done.stdout  # H3's own labelled prompt


def voice_wav(path: Path, seconds: float = 1.5, rate: int = 16000) -> Path:
    """A mono 16-bit WAV of a 220 Hz tone (a stand-in voice recording)."""
    import wave

    t = np.arange(int(seconds * rate)) / rate
    pcm = (0.3 * np.sin(2 * np.pi * 220 * t) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(pcm.tobytes())
    return path


def test_a_speakers_voice_recording_is_an_audio_reference_named_in_the_prompt(tiny_h3, tmp_path, recorded):
    from diffusers.modular_pipelines.minimax_h3 import MiniMaxH3AudioReference

    from daotai.plan.prompt import h3_prompt_for

    voice_wav(tmp_path / "lin_voice.wav")
    data = json.loads(json.dumps(SCRIPT))
    data["characters"][0]["voice"] = "lin_voice.wav"
    data["shots"] = data["shots"][:1]
    path = tmp_path / "voices.json"
    path.write_text(json.dumps(data))
    (tmp_path / "lin.png").write_bytes(builders.png_bytes(48, 64, REFERENCE_RGB))
    plan = plan_of(path)
    assert next(c for c in plan.characters if c.id == "lin").voice == "lin_voice.wav"
    backend = backend_for(tiny_h3, tmp_path)
    try:
        events = events_of(backend, plan, plan.shots[0])
    finally:
        backend.close()
    references = recorded[0]["references"]
    voice = references[-1]
    # Resampled to the audio VAE's rate by FFmpeg (the tiny VAE keeps the released 32 kHz), mono kept.
    assert isinstance(voice, MiniMaxH3AudioReference) and voice.sample_rate == 32000
    assert voice.audio.shape[0] == 1 and abs(voice.audio.shape[1] - 48000) <= 64
    spectrum = np.abs(np.fft.rfft(voice.audio[0].numpy()))
    assert abs(np.argmax(spectrum) * 32000 / voice.audio.shape[1] - 220) < 2  # still the 220 Hz voice
    prompt = recorded[0]["prompt"]
    assert "<Audio 1> is the voice of lin" in prompt and 'lin says in the voice of <Audio 1>: "Morning."' in prompt
    assert prompt == h3_prompt_for(plan, plan.shots[0])  # `daotai prompts` shows what is sent
    order = next(e.text for e in events if isinstance(e, Notice) and "references:" in e.text)
    assert "<Audio 1> voice of lin (1.5 s at 32000 Hz)" in order
    # A script without a voice plans exactly as before (the field is left out of the plan).
    assert "voice" not in plan_of(tmp_path / "voices.json").model_dump(mode="json")["characters"][1]


def test_a_missing_voice_recording_is_named_by_its_field(tiny_h3, tmp_path):
    data = json.loads(json.dumps(SCRIPT))
    data["characters"][0]["voice"] = "nowhere.wav"
    data["shots"] = data["shots"][:1]
    path = tmp_path / "voices.json"
    path.write_text(json.dumps(data))
    (tmp_path / "lin.png").write_bytes(builders.png_bytes(48, 64, REFERENCE_RGB))
    plan = plan_of(path)
    backend = backend_for(tiny_h3, tmp_path)
    try:
        with pytest.raises(BackendError, match=r"characters\.lin\.voice: 'nowhere.wav' is not a file"):
            events_of(backend, plan, plan.shots[0])
    finally:
        backend.close()


def test_on_apple_silicon_every_component_counts_and_int8_is_offered():
    from daotai.mlx.memory import working_set_bytes
    from daotai.render.h3_options import H3Options
    from daotai.render.h3_runner import H3Runner
    from daotai.render.neural.request import NativeRequest

    request = NativeRequest(1344, 768, 124, 24.0, "", "", 0)

    def runner(gb: int, weights: str | None = None) -> H3Runner:
        made = H3Runner(H3Options(weights=weights), "minimax-h3")
        made.runtime, made.planned_workflows = _Runtime(working_set_bytes(gb) / 1024**3, "mps"), {"t2va"}
        return made

    # A 192 GB Mac: the conditioner cannot be "released" into the same pool, so bf16 does not fit...
    with pytest.raises(BackendError, match=r"unified memory .*offloading frees nothing.*weights=int8 it needs ~128 GiB"):
        runner(192)._tier_for(request)
    # ...int8 rows do, with everything resident; a 256 GB Mac holds bf16.
    small = runner(192, "int8")
    assert small._tier_for(request) == "none" and not small.release_conditioner
    assert "one pool" in small.tier_reason
    assert runner(256)._tier_for(request) == "none"
