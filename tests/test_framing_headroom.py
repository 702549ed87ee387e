"""Framing that respects the face, checked on rendered frames: headroom by size and move (the
mask's top row), the eye line at the upper third for close sizes, a push that lands on the framing
it names, lead room on the side a subject faces, seated subjects framed at their seated height,
labels off every face (frames with and without labels, diffed), and the planner's warning when the
script's own camera cuts the head off. Rules: ``daotai.plan.headroom.HEADROOM``."""

from __future__ import annotations

import math

import numpy as np
import pytest

from daotai.plan import geometry
from daotai.plan.headroom import EYE_LINE_TOLERANCE, HEADROOM, SEATED_HEAD_DROP, head_rows
from daotai.plan.planner import plan_script
from daotai.render.previz import PrevizRenderer, RenderSettings
from daotai.render.previz.backend import PrevizOptions, environment_for_plan, frame_states
from daotai.render.previz.meshes import HEAD_C, HEAD_R, _sitting_drop
from daotai.script.load import validate_script

W, H = 320, 180
SIZES = ("extreme_close_up", "close_up", "medium_close_up", "medium", "medium_full", "full", "wide", "extreme_wide")
MOVES = ("static", "push_in", "zoom_in", "pull_out")
LANDS = ("push_in", "zoom_in")  # moves that end on the framing the shot names
PX = 1.0 / H  # one pixel row as a share of the frame height


def _plan(shots, characters=({"id": "a"},)):
    data = {"size": {"width": W, "height": H}, "scene": {"name": "stage", "set_pieces": []},
            "characters": list(characters), "shots": shots}
    return plan_script(validate_script(data))


def _one(framing, camera="static", **shot):
    return _plan([{"shot_id": "s", "duration": 0.5, "framing": framing, "camera": camera, **shot}])


@pytest.fixture(scope="module")
def renderers():
    env = environment_for_plan(_one("medium"))
    with PrevizRenderer(RenderSettings(W, H, labels=False), env) as off, \
            PrevizRenderer(RenderSettings(W, H, labels=True), env) as on:
        yield off, on


def _frames(renderer, plan, indexes=(0, -1)):
    shot = plan.shots[0]
    states = list(frame_states(plan, shot))
    return [renderer.render(states[i]) for i in indexes]


def _top_row(mask, value=1):
    rows = np.flatnonzero((mask == value).any(axis=1))
    assert rows.size, "the subject is not in the picture"
    return int(rows[0])


def _rows_of(shot, i, height=1.75, drop=0.0):
    cam = shot.cameras[i]
    person = next(p for p in shot.character_frames[i] if p.id == shot.subject)
    return head_rows(np.array(cam.cam_to_world).reshape(4, 4), cam.fov, person.position, height, drop)


@pytest.mark.parametrize("framing", SIZES)
def test_head_in_frame_and_eye_line_for_every_size_and_move(renderers, framing):
    off, _ = renderers
    rule = HEADROOM[framing]
    static_mask = None
    for move in MOVES:
        plan = _one(framing, move)
        shot = plan.shots[0]
        first, last = _frames(off, plan)
        for i, frame in ((0, first), (-1, last)):
            crown, eye, _ = _rows_of(shot, i)
            top = _top_row(frame.masks)
            if rule.crown_margin is not None:
                # the mask's top row is the crown the plan predicts, and the margin holds at both ends
                assert abs(top / H - crown) <= 2 * PX, (framing, move, i, top, crown)
                assert top / H >= rule.crown_margin - PX, (framing, move, i, top / H)
            elif crown < 0:  # an extreme close-up may crop the crown: the face then touches the top edge
                assert top == 0
        framed = -1 if move in LANDS else 0
        assert shot.framing_frame == (shot.frames - 1 if move in LANDS else 0)
        if rule.eye_line is not None:
            _, eye, _ = _rows_of(shot, framed)
            assert abs(eye - rule.eye_line) <= EYE_LINE_TOLERANCE, (framing, move, eye)
        mask = (last if move in LANDS else first).masks == 1
        if move == "static":
            static_mask = mask
        elif move in LANDS:  # the push ends where the static shot of the same size stands (a zoom from
            # further back, with a flatter perspective) ...
            iou = (mask & static_mask).sum() / (mask | static_mask).sum()
            assert iou > (0.97 if move == "push_in" else 0.8), (framing, move, iou)
            # ... and starts wider: the subject smaller in the first frame
            assert (first.masks == 1).sum() < 0.8 * mask.sum(), (framing, move)


@pytest.mark.parametrize("move", LANDS)
def test_a_push_on_a_close_up_keeps_the_whole_head_with_its_margin(renderers, move):
    off, _ = renderers
    plan = _one("close_up", move)
    for frame in _frames(off, plan, range(plan.shots[0].frames)):
        assert _top_row(frame.masks) / H >= HEADROOM["close_up"].crown_margin - PX
    assert not plan.shots[0].warnings


def _screen_facing(shot, i):
    """+1 when the subject faces screen right at frame i, -1 screen left (its facing projected)."""
    cam = shot.cameras[i]
    person = next(p for p in shot.character_frames[i] if p.id == shot.subject)
    yaw = math.radians(person.facing)
    x, z = person.position
    points = np.array([[x, 1.5, z], [x + 0.1 * math.sin(yaw), 1.5, z + 0.1 * math.cos(yaw)]])
    uv, _ = geometry.project(points, np.array(cam.cam_to_world).reshape(4, 4),
                             geometry.intrinsics_from_matrix(np.array(cam.K).reshape(3, 3)))
    return float(np.sign(uv[1, 0] - uv[0, 0]))


DIALOGUE = ({"id": "a", "position": [-0.8, 0]}, {"id": "b", "position": [0.8, 0]})


@pytest.mark.parametrize(("framing", "camera", "characters"), [
    ("close_up", "static", DIALOGUE),  # a dialogue single: the subject looks across at b
    ("medium", "push_in", DIALOGUE),
    ("medium_close_up", {"type": "static", "side": "left"}, ({"id": "a"},)),  # a profile
    ("medium_close_up", {"type": "static", "side": "right"}, ({"id": "a"},)),
])
def test_lead_room_on_the_side_the_subject_faces(renderers, framing, camera, characters):
    off, _ = renderers
    plan = _plan([{"shot_id": "s", "duration": 0.5, "framing": framing, "camera": camera, "subject": "a"}],
                 characters)
    shot = plan.shots[0]
    i = shot.framing_frame
    mask = _frames(off, plan, (i,))[0].masks == 1
    # the head's column (the rows above the chin): off the centre, away from where the subject faces
    chin = int(math.ceil(_rows_of(shot, i)[1] * H)) + 6
    cols = np.flatnonzero(mask[:chin].any(axis=0))
    centre = (cols.min() + cols.max()) / 2.0
    facing = _screen_facing(shot, i)
    assert facing != 0.0
    assert (centre - W / 2.0) * facing < -W / 20.0, (framing, camera, centre, facing)


def test_seated_subject_is_framed_at_the_seated_height(renderers):
    off, _ = renderers
    assert SEATED_HEAD_DROP == pytest.approx(_sitting_drop(), abs=1e-3)  # the plan's drop is the rig's
    for framing in ("close_up", "medium_close_up", "medium"):
        seated = _one(framing, "static", pose="sit")
        standing = _one(framing, "static")
        shot = seated.shots[0]
        assert shot.character_frames[0][0].pose == "sit"
        top = _top_row(_frames(off, seated, (0,))[0].masks)
        crown, eye, _ = _rows_of(shot, 0, drop=SEATED_HEAD_DROP)
        assert abs(top / H - crown) <= 2 * PX
        assert top / H >= HEADROOM[framing].crown_margin - PX
        assert abs(eye - 1.0 / 3.0) <= EYE_LINE_TOLERANCE, (framing, eye)
        lens = np.array(shot.cameras[0].cam_to_world).reshape(4, 4)[1, 3]
        stand_lens = np.array(standing.shots[0].cameras[0].cam_to_world).reshape(4, 4)[1, 3]
        assert lens == pytest.approx(stand_lens - SEATED_HEAD_DROP * 1.75, abs=1e-6)


def _face_pixels(plan, frame, i):
    """(H, W) bool: every figure's mask pixels from the top of the head down to its chin row."""
    shot = plan.shots[0]
    cam = shot.cameras[i]
    out = np.zeros(frame.masks.shape, bool)
    heights = {c.id: c.height for c in plan.characters}
    for j, person in enumerate(shot.character_frames[i]):
        h = heights[person.id]
        x, z = person.position
        uv, depth = geometry.project(np.array([[x, (HEAD_C[1] - HEAD_R[1]) * h, z]]),
                                     np.array(cam.cam_to_world).reshape(4, 4),
                                     geometry.intrinsics_from_matrix(np.array(cam.K).reshape(3, 3)))
        chin = min(H, int(math.ceil(uv[0, 1])) + 1) if depth[0] > 0 else 0
        face = frame.masks == j + 1
        face[max(chin, 0):] = False
        out |= face
    return out


@pytest.mark.parametrize("framing", SIZES)
def test_labels_never_cover_a_face(renderers, framing):
    off, on = renderers
    drawn = 0
    for move in MOVES:
        for characters in (({"id": "a", "name": "Mia"},), DIALOGUE):
            plan = _plan([{"shot_id": "s", "duration": 0.5, "framing": framing, "camera": move, "subject": "a"}],
                         characters)
            states = list(frame_states(plan, plan.shots[0]))
            for i in (0, -1):
                a, b = on.render(states[i]), off.render(states[i])
                assert a.masks.tobytes() == b.masks.tobytes()
                label = np.any(a.rgb != b.rgb, axis=2)
                overlap = label & _face_pixels(plan, b, i)
                assert not overlap.any(), (framing, move, len(characters), i, int(overlap.sum()))
                drawn += int(label.any())
    if framing != "extreme_close_up":  # the face fills an extreme close-up: no room for a name there
        assert drawn == 2 * 2 * len(MOVES), (framing, drawn)  # ... elsewhere every frame is labelled


def test_labels_stay_on_by_default_and_off_when_asked():
    assert PrevizOptions().labels is True
    assert PrevizOptions(labels=False).labels is False


def test_a_script_camera_that_cuts_the_head_off_is_warned():
    # a lens 0.6 m from her, aimed at her chest: the frame ends at her brow
    cut = _one("close_up", {"type": "static", "distance_m": 0.6, "aim": [0, 1.25, 0]})
    warned = [w for w in cut.shots[0].warnings if "top of a's head" in w]
    assert warned and "first frame" in warned[0] and "move the camera back" in warned[0]
    crown = _rows_of(cut.shots[0], 0)[0]
    assert crown < 0  # the warning says what the frame shows
    # the same place aimed at her face keeps the head: no warning
    kept = _one("close_up", {"type": "static", "distance_m": 0.9})
    assert not [w for w in kept.shots[0].warnings if "head" in w]
    assert _rows_of(kept.shots[0], 0)[0] > 0
    # a push the script places ends past the head: said for the last frame
    pushed = _one("close_up", {"type": "dolly", "motion": [0, 0, -0.35], "distance_m": 0.65})
    assert [w for w in pushed.shots[0].warnings if "head off at the last frame" in w]


@pytest.mark.parametrize("angle", ["high", "low", "dutch", "birds_eye", "worms_eye"])
def test_headroom_holds_from_every_angle(angle):
    """The plan's head outline (the mask's top row within two pixels at eye level, above) keeps the
    margin at the first and last frame of every size and move, from above and below as well; a low
    push from far back starts on the floor line and still lands on its framing."""
    for framing in SIZES:
        margin = HEADROOM[framing].crown_margin
        for move in (*MOVES, "crane", "tilt"):
            shot = _one(framing, move, angle=angle).shots[0]
            for i in (0, -1):
                rows = _rows_of(shot, i)
                assert rows is not None
                if margin is not None:
                    assert rows[0] >= margin - PX, (angle, framing, move, i, rows[0])
            if move in LANDS:
                assert shot.framing_frame == shot.frames - 1
                cam = np.array(shot.cameras[0].cam_to_world).reshape(4, 4)
                assert cam[1, 3] >= 0.1  # never under the floor


@pytest.mark.parametrize("framing", ["close_up", "medium_close_up", "medium", "full"])
def test_the_camera_check_leaves_out_every_label_pixel(renderers, framing):
    """QC's camera check ignores the pixels previz may have labelled, beside a head near the top edge too."""
    from daotai.qc.controls import moving_on_their_own
    from daotai.qc.labels import label_names

    off, on = renderers
    for move in ("static", "push_in"):
        plan = _plan([{"shot_id": "s", "duration": 0.5, "framing": framing, "camera": move, "subject": "a"}],
                     DIALOGUE)
        shot = plan.shots[0]
        states = list(frame_states(plan, shot))
        for i in (0, shot.frames - 1):
            a, b = on.render(states[i]), off.render(states[i])
            label = np.any(a.rgb != b.rgb, axis=2)
            left_out = moving_on_their_own(shot, i, b.masks, label_names(plan, shot))
            assert label.any() and not (label & ~left_out).any(), (framing, move, i)


@pytest.mark.parametrize("seated", [False, True])
@pytest.mark.parametrize("framing", ["over_the_shoulder", "two_shot"])
def test_two_person_shots_keep_heads_and_labels_apart(renderers, framing, seated):
    """An over-the-shoulder keeps the subject's head in with its margin, a two-shot both heads, at
    both ends of every move, standing or both seated; no label lands on either face."""
    off, on = renderers
    margin = HEADROOM[framing].crown_margin
    pose = {"pose": {"a": "sit", "b": "sit"}} if seated else {}
    for move in MOVES:
        plan = _plan([{"shot_id": "s", "duration": 0.5, "framing": framing, "camera": move, "subject": "a", **pose}],
                     DIALOGUE)
        shot = plan.shots[0]
        states = list(frame_states(plan, shot))
        for i in (0, shot.frames - 1):
            a, b = on.render(states[i]), off.render(states[i])
            seen = (1,) if framing == "over_the_shoulder" else (1, 2)
            for value in seen:
                assert _top_row(b.masks, value) / H >= margin - PX, (framing, move, i, value)
            label = np.any(a.rgb != b.rgb, axis=2)
            assert label.any() and not (label & _face_pixels(plan, b, i)).any(), (framing, move, i)
