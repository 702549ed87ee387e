"""QC on previz renders, whose cameras are exact: a correct shot must pass, a broken one must fail.

The correct shots are the false alarms reported against the QC (issue 27): a low-angle close-up
push-in read as frozen and dollying out, the README's smallest script failing on a frozen
start and (without controls) on camera error, a walking subject read as frozen. The broken ones
are made from correct renders: the frames reversed (a pan the wrong way), a run of frames held
(a freeze while the plan moves), a zoom's video checked against a dolly's plan.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from daotai.encode.read import decode_frames
from daotai.encode.video import VideoWriter
from daotai.plan.planner import plan_script
from daotai.qc.shot import check_shot
from daotai.run.pipeline import run
from daotai.run.records import Finished
from daotai.run.settings import PipelineSettings
from daotai.script.load import validate_script

ROOT = Path(__file__).resolve().parent.parent

# The script, verbatim: a default 推镜头 on a low-angle 近景 at night.
LOW_ANGLE_PUSH = {"size": "preview", "scene": {"name": "老街夜市", "time_of_day": "夜晚"},
                  "characters": [{"id": "cop", "height": 1.8}],
                  "shots": [{"shot_id": "push", "duration": 2.5, "subject": "cop", "framing": "近景",
                             "angle": "仰拍", "camera": "推镜头"}]}
# The README's smallest script.
README_SMALLEST = {"scene": "office",
                   "characters": [{"id": "char_001", "appearance": "wearing glasses, blue shirt"}],
                   "shots": [{"shot_id": "s01", "camera": {"type": "dolly", "motion": [0.1, 0.0, -0.3]},
                              "subject": "char_001", "framing": "medium_shot"}]}


def _render(data: dict, out: Path, **settings):
    plan = plan_script(validate_script(data))
    finished = [e for e in run(plan, out, PipelineSettings(**settings)) if isinstance(e, Finished)]
    assert finished
    return plan, json.loads((out / "qc.json").read_text(encoding="utf-8"))


def _entry(qc: dict, shot_id: str) -> dict:
    return next(s for s in qc["shots"] if s["shot_id"] == shot_id)


def _component(entry: dict, name: str) -> dict:
    return next(c for c in entry["camera"]["components"] if c["name"] == name)


def _rewrite(src: Path, dst: Path, frames: list[np.ndarray], fps: int) -> Path:
    height, width = frames[0].shape[:2]
    with VideoWriter(dst, width, height, fps) as writer:
        for frame in frames:
            writer.write(frame)
    return dst


@pytest.fixture(scope="module")
def low_push(tmp_path_factory):
    out = tmp_path_factory.mktemp("low_push")
    plan, qc = _render(LOW_ANGLE_PUSH, out)
    return plan, qc, out


def test_low_angle_close_up_push_in_passes(low_push):
    _, qc, _ = low_push
    entry = _entry(qc, "push")
    assert entry["ok"], entry["failures"]
    assert entry["frames"]["frozen_faulty"] == []  # the subject grows in every frame: no freeze
    scale = _component(entry, "scale")
    assert scale["significant"] and scale["direction_ok"] is True and scale["words"] == "dolly in"
    summary = entry["camera"]["summary"]
    assert summary.startswith("dollies in") and "unplanned" not in summary and "dollies out" not in summary
    # the picture of a push-in with the camera looking up also slides down; that is no pedestal
    assert "pedestal" not in summary


def test_low_angle_push_in_passes_without_controls(low_push):
    plan, _, out = low_push
    entry = check_shot(plan, plan.shots[0], out / "shots" / "push.mp4", None, controls={})
    assert entry["camera"]["depth_source"] == "scene_model"
    assert entry["ok"], entry["failures"]


@pytest.mark.slow
@pytest.mark.parametrize("controls", [True, False], ids=["controls", "no-controls"])
def test_readme_smallest_script_passes(tmp_path, controls):
    _, qc = _render(README_SMALLEST, tmp_path / "out", controls=controls)
    entry = _entry(qc, "s01")
    assert qc["ok"], qc["failures"]
    assert entry["camera"]["depth_source"] == ("control_depth" if controls else "scene_model")
    assert _component(entry, "scale")["direction_ok"] is True


@pytest.mark.slow
def test_office_walk_and_orbit_pass_without_controls(tmp_path):
    """office.json's s01 (Lin walks away from a static camera) and s04 (an orbit), no controls."""
    data = json.loads((ROOT / "examples" / "office.json").read_text(encoding="utf-8"))
    _, qc = _render(data, tmp_path / "out", controls=False, shots=("s01", "s04"))
    for shot_id in ("s01", "s04"):
        entry = _entry(qc, shot_id)
        assert entry["ok"], (shot_id, entry["failures"])
    assert _entry(qc, "s01")["frames"]["frozen_faulty"] == []


CLOSE_UPS = {"size": "preview", "seed": 3, "scene": {"name": "office"},
             "characters": [{"id": "a", "height": 1.75, "position": [0, 0]}],
             "shots": [{"shot_id": sid, "duration": 2, "subject": "a", "framing": "close_up", "angle": angle,
                        "camera": camera}
                       for sid, angle, camera in (("truck", "low", {"type": "truck", "direction": "right"}),
                                                  ("orbit", "eye_level", {"type": "orbit"}),
                                                  ("dolly", "birds_eye", {"type": "dolly", "direction": "in"}),
                                                  ("pedestal", "low", {"type": "pedestal", "direction": "up"}))]}


@pytest.mark.slow
def test_close_ups_pass_without_controls(tmp_path):
    """Without a depth map a close-up's tracks are on the subject, whose surface the plan only
    knows to lie inside its cylinder: the orbit read as an unplanned move, the bird's-eye
    dolly and the low pedestal as over the error limit."""
    plan, qc = _render(CLOSE_UPS, tmp_path / "out", controls=False)
    for entry in qc["shots"]:
        assert entry["camera"]["depth_source"] == "scene_model"
        assert entry["ok"], (entry["shot_id"], entry["failures"])
        assert entry["camera"]["checked"] and entry["camera"]["error_mean_px"] < 0.8
    # the band of depths does not hide a move the wrong way
    for shot_id, component in (("truck", "horizontal"), ("pedestal", "vertical")):
        frames = list(decode_frames(tmp_path / "out" / "shots" / f"{shot_id}.mp4"))[::-1]
        backwards = _rewrite(tmp_path / "x.mp4", tmp_path / f"{shot_id}_reversed.mp4", frames, plan.fps)
        entry = check_shot(plan, plan.shot(shot_id), backwards, None, controls={})
        assert not entry["ok"] and _component(entry, component)["direction_ok"] is False, entry["summary"]


# --------------------------------------------------------------------------- true failures


PAN = {"size": "480x270", "scene": {"name": "office"}, "characters": [{"id": "a"}],
       "shots": [{"shot_id": "pan", "duration": 1.5, "subject": "a", "framing": "medium",
                  "camera": {"type": "pan", "rotate": [20, 0, 0]}},
                 # placed where the medium stands, so the push runs from there to 0.45 m and the zoom
                 # narrows from there (left to the planner both would land on the medium from further back)
                 {"shot_id": "dolly", "duration": 1.5, "subject": "a", "framing": "medium",
                  "camera": {"type": "dolly", "motion": [0, 0, -0.5], "easing": "linear", "distance_m": 0.95}},
                 {"shot_id": "zoom", "duration": 1.5, "subject": "a", "framing": "medium",
                  "camera": {"type": "zoom", "fov_end": 38, "easing": "linear", "distance_m": 0.95}}]}


@pytest.fixture(scope="module")
def moves(tmp_path_factory):
    out = tmp_path_factory.mktemp("moves")
    plan, qc = _render(PAN, out)
    return plan, qc, out


@pytest.mark.slow
def test_correct_moves_pass(moves):
    plan, qc, out = moves
    assert qc["ok"], qc["failures"]
    for shot in plan.shots:  # and from the plan's geometry alone, as with --no-controls
        entry = check_shot(plan, shot, out / "shots" / f"{shot.shot_id}.mp4", None, controls={})
        assert entry["ok"], (shot.shot_id, entry["failures"])


def test_tracks_on_a_straight_edge_are_not_used():
    """A lone straight edge (a building against the sky) says nothing about motion along it:
    Lucas-Kanade slides there (the aperture problem). Its corners are kept, its middle is not."""
    import cv2

    from daotai.qc.camera_tracking import TrackerConfig, _corner_ratio, _track

    grey = np.full((180, 320), 40, np.uint8)
    cv2.fillPoly(grey, [np.array([[60, 179], [140, 0], [319, 0], [319, 179]], np.int32)], 200)  # one long edge
    cv2.rectangle(grey, (230, 70), (270, 110), 90, -1)  # a patch with four corners
    moved = np.roll(grey, 2, axis=0)  # the picture moves down 2 px (a tilt up)
    start, end, found = _track(grey, moved, TrackerConfig(quality=0.001, min_distance=4.0))
    assert found > len(start) > 0
    along_edge = np.abs((start[:, 0] - 60) * 179 - (start[:, 1] - 179) * (140 - 60)) / np.hypot(80, 179) < 3
    inner = along_edge & (start[:, 1] > 20) & (start[:, 1] < 160)
    assert not inner.any(), start[inner]
    corners = np.array([[230, 70], [270, 70], [230, 110], [270, 110]], np.float32)
    assert (_corner_ratio(grey, corners, 21) > 0.05).all()
    near = np.linalg.norm(start[:, None] - corners[None], axis=2).min(axis=0) < 4
    assert near.sum() >= 3
    assert np.allclose(end - start, [0, 2], atol=0.3)  # what is kept follows the picture


@pytest.mark.parametrize("controls", [True, False], ids=["controls", "no-controls"])
def test_reversed_pan_fails(moves, tmp_path, controls):
    plan, _, out = moves
    frames = list(decode_frames(out / "shots" / "pan.mp4"))[::-1]
    reversed_pan = _rewrite(out / "shots" / "pan.mp4", tmp_path / "pan.mp4", frames, plan.fps)
    shot = plan.shot("pan")
    depth = {"depth": out / "control" / "pan_depth.mkv", "mask": out / "control" / "pan_mask.mkv"}
    entry = check_shot(plan, shot, reversed_pan, None, controls=depth if controls else {})
    assert not entry["ok"]
    horizontal = _component(entry, "horizontal")
    assert horizontal["direction_ok"] is False
    assert entry["camera"]["summary"].startswith("planned to pan right")


def test_frozen_picture_while_the_plan_moves_fails(moves, tmp_path):
    plan, _, out = moves
    frames = list(decode_frames(out / "shots" / "dolly.mp4"))
    frames = frames[:10] + [frames[10]] * (len(frames) - 10)  # the picture stops at frame 10
    frozen = _rewrite(out / "shots" / "dolly.mp4", tmp_path / "dolly.mp4", frames, plan.fps)
    entry = check_shot(plan, plan.shot("dolly"), frozen, None,
                       controls={"depth": out / "control" / "dolly_depth.mkv",
                                 "mask": out / "control" / "dolly_mask.mkv"})
    assert not entry["ok"]
    assert entry["failures"][0].startswith("picture frozen for")
    assert entry["frames"]["frozen_faulty"] and entry["frames"]["frozen_faulty"][0][0] <= 11


@pytest.mark.parametrize("controls", [True, False], ids=["controls", "no-controls"])
def test_zoom_where_a_dolly_was_asked_fails(moves, controls):
    plan, _, out = moves
    shot = plan.shot("dolly")
    depth = {"depth": out / "control" / "dolly_depth.mkv", "mask": out / "control" / "dolly_mask.mkv"}
    entry = check_shot(plan, shot, out / "shots" / "zoom.mp4", None, controls=depth if controls else {})
    assert not entry["ok"], entry["camera"]["summary"]
    assert any(f.startswith("camera:") for f in entry["failures"])


# --------------------------------------------------------------------------- encode fidelity


def test_fidelity_spread_is_a_warning_and_bad_frames_fail():
    """PSNR's spread follows content (a push-in ending on a plain shirt), so it only warns; a low
    mean or one starved frame fails with what to do; near-flat frames are left out."""
    from daotai.qc.fidelity import check_fidelity

    rng = np.random.default_rng(3)
    busy = rng.integers(0, 256, (90, 160, 3), dtype=np.uint8)
    flat = np.full((90, 160, 3), 120, np.uint8)

    def noisy(frame, sigma):
        return np.clip(frame + rng.normal(0, sigma, frame.shape), 0, 255).astype(np.uint8)

    # every frame fine (38.9 to 43 dB), spread 1.5 dB: a warning, not a failure
    samples = {i: busy for i in range(8)}
    decoded = {i: noisy(busy, 1.8 if i % 2 else 2.9) for i in range(8)}
    entry, failures, warnings = check_fidelity(samples, decoded)
    assert failures == [] and entry["psnr_std_db"] > 1.2
    assert len(warnings) == 1 and "nothing to fix" in warnings[0]
    # a flat frame's PSNR says nothing: left out, named in the entry
    samples[8], decoded[8] = flat, noisy(flat, 0.3)
    entry, failures, _ = check_fidelity(samples, decoded)
    assert entry["frames_flat_excluded"] == [8] and failures == []
    # one starved frame fails, with the frame and the remedy
    decoded[3] = noisy(busy, 6.0)
    entry, failures, _ = check_fidelity(samples, decoded)
    assert entry["psnr_min_frame"] == 3
    assert len(failures) == 1 and "frame 3" in failures[0] and "--codec prores" in failures[0]
    # a low mean fails
    decoded = {i: noisy(busy, 4.0) for i in range(8)}
    _, failures, _ = check_fidelity({i: busy for i in range(8)}, decoded)
    assert len(failures) == 1 and "on average" in failures[0]


def test_verdicts_agree_and_fail_first(moves, tmp_path):
    """A picture frozen while the plan moves is never beside 'the camera moved as planned'."""
    plan, _, out = moves
    frames = list(decode_frames(out / "shots" / "pan.mp4"))
    frames = frames[:6] + [frames[6]] * 14 + frames[20:]  # a 14-frame freeze inside a correct pan
    held = _rewrite(out / "shots" / "pan.mp4", tmp_path / "pan.mp4", frames, plan.fps)
    entry = check_shot(plan, plan.shot("pan"), held, None,
                       controls={"depth": out / "control" / "pan_depth.mkv", "mask": out / "control" / "pan_mask.mkv"})
    assert not entry["ok"]
    assert entry["camera"]["ok"] is False and "as planned" not in entry["camera"]["summary"].split(";")[0]
    checks = [v["check"] for v in entry["verdicts"]]
    assert len(checks) == len(set(checks))  # one verdict per check
    oks = [v["ok"] for v in entry["verdicts"]]
    assert oks == sorted(oks)  # failing verdicts first
    assert entry["summary"].startswith("picture frozen for")


def test_a_planned_move_is_never_summarised_as_holding_still(tmp_path):
    data = {"size": "480x270", "scene": {"name": "office"}, "characters": [{"id": "a"}],
            "shots": [{"shot_id": "creep", "duration": 1, "subject": "a", "framing": "wide",
                       "camera": {"type": "dolly", "motion": [0, 0, -0.1]}}]}
    _, qc = _render(data, tmp_path / "out")
    entry = _entry(qc, "creep")
    assert entry["ok"], entry["failures"]
    assert "holds still" not in entry["camera"]["summary"]
    assert entry["camera"]["summary"].startswith("planned to dolly in")


# --------------------------------------------------------------------------- subject visibility


FACE_TO_FACE = {"size": "480x270", "scene": {"name": "office"},
                "characters": [{"id": "a", "position": [0, 0], "facing": 90},
                               {"id": "b", "position": [1.2, 0], "facing": -90}],
                "shots": [{"shot_id": "clear", "duration": 1.5, "subject": "a", "framing": "wide",
                           "camera": {"type": "orbit", "orbit": -90}},
                          # b steps onto the line between the lens and a in the first 0.3 s and stays there
                          # (the planner now stages a master so that nobody starts on that line).
                          {"shot_id": "hidden", "duration": 1.5, "subject": "a", "framing": "wide",
                           "blocking": [{"character": "b", "to": [0.18, 1.43], "start": 0, "end": 0.3}]}]}


@pytest.mark.parametrize("controls", [True, False], ids=["mask", "scene-model"])
def test_subject_hidden_in_a_face_to_face_master_fails(tmp_path, controls):
    """In the master b steps in front of a, the subject, and stays: a is hidden for most of the shot."""
    _, qc = _render(FACE_TO_FACE, tmp_path / "out", controls=controls)
    clear, hidden = _entry(qc, "clear"), _entry(qc, "hidden")
    assert clear["ok"], clear["failures"]
    assert clear["subject"]["frames_hidden"] == 0
    assert not hidden["ok"]
    subject = hidden["subject"]
    assert subject["source"] == ("mask" if controls else "scene_model")
    assert subject["blocked_by"] == "b" and subject["frames_hidden"] > 0.25 * subject["frames_checked"]
    assert [f for f in hidden["failures"] if not f.startswith("subject a hidden behind b")] == []


WIDE_DOLLY_AND_ZOOM = {"size": "preview", "seed": 3, "scene": {"name": "office"},
                       "characters": [{"id": "a", "height": 1.75, "position": [0, 0]}],
                       "shots": [{"shot_id": "dolly", "duration": 2, "subject": "a", "framing": "wide",
                                  "camera": {"type": "dolly", "direction": "in"}},
                                 {"shot_id": "zoom", "duration": 2, "subject": "a", "framing": "wide",
                                  "camera": {"type": "zoom", "direction": "in"}}]}


@pytest.mark.slow
def test_a_zoom_is_told_from_a_dolly_by_its_missing_depth(tmp_path):
    """A wide zoom's picture grows much like the wide dolly's, within the error limit; what it
    lacks is the dolly's parallax: one image-wide zoom fits it far better than the plan does."""
    plan, qc = _render(WIDE_DOLLY_AND_ZOOM, tmp_path / "out")
    assert qc["ok"], qc["failures"]
    dolly = _entry(qc, "dolly")["camera"]
    assert dolly["parallax_missing"] is False and dolly["plan_fit_px"] < dolly["plain_fit_px"]
    out = tmp_path / "out"
    entry = check_shot(plan, plan.shot("dolly"), out / "shots" / "zoom.mp4", None,
                       controls={"depth": out / "control" / "dolly_depth.mkv", "mask": out / "control" / "dolly_mask.mkv"})
    assert not entry["ok"] and entry["camera"]["parallax_missing"]
    assert entry["camera"]["summary"].startswith("moves like one image-wide zoom or pan, without the depth")
    assert "dollies" not in entry["camera"]["summary"]



# --------------------------------------------------------------------------- found by bench/qc.py


LONG_LENS_DOLLY_ZOOM = {"size": "preview", "seed": 7, "scene": {"name": "office"},
                        "characters": [{"id": "a", "height": 1.75, "position": [0, 0]}],
                        "shots": [{"shot_id": "vertigo", "duration": 1.5, "subject": "a",
                                   "framing": "medium_close_up", "angle": "low",
                                   "camera": {"type": "dolly_zoom", "direction": "in", "fov": 16.07}}]}


def test_a_long_lens_dolly_zoom_against_the_sky_is_not_frozen(tmp_path):
    """At 85 mm from below, a dolly zoom keeps the subject's size and widens only the sky behind
    her: its first half second changes the picture by under one code value, though the plan
    moves the sky's pixels 20 px. A still run there matches the plan; the QC called it frozen."""
    plan, qc = _render(LONG_LENS_DOLLY_ZOOM, tmp_path / "out")
    entry = _entry(qc, "vertigo")
    assert entry["frames"]["frozen_faulty"] == [], entry["summary"]
    assert "frames" not in {v["check"] for v in entry["verdicts"] if not v["ok"]}
    assert "stands still" not in entry["camera"]["summary"]
    # a real hold in the same shot, where the sky's widening is plain to see, is still a fault
    out = tmp_path / "out"
    frames = list(decode_frames(out / "shots" / "vertigo.mp4"))
    held = frames[:8] + [frames[8]] * (len(frames) - 8)
    broken = _rewrite(out / "shots" / "vertigo.mp4", tmp_path / "held.mp4", held, plan.fps)
    entry = check_shot(plan, plan.shots[0], broken, None,
                       controls={"depth": out / "control" / "vertigo_depth.mkv",
                                 "mask": out / "control" / "vertigo_mask.mkv"})
    assert entry["frames"]["frozen_faulty"], entry["frames"]


def test_a_file_longer_than_planned_fails_its_format_and_is_still_checked(moves, tmp_path):
    """A backend that returns too many frames (the last one held) used to crash the QC: the
    freeze past the plan's end and the camera check's extra frames; now the format fails."""
    plan, _, out = moves
    frames = list(decode_frames(out / "shots" / "pan.mp4"))
    longer = _rewrite(out / "shots" / "pan.mp4", tmp_path / "pan.mp4", frames + [frames[-1]] * 20, plan.fps)
    entry = check_shot(plan, plan.shot("pan"), longer, None,
                       controls={"depth": out / "control" / "pan_depth.mkv", "mask": out / "control" / "pan_mask.mkv"})
    assert not entry["ok"]
    assert entry["failures"][0] == f"{len(frames) + 20} frames, the plan has {len(frames)}"
    assert entry["camera"]["frames_seen"] == len(frames)


def test_a_move_over_flat_picture_changes_nothing():
    """warped_change: how far a picture drifts under a planned flow; flat sky does not."""
    from daotai.qc.metrics import warped_change

    us, vs = np.meshgrid((np.arange(16) + 0.5) * 20, (np.arange(9) + 0.5) * 20)
    grid = np.stack([us, vs], -1).reshape(-1, 2)  # a 320 x 180 frame
    flow = np.tile([6.0, 0.0], (len(grid), 1))  # everything 6 px right
    flat = np.full((180, 320, 3), 140, np.uint8)
    assert warped_change(flat, grid, flow, (320, 180)) == 0.0
    stripes = flat.copy()
    stripes[:, ::8] = 20
    assert warped_change(stripes, grid, flow, (320, 180)) > 10.0
    flow[:, 0] = np.inf  # points that leave the view move nothing here
    assert warped_change(stripes, grid, flow, (320, 180)) == 0.0


LONG_LENS_TRUCK = {"size": "preview", "seed": 7, "scene": {"name": "office"},
                   "characters": [{"id": "a", "height": 1.75, "position": [0.6, 0.2]},
                                  {"id": "b", "height": 1.7, "position": [2.5, -3.0], "facing": 90}],
                   "shots": [{"shot_id": "truck", "duration": 1.5, "subject": "a", "framing": "full",
                              "angle": "low", "camera": {"type": "truck", "direction": "right", "fov": 10.16}}]}


def test_a_long_lens_truck_past_set_pieces_is_checked(tmp_path):
    """At 135 mm a truck sweeps desks and screens across the frame; a flat-shaded set has its
    corners on their outlines, where the tracker's window holds both sides, and 34 of 35 frame
    pairs were skipped as too little texture (a reversed truck passed). Such tracks may follow
    either side now: the shot is checked, and the truck played backwards fails."""
    plan, qc = _render(LONG_LENS_TRUCK, tmp_path / "out")
    entry = _entry(qc, "truck")
    assert entry["ok"], entry["failures"]
    camera = entry["camera"]
    pairs = camera["pairs_evaluated"] + camera["pairs_skipped"]  # 35 dense, 11 sampling every third frame
    assert camera["checked"] and camera["pairs_evaluated"] >= 0.55 * pairs, camera["summary"]  # was 1 of 35
    assert _component(entry, "horizontal")["direction_ok"] is True
    out = tmp_path / "out"
    frames = list(decode_frames(out / "shots" / "truck.mp4"))[::-1]
    backwards = _rewrite(out / "shots" / "truck.mp4", tmp_path / "reversed.mp4", frames, plan.fps)
    entry = check_shot(plan, plan.shots[0], backwards, None,
                       controls={"depth": out / "control" / "truck_depth.mkv", "mask": out / "control" / "truck_mask.mkv"})
    assert not entry["ok"] and _component(entry, "horizontal")["direction_ok"] is False, entry["summary"]


def test_the_fidelity_verdict_says_near_flat_frames_were_left_out(moves):
    plan, _, out = moves
    frames = list(decode_frames(out / "shots" / "pan.mp4"))
    samples = {i: frames[i] for i in (0, 10, 20)}
    samples[5] = np.full_like(frames[5], 90)  # a rendered frame with nothing in it: its PSNR means nothing
    entry = check_shot(plan, plan.shot("pan"), out / "shots" / "pan.mp4", samples)
    assert entry["fidelity"]["frames_flat_excluded"] == [5]
    verdict = next(v for v in entry["verdicts"] if v["check"] == "fidelity")
    assert verdict["ok"] and verdict["text"].endswith("(1 near-flat frame left out)"), verdict


@pytest.mark.parametrize("share, ok", [(0.0, True), (0.2, True), (0.5, False), (1.0, False)])
def test_a_subject_hidden_for_more_than_a_quarter_of_the_shot_fails(share, ok):
    """b stands on the line from the lens to a for the first ``share`` of the shot (scene model)."""
    from daotai.qc.subject import check_subject

    data = {"size": "preview", "characters": [{"id": "a", "position": [0, 0]}, {"id": "b", "position": [4, 4]}],
            "shots": [{"shot_id": "s", "duration": 2, "subject": "a", "framing": "medium", "camera": "static"}]}
    plan = plan_script(validate_script(data))
    shot = plan.shots[0]
    frames = []
    for i, people in enumerate(shot.character_frames):
        lens = np.array(shot.cameras[i].cam_to_world).reshape(4, 4)[:3, 3]
        a = next(p for p in people if p.id == "a")
        between = tuple((np.array(a.position) + lens[[0, 2]]) / 2)
        hide = i < share * len(shot.character_frames)
        frames.append(tuple(p.model_copy(update={"position": between}) if p.id == "b" and hide else p for p in people))
    entry = check_subject(plan, shot.model_copy(update={"character_frames": tuple(frames)}))
    assert entry["ok"] is ok, entry
    assert (entry["blocked_by"] == "b") is (share > 0)
