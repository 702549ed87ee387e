"""LTX-2 (`--backend ltx2`) on the CPU with a tiny random pipeline of every component class of the release.

The folder is built once (tests/builders.py: ``build_ltx2``, saved as an ``LTX2Pipeline``) and loaded
through daotai's checked loader as the condition pipeline. Its VAE compresses 32x in space and 8x in
time like the released one, so the 8k+1 frame and 32-pixel size rules are the model's own.
"""

from __future__ import annotations

import hashlib
import json
import os
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
from daotai.events import Audio, Frame, Glimpse, Notice, Progress  # noqa: E402
from daotai.render.base import RenderJob, RunContext  # noqa: E402

STEPS = 2
SCRIPT = {
    "title": "ltx2",
    "fps": 24,
    "size": [96, 64],
    "seed": 5,
    "scene": "office",
    "characters": [{"id": "lin", "appearance": "blue shirt"}, {"id": "mara", "appearance": "glasses"}],
    "shots": [
        {"shot_id": "s1", "duration": 1, "camera": {"type": "dolly", "motion": [0, 0, -0.5]}, "subject": "lin",
         "dialogue": [{"character": "lin", "line": "Morning."}], "sound": "rain on the window"},
        {"shot_id": "s2", "duration": 0.5, "characters": ["mara"], "sound": "a door closes"},
    ],
}
# Checks that judge what the picture shows: random weights paint noise that no camera move, motion smoothness or encode
# fidelity bound can be held to. Every other check (format, sound, sync, continuity) must pass.
PICTURE_CHECKS = {"camera", "camera_path", "judder", "fidelity"}


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch) -> Path:
    """Each test records licence acceptances in its own config folder, never the user's."""
    folder = tmp_path / "config"
    monkeypatch.setenv("DAOTAI_CONFIG_DIR", str(folder))
    return folder


@pytest.fixture()
def script(tmp_path) -> Path:
    path = tmp_path / "ltx2.json"
    path.write_text(json.dumps(SCRIPT))
    return path


def plan_of(script: Path, **changes):
    from daotai.plan.planner import plan_script
    from daotai.script.load import load_script

    if changes:
        data = {**json.loads(script.read_text()), **changes}
        script = script.with_name("changed.json")
        script.write_text(json.dumps(data))
    return plan_script(load_script(script))


def backend_for(model: Path, **options):
    from daotai.render.ltx2 import LTX2Backend

    return LTX2Backend(**{"model": str(model), "device": "cpu", "steps": STEPS, "accept_licence": True, **options})


def events_of(backend, plan, shot, ctx=None) -> list:
    return list(backend.render(RenderJob(plan, shot, controls=False), ctx or RunContext()))


@pytest.fixture()
def recorded(monkeypatch) -> list[dict]:
    """Every LTX-2 condition pipeline call's keyword arguments, in call order."""
    from diffusers import LTX2ConditionPipeline

    calls: list[dict] = []
    original = LTX2ConditionPipeline.__call__

    def recording_call(self, *args, **kwargs):
        calls.append(kwargs)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(LTX2ConditionPipeline, "__call__", recording_call)
    return calls


# ------------------------------------------------------------------ pure rules


def test_sizes_round_to_the_32_pixel_grid_and_a_frame_too_small_is_refused():
    from daotai.render.ltx2 import generation_size

    assert generation_size(1920, 1080, 32) == (1920, 1088)
    assert generation_size(96, 64, 32) == (96, 64)
    assert generation_size(1920, 804, 32) == (1920, 800)
    with pytest.raises(BackendError, match=r"size: 24x64 is smaller than LTX-2's 32-pixel grid.*--preset"):
        generation_size(24, 64, 32)


def test_the_upsampler_halves_then_doubles_on_the_grid_and_refuses_a_frame_too_small_to_halve():
    from daotai.render.ltx2 import upsampled_sizes

    assert upsampled_sizes(1280, 720, 32) == ((640, 352), (1280, 704))
    assert upsampled_sizes(96, 64, 32) == ((64, 32), (128, 64))  # 48 rounds half up to 64
    with pytest.raises(BackendError, match=r"size: 48x64 is too small for upsample=true.*64x64.*upsample=true"):
        upsampled_sizes(48, 64, 32)


def test_frames_snap_to_8k_plus_1_and_long_shots_split_at_20_seconds(tiny_ltx2, script):
    from daotai.plan.timing import is_snapped

    backend = backend_for(tiny_ltx2)
    plan = plan_of(script, shots=[{"shot_id": "a", "duration": 1}, {"shot_id": "b", "duration": 45}])
    short, long_ = (backend._segments(s) for s in plan.shots)
    assert [(s.frames, s.keep) for s in short] == [(25, 24)]  # 24 frames at 24 fps are made as 25, then trimmed
    assert len(long_) == 3 and all(is_snapped(s.frames, 8) and s.frames <= 20 * 24 + 1 for s in long_)
    assert sum(s.keep for s in long_) == 45 * 24
    assert backend_for(tiny_ltx2, segment_seconds=5)._segments(plan.shots[1])[0].frames == 113  # 8*14+1 <= 5 s


def test_keyframes_sit_on_the_first_middle_and_last_latent():
    from daotai.render.ltx2 import keyframe_latents, latent_to_frame

    assert keyframe_latents(121, 8) == [0, 8, 15]
    assert [latent_to_frame(k, 121, 8) for k in (0, 8, 15)] == [0, 64, 120]
    assert keyframe_latents(9, 8) == [0, 1]


def test_segment_sounds_join_with_a_crossfade_over_the_shared_frame():
    from daotai.plan.timing import Segment
    from daotai.render.av_segments import Result, join_segments

    rate, fps = 240, 24.0  # 10 samples a frame
    first = Result(np.zeros((17, 4, 4, 3), np.uint8), np.ones((2, 170), np.float32), rate)
    second = Result(np.full((17, 4, 4, 3), 9, np.uint8), np.full((2, 170), 3.0, np.float32), rate)
    frames, sound = join_segments([first, second], [Segment(0, 0, 17, 17), Segment(1, 17, 16, 17)], fps)
    assert len(frames) == 33 and frames[16].max() == 0 and frames[17].max() == 9
    assert sound.shape == (2, 330)
    assert np.all(sound[:, :160] == 1.0) and np.all(sound[:, 170:] == 3.0)  # the second starts on the shared frame
    assert np.all(np.diff(sound[0, 160:170]) > 0)  # and fades in over it


def test_prompts_command_shows_the_prompt_ltx2_is_sent_with_its_lines_and_sound(script):
    from typer.testing import CliRunner

    from daotai import cli
    from daotai.plan.prompt import ltx2_prompt_for

    result = CliRunner().invoke(cli.app, ["prompts", str(script), "--model", "ltx2", "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["shot_id"]: r for r in json.loads(result.output)["shots"]}
    plan = plan_of(script)
    assert rows["s1"]["prompt"] == ltx2_prompt_for(plan, plan.shots[0])
    assert rows["s1"]["prompt"].endswith('lin says: "Morning." Sound: rain on the window.')
    assert rows["s2"]["budget"] == 1024 and rows["s2"]["prompt"].endswith("Sound: a door closes.")


def test_options_refuse_what_ltx2_does_not_take(tiny_ltx2):
    from daotai.render.registry import backend_names, spec_for

    assert "ltx2" in backend_names() and spec_for("ltx2").default_model == "ltx-2"
    with pytest.raises(OptionError, match="condition"):
        backend_for(tiny_ltx2, condition="depth")
    with pytest.raises(OptionError, match="segment_seconds.*1-20 s"):
        backend_for(tiny_ltx2, segment_seconds=30)
    with pytest.raises(OptionError, match="condition_strength"):
        backend_for(tiny_ltx2, condition_strength=1.5)


# ------------------------------------------------------------------ rendering


@pytest.mark.slow
def test_a_render_through_the_command_line_writes_picture_and_sound_in_sync(tiny_ltx2, script, tmp_path, config_dir):
    import av

    from daotai.encode.read import probe

    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "daotai.cli", "render", str(script), "--backend", "ltx2", "-O", f"model={tiny_ltx2}",
         "--device", "cpu", "--steps", str(STEPS), "-O", "accept_licence=true", "-o", str(out)],
        capture_output=True, text=True, timeout=600, env={**os.environ, "DAOTAI_DEBUG": ""},
    )
    assert done.returncode in (0, 1), done.stderr[-3000:]  # 1: qc failed (the picture checks, see below)
    plan = plan_of(script)
    for shot in plan.shots:
        path = out / "shots" / f"{shot.shot_id}.mp4"
        info = probe(path)
        assert (info.width, info.height, info.frames) == (96, 64, shot.frames)
        with av.open(str(path)) as container:
            sound = container.streams.audio[0]
            seconds = float(sound.duration * sound.time_base)
        assert seconds == pytest.approx(shot.frames / plan.fps, abs=0.05)  # the shot's sound spans its picture
    qc = json.loads((out / "qc.json").read_text())
    assert qc["sequence"]["ok"] and qc["sequence"]["audio"]["present"]
    assert qc["sequence"]["audio"]["duration_s"] == pytest.approx(qc["sequence"]["audio"]["picture_s"], abs=0.05)
    for report in qc["shots"]:
        assert report["audio"]["ok"] and report["audio"]["start_s"] == 0.0
        failed = {v["check"] for v in report["verdicts"] if not v["ok"]}
        assert failed <= PICTURE_CHECKS, report["failures"]
    manifest = json.loads((out / "manifest.json").read_text())
    notices = {s["shot_id"]: "\n".join(s["notices"]) for s in manifest["shots"]}
    assert "generated 25 frames (LTX-2 makes 8k+1) and trimmed to 24" in notices["s1"]
    assert 'lin says: "Morning." Sound: rain on the window.' in notices["s1"]
    assert "sound: 2 channels at 16000 Hz, 16000 samples" in notices["s1"]
    assert all("licence: LTX-2 Community License Agreement accepted" in n for n in notices.values())
    assert json.loads((config_dir / "licences.json").read_text())["ltx-2"]["how"] == "-O accept_licence=true"


def test_the_seed_reproduces_the_shot_files_byte_for_byte(tiny_ltx2, script, tmp_path):
    from daotai.run.pipeline import run
    from daotai.run.records import Finished
    from daotai.run.settings import PipelineSettings

    def shot_hashes(plan, out: Path) -> dict[str, str]:
        settings = PipelineSettings(backend="ltx2", camera_qc=False, options={
            "model": str(tiny_ltx2), "device": "cpu", "steps": STEPS, "accept_licence": True})
        assert isinstance(list(run(plan, out, settings, source=script))[-1], Finished)
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted((out / "shots").glob("*.mp4"))}

    plan = plan_of(script, shots=SCRIPT["shots"][1:])
    first = shot_hashes(plan, tmp_path / "a")
    assert first == shot_hashes(plan, tmp_path / "b")
    assert first != shot_hashes(plan_of(script, seed=6, shots=SCRIPT["shots"][1:]), tmp_path / "c")


@pytest.mark.parametrize("condition", ["first_frame", "keyframes", "video"])
def test_previz_frames_reach_the_condition_pipeline(tiny_ltx2, script, recorded, condition):
    from daotai.render.neural.retime import resize_rgb
    from daotai.render.previz.backend import PrevizBackend

    plan = plan_of(script)
    shot = plan.shots[0]
    events = events_of(backend_for(tiny_ltx2, condition=condition, condition_strength=0.6), plan, shot)
    assert sum(isinstance(e, Frame) for e in events) == shot.frames
    (call,) = recorded
    assert (call["height"], call["width"], call["num_frames"], call["frame_rate"]) == (64, 96, 25, 24.0)
    conditions = call["conditions"]
    assert all(c.strength == 0.6 for c in conditions)
    previz = PrevizBackend(labels=False)
    try:
        drawn = [e.rgb for e in previz.render(RenderJob(plan, shot, controls=False), RunContext())
                 if isinstance(e, Frame)]
    finally:
        previz.close()
    if condition == "first_frame":
        assert [c.index for c in conditions] == [0]
        np.testing.assert_array_equal(conditions[0].frames, resize_rgb(drawn[0], 96, 64))
    elif condition == "keyframes":
        assert [c.index for c in conditions] == [0, 2, 3]  # 25 frames are 4 latents
        np.testing.assert_array_equal(conditions[2].frames, resize_rgb(drawn[23], 96, 64))  # the shot's last
    else:
        assert [c.index for c in conditions] == [0] and conditions[0].frames.shape == (24, 64, 96, 3)
    notices = "\n".join(e.text for e in events if isinstance(e, Notice))
    assert "ltx2: conditioned on previz" in notices


@pytest.mark.parametrize("condition", ["none", "keyframes"])
def test_a_shot_shows_itself_forming_once_the_model_has_finished_one(tiny_ltx2, script, condition):
    """The server's live view: each step's video tokens through the map fitted on the shot before; keyframe
    conditions append tokens after the shot's own, which are read first."""
    plan = plan_of(script)
    backend = backend_for(tiny_ltx2, condition=condition)
    live = RunContext(glimpse_every_s=0.0)
    try:
        plain = events_of(backend, plan, plan.shots[1])
        first = events_of(backend, plan, plan.shots[0], live)
        second = events_of(backend, plan, plan.shots[1], live)
    finally:
        backend.close()
    assert not any(isinstance(e, Glimpse) for e in plain + first)  # none asked for; then no map yet
    glimpses = [e for e in second if isinstance(e, Glimpse)]
    assert [(g.step, g.steps) for g in glimpses] == [(1, STEPS), (2, STEPS)]
    assert all(g.shot_id == "s2" and g.rgb.dtype == np.uint8 and g.rgb.shape[1] == 320 for g in glimpses)
    frames = [[e.rgb for e in events if isinstance(e, Frame)] for events in (plain, second)]
    assert all(np.array_equal(a, b) for a, b in zip(*frames, strict=True))  # the picture costs the frames nothing


def test_a_long_shot_continues_each_segment_from_the_last_frame(tiny_ltx2, script, recorded):
    plan = plan_of(script, shots=[{"shot_id": "long", "duration": 2, "sound": "a door closes"}])
    shot = plan.shots[0]
    backend = backend_for(tiny_ltx2, segment_seconds=1)
    events = events_of(backend, plan, shot)
    frames = [e for e in events if isinstance(e, Frame)]
    (audio,) = [e for e in events if isinstance(e, Audio)]
    assert len(frames) == 48 and audio.samples.shape == (32000, 2) and audio.rate == 16000
    assert [c["num_frames"] for c in recorded] == [17, 17, 17]
    assert recorded[0]["conditions"] is None
    assert [c["generator"].initial_seed() for c in recorded] == [shot.seed, shot.seed + 1, shot.seed + 2]
    # The second segment starts on the last frame the first one supplies.
    (start,) = recorded[1]["conditions"]
    assert start.index == 0 and start.strength == 1.0
    np.testing.assert_array_equal(np.asarray(start.frames), frames[backend._segments(shot)[0].keep - 1].rgb)
    notices = "\n".join(e.text for e in events if isinstance(e, Notice))
    assert "3 segments of 17 frames" in notices and "segment 2/3: conditioned on the previous segment's last frame" \
        in notices


def test_cancelling_between_steps_stops_the_generation(tiny_ltx2, script):
    plan = plan_of(script)
    ctx = RunContext()
    backend = backend_for(tiny_ltx2, steps=4)
    with pytest.raises(Cancelled):
        for event in backend.render(RenderJob(plan, plan.shots[0], controls=False), ctx):
            if isinstance(event, Progress) and event.stage == "denoise":
                ctx.cancel.set()


def test_the_latent_upsampler_doubles_a_half_size_generation(script, recorded, tmp_path, monkeypatch):
    from diffusers import LTX2LatentUpsamplePipeline

    folder = builders.build_ltx2(tmp_path / "with-upsampler", upsampler=True)
    plan = plan_of(script, size=[128, 128], shots=SCRIPT["shots"][1:])
    shot = plan.shots[0]
    upsampled = []
    original = LTX2LatentUpsamplePipeline.__call__

    def recording_call(self, video, **kwargs):
        out = original(self, video, **kwargs)
        upsampled.append((len(video), kwargs["width"], kwargs["height"], tuple(out.frames.shape)))
        return out

    monkeypatch.setattr(LTX2LatentUpsamplePipeline, "__call__", recording_call)
    events = events_of(backend_for(folder, upsample=True), plan, shot)
    assert (recorded[0]["width"], recorded[0]["height"]) == (64, 64)  # the first pass: half the size
    assert upsampled == [(17, 64, 64, (1, 17, 3, 128, 128))]  # doubled by the upsampler, every frame
    frames = [e for e in events if isinstance(e, Frame)]
    assert len(frames) == shot.frames and frames[0].rgb.shape == (128, 128, 3)
    notices = "\n".join(e.text for e in events if isinstance(e, Notice))
    assert "generated at 64x64 and doubled to 128x128 by the latent upsampler" in notices


def test_upsampling_without_the_upsampler_names_what_is_missing(tiny_ltx2, script):
    plan = plan_of(script, size=[128, 128])
    with pytest.raises(BackendError, match=r"upsample: .*latent_upsampler holds no latent upsampler.*upsample=true"):
        events_of(backend_for(tiny_ltx2, upsample=True), plan, plan.shots[1])


def test_the_distilled_schedule_runs_its_fixed_sigmas_without_guidance(tiny_ltx2, script, recorded):
    from diffusers.pipelines.ltx2.utils import DISTILLED_SIGMA_VALUES

    plan = plan_of(script)
    backend = backend_for(tiny_ltx2, schedule="distilled", steps=None)
    events = events_of(backend, plan, plan.shots[1])
    (call,) = recorded
    assert call["sigmas"] == list(DISTILLED_SIGMA_VALUES) and call["num_inference_steps"] == 8
    assert (call["guidance_scale"], call["stg_scale"], call["audio_guidance_scale"]) == (1.0, 0.0, 1.0)
    assert [e.done for e in events if isinstance(e, Progress) and e.stage == "denoise"] == list(range(1, 9))
    with pytest.raises(OptionError, match="options.steps: 20 must be 8"):
        backend_for(tiny_ltx2, schedule="distilled", steps=20)


# ------------------------------------------------------------------ refusals


def test_licence_gate_refuses_then_records_acceptance(tiny_ltx2, config_dir):
    from daotai.render.ltx2 import LTX2Backend

    with pytest.raises(OptionError) as refused:
        LTX2Backend(model=str(tiny_ltx2), device="cpu")
    text = str(refused.value)
    assert "options.accept_licence" in text and "LTX-2 Community License Agreement" in text
    assert "revenue threshold" in text and "-O accept_licence=true" in text
    assert not (config_dir / "licences.json").exists()
    assert LTX2Backend(model=str(tiny_ltx2), device="cpu", accept_licence=True).licence.endswith("accepted now")
    assert "accepted 20" in LTX2Backend(model=str(tiny_ltx2), device="cpu").licence  # recorded once


def test_missing_weights_name_the_pull_command(script, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    backend = backend_for(Path("ltx-2"))
    plan = plan_of(script)
    with pytest.raises(BackendError, match=r"ltx-2 is not downloaded.*daotai models pull ltx-2"):
        events_of(backend, plan, plan.shots[0])


def test_the_command_line_names_the_pull_and_the_licence_before_any_work(script, tmp_path):
    env = dict(os.environ, COLUMNS="400", HF_HUB_CACHE=str(tmp_path / "hub"), DAOTAI_CONFIG_DIR=str(tmp_path / "cfg"))
    done = subprocess.run([sys.executable, "-m", "daotai.cli", "render", str(script), "-o", str(tmp_path / "out"),
                           "--backend", "ltx2"], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 4, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error backend ltx2 (its default model): ") and "ltx-2 is not downloaded" in line
    assert line.split("with: ")[1].startswith("daotai models pull ltx-2 --accept-licence")
    assert "LTX-2 Community License Agreement" in line and not (tmp_path / "out").exists()


def test_a_folder_of_another_model_is_refused_naming_the_pipelines(tiny_ltx, script):
    backend = backend_for(tiny_ltx)
    plan = plan_of(script)
    with pytest.raises(BackendError, match="LTXPipeline model; the 'ltx2' backend needs one of LTX2Pipeline"):
        events_of(backend, plan, plan.shots[0])


# ------------------------------------------------------------------ catalog and memory


def test_the_released_model_is_listed_with_its_licence_and_pulls_its_diffusers_folders():
    row = catalog.model_row("ltx-2")
    assert row is not None and row.repo_id == "Lightricks/LTX-2" and row.family == "ltx2"
    assert row.licence_gated and row.licence == "LTX-2 Community License Agreement"
    family = catalog.family("ltx2")
    assert (family.snap.frame_step, family.snap.size_multiple, family.snap.native_fps) == (8, 32, 24.0)
    assert "ltx2" not in catalog.snap_rules()  # plans do not list it: the backend records its own snapping


class _Runtime:
    def __init__(self, gib: float):
        self.kind, self.device, self.memory_bytes = "cuda", "cuda", int(gib * 1024**3)


@pytest.mark.parametrize(("gib", "tier"), [(139, "none"), (79, "none"), (48, "model"), (12, "group")])
def test_memory_planner_picks_a_tier_for_the_released_model(gib, tier):
    from daotai.render.ltx2 import LTX2Options, LTX2Runner
    from daotai.render.neural.request import NativeRequest

    runner = LTX2Runner(LTX2Options(), "ltx-2")
    runner.runtime = _Runtime(gib)
    assert runner._choose_tier(NativeRequest(1280, 704, 121, 24.0, "", "", 0)) == tier
    assert "GiB peak estimated" in runner.tier_reason


def test_doctor_says_which_tier_a_five_second_shot_takes():
    from daotai.doctor import ltx2_check

    assert "final: fits (none offload" in ltx2_check(139 * 1024**3).value
    assert "preview: fits (group offload" in ltx2_check(24 * 1024**3).value
    assert "final: does not fit" in ltx2_check(4 * 1024**3).value


def test_fast_mode_skips_transformer_passes_on_a_fixed_schedule(tiny_ltx2, script):
    plan = plan_of(script)
    backend = backend_for(tiny_ltx2, speed="fast", steps=6)
    events = events_of(backend, plan, plan.shots[1])
    assert sum(isinstance(e, Frame) for e in events) == plan.shots[1].frames
    cache = backend.runner.pipe.transformer._daotai_interval_cache
    assert cache.reused > 0 and cache.computed > 0  # guidance passes of skipped steps answered from the cache
    assert any("interval" in e.text for e in events if isinstance(e, Notice))


def test_group_offload_keeps_the_small_components_on_the_device(tiny_ltx2, monkeypatch):
    """Group offload streams the transformer and the text encoder; the connectors, audio VAE and vocoder are
    handed device tensors, so they go to the device with the VAE (checked with the moves recorded, on the CPU)."""
    from dataclasses import replace

    import diffusers.hooks

    from daotai.render.ltx2 import LTX2Options, LTX2Runner, _load_condition_pipeline
    from daotai.runtime.device import resolve_runtime

    runner = LTX2Runner(LTX2Options(model=str(tiny_ltx2)), "ltx-2")
    runner.runtime = resolve_runtime("cpu")
    runner.pipe, _ = _load_condition_pipeline(str(tiny_ltx2), "ltx2", runner.runtime)
    streamed, moved = [], []
    monkeypatch.setattr(diffusers.hooks, "apply_group_offloading", lambda module, **kw: streamed.append(module))
    for name in ("vae", "connectors", "audio_vae", "vocoder", "transformer"):
        module = getattr(runner.pipe, name)
        monkeypatch.setattr(module, "to", lambda *args, name=name, **kw: moved.append((name, args)))
    runner.runtime = replace(runner.runtime, kind="cuda", device="cuda:0")
    runner._place("group")
    assert streamed == [runner.pipe.transformer, runner.pipe.text_encoder]
    assert sorted(moved) == [(n, ("cuda:0",)) for n in ("audio_vae", "connectors", "vae", "vocoder")]


def test_the_condition_pipeline_keeps_the_dtypes_each_component_was_loaded_in(tiny_ltx2):
    """Loaded under CUDA's dtype rule (here on the CPU), every component keeps its rule's dtype and one step
    runs. ``from_pipe`` cast them all to float32, so on CUDA a float32 text path met a bfloat16 transformer
    ("mat1 and mat2 must have the same dtype")."""
    import torch

    from daotai.render.ltx2 import _load_condition_pipeline
    from daotai.runtime.device import Runtime, dtype_rule, vae_dtype_for

    cuda_rule = Runtime("cpu", "cuda", *dtype_rule("cuda"), memory_bytes=0)
    pipe, _ = _load_condition_pipeline(str(tiny_ltx2), "ltx2", cuda_rule)
    dtypes = {name: getattr(pipe, name).dtype
              for name in ("transformer", "text_encoder", "connectors", "audio_vae", "vocoder", "vae")}
    assert dtypes == {**dict.fromkeys(("transformer", "connectors", "audio_vae", "vocoder"), torch.bfloat16),
                      "text_encoder": torch.bfloat16, "vae": vae_dtype_for(cuda_rule, "ltx2")}
    out = pipe(prompt="rain", width=64, height=64, num_frames=9, frame_rate=24.0, num_inference_steps=1,
               output_type="np", generator=torch.Generator().manual_seed(0))
    assert out.frames.shape == (1, 9, 64, 64, 3)


def test_a_pipeline_missing_a_component_the_condition_pipeline_needs_is_refused(tiny_ltx2):
    from daotai.render.ltx2 import as_condition_pipeline
    from daotai.runtime.device import resolve_runtime
    from daotai.runtime.model_loading import load_pipeline

    pipe, _ = load_pipeline(str(tiny_ltx2), "ltx2", resolve_runtime("cpu"))
    pipe.vocoder = None
    with pytest.raises(BackendError, match="lacks vocoder"):
        as_condition_pipeline(pipe)
