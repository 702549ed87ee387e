"""Small things a user meets: the film's closing fade, friendly YAML errors, a script on stdin,
readable --help, and the user's --preset in the manifest."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from daotai.encode.read import decode_frames
from daotai.encode.video import VideoWriter
from daotai.errors import EncodeError, PlanError, ScriptError
from daotai.plan.planner import plan_script
from daotai.post.assemble import ClipSpec, Transition, assemble, end_fade_frames
from daotai.qc.metrics import is_black
from daotai.script.load import guess_format, parse_script, read_script_stream, validate_script

ROOT = Path(__file__).resolve().parent.parent
RED, GREEN = (255, 0, 0), (0, 255, 0)
W, H = 64, 48


def daotai(*args: str, stdin: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="80")  # the width a pipe or a small terminal gets
    return subprocess.run([sys.executable, "-m", "daotai.cli", *args], capture_output=True, text=True,
                          input=stdin, cwd=cwd or ROOT, env=env, timeout=300)


def solid_clip(path: Path, colour: tuple[int, int, int], frames: int, fps=24) -> Path:
    with VideoWriter(path, W, H, fps) as writer:
        for _ in range(frames):
            writer.write(np.full((H, W, 3), colour, np.uint8))
    return path


def centre(frame: np.ndarray) -> np.ndarray:
    return frame[16:32, 24:40].reshape(-1, 3).mean(axis=0)


# ------------------------------------------------------------------ the film's closing fade


def test_closing_fade_takes_the_last_frames_to_black_without_changing_length(tmp_path):
    a = solid_clip(tmp_path / "a.mp4", RED, 12)
    b = solid_clip(tmp_path / "b.mp4", GREEN, 12)
    result = assemble([ClipSpec(a), ClipSpec(b)], tmp_path / "seq.mp4", 24, fade_out_s=0.25)  # 6 frames
    frames = list(decode_frames(result.path))
    assert (result.frames, len(frames)) == (24, 24)
    assert abs(centre(frames[17])[1] - 255) < 5  # untouched before the fade
    for i in range(18, 24):  # brightness (23 - i) / 6: down to black on the very last frame
        assert abs(centre(frames[i])[1] - 255 * (23 - i) / 6) < 6, i
    assert is_black(frames[23])
    assert abs(centre(frames[11])[0] - 255) < 5  # the first clip is not touched


def test_closing_fade_is_refused_when_it_does_not_fit_the_last_clip(tmp_path):
    a = solid_clip(tmp_path / "a.mp4", RED, 12)
    b = solid_clip(tmp_path / "b.mp4", GREEN, 6)
    with pytest.raises(EncodeError, match=r"fade_out"):
        assemble([ClipSpec(a), ClipSpec(b, Transition("fade", 0.25))], tmp_path / "seq.mp4", 24, fade_out_s=0.25)
    assert not (tmp_path / "seq.mp4").exists()
    assert end_fade_frames(1.0, Fraction(24000, 1001)) == 24
    with pytest.raises(EncodeError, match="fade_out"):
        end_fade_frames(float("nan"), 24)


def test_closing_fade_fades_the_soundtrack_too(tmp_path):
    from daotai.encode.audio import read_audio
    from daotai.post.assemble import sample_at

    a = solid_clip(tmp_path / "a.mp4", RED, 24)
    total = sample_at(24, Fraction(24))
    t = np.arange(total) / 48000.0
    tone = np.repeat((0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)[:, None], 2, axis=1)  # (N, 2)
    result = assemble([ClipSpec(a)], tmp_path / "seq.mp4", 24, soundtrack=tone, fade_out_s=0.5)
    sound = read_audio(result.path)  # (N, 2)
    quarter = len(sound) // 4
    assert np.abs(sound[:quarter]).max() > 0.4  # the first half plays at its level
    assert np.abs(sound[-480:]).max() < 0.05  # the last 10 ms are all but silent


def script(**extra) -> dict:
    return {"size": "preview", "fps": 12, **extra,
            "shots": [{"shot_id": "a", "duration": 1.5}, {"shot_id": "b", "duration": 2, "transition": "fade"}]}


def test_plan_carries_the_closing_fade_and_refuses_one_that_does_not_fit():
    plan = plan_script(validate_script(script(fade_out=1)))
    assert plan.fade_out is not None and (plan.fade_out.frames, plan.fade_out.duration_s) == (12, 1.0)
    assert plan.total_frames == 42  # a fade to black takes no time of its own
    assert plan.shots[1].transition.type == "fade"  # the last shot's fade still dips between a and b
    with pytest.raises(PlanError) as caught:
        plan_script(validate_script(script(fade_out=2)))  # 24 frames + the 3 of b's fade in > 24
    assert caught.value.issues[0].path == "fade_out"
    assert "'b'" in caught.value.issues[0].rule and "fade in" in caught.value.issues[0].rule


def test_scripts_without_a_closing_fade_plan_and_hash_as_before():
    parsed = validate_script(script())
    assert "fade_out" not in parsed.model_dump(mode="json")
    assert "fade_out" not in json.loads(plan_script(parsed).model_dump_json())
    with pytest.raises(ScriptError) as caught:
        validate_script(script(fade_out=11))
    assert caught.value.issues[0].path == "fade_out"


def test_a_render_with_a_closing_fade_ends_black_and_records_the_preset(tmp_path):
    source = tmp_path / "fade.json"
    source.write_text(json.dumps(script(fade_out=0.5)))
    out = tmp_path / "out"
    result = daotai("render", str(source), "-o", str(out), "--preset", "preview", "--no-cache", "--enhance", "upscale=2")
    assert result.returncode == 0, result.stderr
    for sequence in ("sequence.mp4", "sequence_enhanced.mp4"):  # the restored copy fades out too
        frames = list(decode_frames(out / sequence))
        assert len(frames) == 42 and is_black(frames[-1]) and not is_black(frames[-7]), sequence
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["settings"]["size_preset"] == "preview"  # what the user asked for
    assert manifest["settings"]["preset"] in ("ultrafast", "superfast", "veryfast", "faster", "fast", "medium",
                                              "slow", "slower", "veryslow")  # the encoder's own preset
    timeline = json.loads((out / "timeline.otio").read_text())
    last = timeline["tracks"]["children"][0]["children"][-1]
    assert any(e["effect_name"] == "FadeOut" and e["metadata"]["frames"] == 6 for e in last["effects"])


# ------------------------------------------------------------------ friendly YAML, stdin


@pytest.mark.parametrize("text, line", [
    ("title: x\nshots:\n\t- shot_id: a\n", 3),
    ("title: x\nshots:\n  - shot_id: a\n\tduration: 2\n", 4),
])
def test_a_tab_in_yaml_says_so_with_its_line(text, line):
    with pytest.raises(ScriptError) as caught:
        parse_script(text, fmt="yaml")
    assert caught.value.issues[0].rule == f"line {line}: tabs are not allowed for indentation in YAML; use spaces"


def test_other_yaml_errors_keep_their_message():
    with pytest.raises(ScriptError) as caught:
        parse_script("shots: [a, b\n", fmt="yaml")
    assert "tabs" not in caught.value.issues[0].rule and "is not valid YAML" in caught.value.issues[0].rule


def test_stdin_script_format_is_told_from_its_first_character():
    assert guess_format(b'\xef\xbb\xbf  {"shots": []}') == "json"
    assert guess_format("\n[1]") == "json"
    assert guess_format(b"shots:\n  - shot_id: a\n") == "yaml"
    parsed = read_script_stream(io.BytesIO(b"shots:\n  - shot_id: a\n"))
    assert parsed.shots[0].shot_id == "a"


def test_validate_dash_reads_the_script_from_stdin():
    ok = daotai("validate", "-", stdin=(ROOT / "examples" / "office.json").read_text(encoding="utf-8"))
    assert ok.returncode == 0 and "4 shots" in ok.stdout
    bad = daotai("validate", "-", stdin="title: x\nshots:\n\t- shot_id: a\n")
    assert bad.returncode == 2
    assert "line 3: tabs are not allowed" in bad.stderr and "Traceback" not in bad.stderr


def test_render_dash_renders_a_script_from_stdin(tmp_path):
    out = tmp_path / "out"
    result = daotai("render", "-", "-o", str(out), "--no-cache", stdin=json.dumps(script()))
    assert result.returncode == 0, result.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["source"]["path"] is None  # no file to name or hash
    assert len(list(decode_frames(out / "sequence.mp4"))) == 42


# ------------------------------------------------------------------ --help


def test_enhance_and_match_colour_help_reads_whole_at_80_columns():
    render = daotai("render", "--help").stdout
    enhance = daotai("enhance", "--help").stdout
    assert "…" not in render.split("--enhance", 1)[1].split("--model", 1)[0]  # nothing cut off
    assert "match=SHOT_ID" in render
    assert "--match-colour " in enhance and "--match-co…" not in enhance and "also spelled --match-color" in enhance


def test_match_color_spelling_still_works(tmp_path):
    clip = solid_clip(tmp_path / "a.mp4", RED, 4)
    result = daotai("enhance", str(clip), "-o", str(tmp_path / "b.mp4"), "--match-color", str(clip))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "b.mp4").exists()


# ------------------------------------------------------------------ what a render will cost


def test_cost_rule_matches_the_measured_wan_step():
    """docs/performance.md: Wan 1.3B, 480x832, 81 frames, CFG: 566 TFLOP a step; stock 1.2 s a step on an
    H200 whose matmuls reach 790 TFLOP/s."""
    from daotai import catalog
    from daotai.render.cost import neural_seconds_per_shot, step_flops

    footprint = catalog.footprint("wan2.1-t2v-1.3b")
    assert step_flops(footprint, 832, 480, 81, 5.0) == pytest.approx(566e12, rel=0.05)
    seconds, frames = neural_seconds_per_shot("wan2.1-t2v-1.3b", 832, 480, 5.0, 790e12, steps=1)
    assert frames == 81 and seconds == pytest.approx(1.2, rel=0.05)


def test_previz_cost_is_timed_here_and_long_renders_are_flagged():
    from daotai.render.cost import LONG_RENDER_S, CostEstimate, estimate_cost, format_duration

    plan = plan_script(validate_script(script()))
    estimate = estimate_cost(plan, "previz")
    assert estimate is not None and estimate.frames == plan.total_frames
    assert 0 < estimate.seconds_per_frame < 60 and "timed here" in estimate.basis
    assert estimate_cost(plan, "previz", quick=True) is None  # too small to be worth timing before a render
    assert CostEstimate("previz", 7200, 1.0, "x").long and not CostEstimate("previz", 100, 1.0, "x").long
    assert LONG_RENDER_S == 1800
    assert [format_duration(s) for s in (40, 720, 7500, 3 * 86400)] == ["40 s", "12 min", "2 h 05 min", "3.0 days"]


def test_a_4k_120fps_render_is_warned_about_before_it_starts(capsys):
    from daotai.cli.rendering import _announce_cost
    from daotai.run.settings import PipelineSettings

    big = validate_script({"size": "4K", "fps": 120, "shots": [{"shot_id": f"s{i}", "duration": 60} for i in range(10)]})
    _announce_cost(plan_script(big), PipelineSettings(), Path("out"), dry_run=False)
    warning = capsys.readouterr().err
    assert "warning" in warning and "72,000 frames" in warning and "over 30 min" in warning


def test_dry_run_plans_and_estimates_and_writes_nothing(tmp_path, monkeypatch):
    # the machine's calibration is kept in the user's cache folder: a temporary one here, not the real one
    monkeypatch.setenv("DAOTAI_CACHE_DIR", str(tmp_path.parent / f"{tmp_path.name}-user-cache"))
    out = tmp_path / "out"
    result = daotai("render", "examples/office.json", "-o", str(out), "--dry-run", "--cache", str(tmp_path / "c"))
    assert result.returncode == 0, result.stderr
    assert "4 shots, 264 frames" in result.stdout and "estimate: about" in result.stdout
    assert "nothing was written" in result.stdout
    for stage in ("render+encode", "assembly", "QC", "deliver"):  # the estimate's stages, each named
        assert stage in result.stdout
    assert list(tmp_path.iterdir()) == []  # no output folder, no staging folder, no cache


def test_doctor_judges_time_as_well_as_memory():
    from daotai.doctor import _hardware_encoders, _practicality

    slow = _practicality("none (CPU only)", 64 * 1024**3, flops=(50e9, "cpu"))  # a laptop CPU's float32 rate
    rows = {c.name: c for c in slow}
    small = rows["wan2.1-t2v-1.3b, 5 s draft shot (estimate)"]
    assert not small.ok and "fits" in small.value and "impractical here" in small.value and "days" in small.value
    fast = {c.name: c for c in _practicality("cuda: H200", 140 * 1024**3, flops=(790e12, "cuda"))}
    assert fast["wan2.1-t2v-1.3b, 5 s draft shot (estimate)"].ok
    assert "min a shot" in fast["wan2.1-t2v-1.3b, 5 s draft shot (estimate)"].value
    if not Path("/dev/nvidiactl").exists():
        encoders = _hardware_encoders("none (CPU only)")
        assert "nvenc" not in encoders.value.replace("NVENC", "")  # no encoder named that cannot open here


def test_comfy_assembly_of_a_render_with_a_closing_fade_is_the_same_file(tmp_path):
    from daotai.comfy.driver import drive
    from daotai.comfy.script import load_director_script
    from daotai.comfy.sequence import assemble_shots, shots_in_folder
    from daotai.render.base import RunContext
    from daotai.run.pipeline import run
    from daotai.run.records import Finished
    from daotai.run.settings import PipelineSettings

    director = load_director_script(json.dumps(script(fade_out=0.5)))
    out = tmp_path / "render"
    assert any(isinstance(e, Finished) for e in run(director.plan, out, PipelineSettings(camera_qc=False)))
    result = drive(assemble_shots(director.plan, shots_in_folder(director.plan, out), tmp_path / "seq"), RunContext())
    assert result.sequence.read_bytes() == (out / "sequence.mp4").read_bytes()
    assert is_black(list(decode_frames(result.sequence))[-1])


def test_a_choice_of_shots_keeps_the_closing_fade_and_checks_it_fits():
    from daotai.plan.planner import select_shots

    fading = validate_script({"fps": 12, "fade_out": 1, "shots": [
        {"shot_id": "long", "duration": 3}, {"shot_id": "short", "duration": 1, "transition": "fade"},
        {"shot_id": "end", "duration": 2}]})
    plan = plan_script(fading)
    assert select_shots(plan, ["long"]).fade_out == plan.fade_out  # the chosen film still fades out
    with pytest.raises(PlanError) as caught:
        select_shots(plan, ["long", "short"])  # 12 frames of fade + 3 of the dip in > 12
    assert caught.value.issues[0].path == "fade_out" and "'short'" in caught.value.issues[0].rule
