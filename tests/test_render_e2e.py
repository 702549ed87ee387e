"""End to end: script → previz → encoded files → qc, asserted on the decoded video."""

from __future__ import annotations

import json
import threading
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from daotai.encode.read import decode_frames, decode_gray, probe
from daotai.errors import Cancelled
from daotai.events import Progress
from daotai.plan.camera_grammar import project
from daotai.plan.layout import IN_PROGRESS
from daotai.plan.planner import plan_script
from daotai.render.base import RunContext
from daotai.run.pipeline import run
from daotai.run.records import Finished
from daotai.run.settings import PipelineSettings
from daotai.script.load import validate_script

SMALL = {"fps": 24, "size": "480x270", "scene": {"name": "test stage", "set_pieces": []}}


def _render(data, out: Path, **settings):
    plan = plan_script(validate_script(data))
    result = None
    for event in run(plan, out, PipelineSettings(**settings)):
        if isinstance(event, Finished):
            result = event.result
    assert result is not None
    return plan, result


def _pixel(shot, frame_index, point):
    frame = shot.cameras[frame_index]
    uv, depth = project(np.array([point]), np.array(frame.cam_to_world).reshape(4, 4), np.array(frame.K).reshape(3, 3))
    return int(uv[0][0]), int(uv[0][1]), float(depth[0])


@pytest.fixture(scope="module")
def two_characters(tmp_path_factory):
    out = tmp_path_factory.mktemp("two")
    data = dict(
        SMALL,
        characters=[
            # facing fixed: two characters left to the staging would turn to face each other
            {"id": "red", "colour": [0.9, 0.1, 0.1], "position": [-0.6, 0.0], "facing": 0},
            {"id": "blue", "colour": [0.1, 0.2, 0.9], "position": [0.6, -2.0], "facing": 0},
        ],
        shots=[
            {"shot_id": "wide", "duration": 1.0, "subject": "red", "framing": "wide", "camera": "static"},
            {"shot_id": "push", "duration": 1.5, "subject": "red", "framing": "full",
             "camera": {"type": "dolly", "motion": [0, 0, -0.8]}},
            # a push lands on its framing and a pull starts on it: at full both, the overlap's middle
            # frames would show the same picture, so the pull is framed medium and the blend shows
            {"shot_id": "pull", "duration": 1.5, "subject": "red", "framing": "medium",
             "camera": {"type": "dolly", "motion": [0, 0, 0.8]}, "transition": {"type": "crossfade", "duration": 0.5}},
        ],
    )
    plan, result = _render(data, out)
    return plan, result, out


def test_files_frame_count_size_fps(two_characters):
    plan, result, out = two_characters
    for shot in plan.shots:
        info = probe(out / "shots" / f"{shot.shot_id}.mp4")
        assert (info.width, info.height, info.frames) == (480, 270, shot.frames)
        assert info.fps == Fraction(24)
        assert info.colorspace in (1, "bt709") and info.faststart
    seq = probe(out / "sequence.mp4")
    assert seq.frames == plan.total_frames == 24 + 36 + 36 - 12
    for name in ("contact_sheet.png", "timeline.otio", "manifest.json", "qc.json", "plan.json", "control/index.json"):
        assert (out / name).is_file(), name
    assert not list(out.rglob("*.partial*"))


def test_proxy_colour_at_projected_position(two_characters):
    plan, _, out = two_characters
    shot = plan.shot("wide")
    height = plan.characters[0].height
    u, v, _ = _pixel(shot, 0, (-0.6, 0.70 * height, 0.0))  # red's chest (the shirt takes the colour)
    frame = next(iter(decode_frames(out / "shots" / "wide.mp4")))
    patch = frame[v - 1 : v + 2, u - 1 : u + 2].reshape(-1, 3).mean(axis=0)
    assert patch[0] > 1.6 * patch[1] and patch[0] > 1.6 * patch[2], patch  # reads as red


def test_depth_ordering_and_masks(two_characters):
    plan, _, out = two_characters
    shot = plan.shot("wide")
    heights = {c.id: c.height for c in plan.characters}
    depth = next(iter(decode_gray(out / "control" / "wide_depth.mkv")))  # (H, W) uint16 mm
    mask = next(iter(decode_gray(out / "control" / "wide_mask.mkv")))  # (H, W) uint8 ids
    ur, vr, dr = _pixel(shot, 0, (-0.6, 0.70 * heights["red"], 0.0))
    ub, vb, db = _pixel(shot, 0, (0.6, 0.70 * heights["blue"], -2.0))
    assert dr < db
    assert depth[vr, ur] < depth[vb, ub]
    assert abs(depth[vr, ur] / 1000.0 - dr) < 0.4  # the surface is a little nearer than the axis
    assert mask[vr, ur] == 1 and mask[vb, ub] == 2  # index.json: 1 = red, 2 = blue
    index = json.loads((out / "control" / "index.json").read_text())
    assert index["shots"]["wide"]["mask_values"] == {"1": "red", "2": "blue"}


def test_dolly_in_and_out_detected(two_characters):
    _, result, out = two_characters
    qc = json.loads((out / "qc.json").read_text())
    shots = {s["shot_id"]: s for s in qc["shots"]}
    scale = {sid: next(c for c in shots[sid]["camera"]["components"] if c["name"] == "scale")
             for sid in ("push", "pull")}
    assert scale["push"]["measured_total"] > 0 and scale["push"]["direction_ok"] is True
    assert scale["pull"]["measured_total"] < 0 and scale["pull"]["direction_ok"] is True
    assert shots["push"]["camera"]["error_mean_px"] <= 0.5


def test_crossfade_middle_frame_blends_both_shots(two_characters):
    plan, _, out = two_characters
    push = list(decode_frames(out / "shots" / "push.mp4"))
    pull = list(decode_frames(out / "shots" / "pull.mp4"))
    seq = list(decode_frames(out / "sequence.mp4"))
    k = plan.shot("pull").transition.frames  # 12 frames of overlap
    start = plan.shot("pull").start_frame  # first blended frame in the sequence
    j = (k - 1) // 2
    a, b = push[len(push) - k + j].astype(float), pull[j].astype(float)
    w = (j + 1) / (k + 1)
    expected = (1 - w) * a + w * b
    got = seq[start + j].astype(float)
    assert np.abs(got - expected).mean() < 3.0
    assert np.abs(got - a).mean() > 3.0 and np.abs(got - b).mean() > 3.0  # neither shot alone


def test_qc_passes_on_clean_render(two_characters):
    _, result, out = two_characters
    qc = json.loads((out / "qc.json").read_text())
    assert qc["ok"], qc["failures"]
    for shot in qc["shots"]:
        assert shot["fidelity"]["psnr_mean_db"] >= 38.5
        assert shot["fidelity"]["psnr_std_db"] <= 1.2


def test_rerender_is_identical(two_characters, tmp_path):
    plan, _, out = two_characters
    data_out = tmp_path / "again"
    data = json.loads((out / "plan.json").read_text())
    from daotai.plan.planner import plan_from_json

    again = plan_from_json(json.dumps(data))
    for _ in run(again, data_out, PipelineSettings(shots=("wide",), camera_qc=False)):
        pass
    first = list(decode_frames(out / "shots" / "wide.mp4"))
    second = list(decode_frames(data_out / "shots" / "wide.mp4"))
    assert len(first) == len(second) and all(np.array_equal(a, b) for a, b in zip(first, second, strict=True))
    assert (out / "shots" / "wide.mp4").read_bytes() == (data_out / "shots" / "wide.mp4").read_bytes()


def test_cancel_mid_shot_leaves_no_partial_files(tmp_path):
    data = dict(SMALL, characters=[{"id": "a"}], shots=[{"shot_id": "long", "duration": 4.0, "camera": "pan_right"}])
    plan = plan_script(validate_script(data))
    ctx = RunContext()
    out = tmp_path / "cancelled"
    with pytest.raises(Cancelled):
        for event in run(plan, out, PipelineSettings(), ctx):
            if isinstance(event, Progress) and event.stage == "render" and event.done >= 16:
                ctx.cancel.set()
    # the render filled a staging folder beside ``out``; stopped, it removed it and never made ``out``
    assert list(tmp_path.iterdir()) == []


def test_keyboard_interrupt_leaves_no_partial_files(tmp_path):
    data = dict(SMALL, characters=[{"id": "a"}], shots=[{"shot_id": "long", "duration": 4.0}])
    plan = plan_script(validate_script(data))
    out = tmp_path / "interrupted"
    with pytest.raises(KeyboardInterrupt):
        for event in run(plan, out, PipelineSettings()):
            if isinstance(event, Progress) and event.stage == "render" and event.done >= 8:
                raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []
    assert threading.active_count() < 5  # encoder threads were joined


def test_qc_flags_black_and_frozen_clips(tmp_path):
    from daotai.encode.video import VideoWriter
    from daotai.qc.shot import check_shot

    data = dict(SMALL, characters=[{"id": "a"}], shots=[{"shot_id": "p", "duration": 2.0, "camera": "pan_right"}])
    plan = plan_script(validate_script(data))
    shot = plan.shots[0]
    black = tmp_path / "black.mp4"
    with VideoWriter(black, 480, 270, 24) as writer:
        for _ in range(shot.frames):
            writer.write(np.zeros((270, 480, 3), np.uint8))
    entry = check_shot(plan, shot, black, None, camera=False)
    assert not entry["ok"] and any("black" in f for f in entry["failures"])

    frozen = tmp_path / "frozen.mp4"
    rng = np.random.default_rng(0)
    still = rng.integers(0, 255, (270, 480, 3), dtype=np.uint8)
    with VideoWriter(frozen, 480, 270, 24) as writer:
        for _ in range(shot.frames):
            writer.write(still)
    entry = check_shot(plan, shot, frozen, None, camera=False)
    assert any("frozen" in f for f in entry["failures"])


# --------------------------------------------------------------------------- output folders


TINY = {"fps": 12, "size": "320x180", "scene": {"name": "test stage", "set_pieces": []},
        "characters": [{"id": "a"}]}


def _tiny(*shot_ids: str) -> dict:
    moves = ("pan_right", "pan_left", "tilt_up")
    return dict(TINY, shots=[{"shot_id": sid, "duration": 0.75, "subject": "a", "camera": moves[i % 3]}
                             for i, sid in enumerate(shot_ids)])


def _files(out: Path) -> set[str]:
    return {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file() and "cameras" not in p.parts}


def test_rendering_over_an_earlier_render_replaces_it_whole(tmp_path):
    out = tmp_path / "out"
    _render(_tiny("old1", "old2"), out)
    plan = plan_script(validate_script(_tiny("new")))  # the same (untitled, file-less) script, edited
    list(run(plan, out, PipelineSettings(controls=False)))
    files = _files(out)
    assert not any("old1" in f or "old2" in f for f in files), files  # shots and their controls
    assert "control/index.json" not in files  # this run wrote no controls
    manifest = json.loads((out / "manifest.json").read_text())
    assert set(manifest["files"]) | {"manifest.json"} == {p.relative_to(out).as_posix() for p in out.rglob("*")
                                                          if p.is_file()}
    assert not (out / IN_PROGRESS).exists() and [p.name for p in tmp_path.iterdir()] == ["out"]
    from daotai.run.recheck import check_folder

    report = check_folder(out)
    assert report.ok, report.failures
    assert report.files is not None and report.files["ok"]


def test_an_interrupted_rerender_leaves_the_earlier_render_whole(tmp_path):
    from daotai.files import sha256_file
    from daotai.run.recheck import check_folder

    out = tmp_path / "out"
    _render(_tiny("s1", "s2"), out)
    before = {p.relative_to(out).as_posix(): sha256_file(p) for p in out.rglob("*") if p.is_file()}
    plan = plan_script(validate_script(_tiny("s1", "s3")))
    with pytest.raises(KeyboardInterrupt):
        for event in run(plan, out, PipelineSettings()):
            if isinstance(event, Progress) and event.stage == "render" and event.shot_id == "s3":
                raise KeyboardInterrupt  # s1 written anew, s3 half done
    assert {p.relative_to(out).as_posix(): sha256_file(p) for p in out.rglob("*") if p.is_file()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    report = check_folder(out)
    assert report.files["ok"], report.files["problems"]
    # rendering again finishes the job: one whole render, nothing mixed
    _render(_tiny("s1", "s3"), out)
    report = check_folder(out)
    assert report.ok and report.files["ok"], report.failures
    assert "shots/s2.mp4" not in _files(out)


def test_qc_flags_a_replaced_shot(tmp_path):
    from daotai.run.recheck import check_folder

    out = tmp_path / "out"
    _render(_tiny("s1", "s2"), out)
    (out / "shots" / "s2.mp4").write_bytes((out / "shots" / "s1.mp4").read_bytes())
    (out / "shots" / "stray.mp4").write_bytes((out / "shots" / "s1.mp4").read_bytes())
    report = check_folder(out)
    assert not report.ok
    assert report.files["changed"] == ["shots/s2.mp4"] and report.files["unlisted"] == ["shots/stray.mp4"]
    assert "s2" in report.summary_text() and "changed since manifest.json" in report.summary_text()
