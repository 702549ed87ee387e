"""Framing checked: each shot size puts the subject's head and body at the share of the frame it names.

Bands (share of the frame height, subject standing, eye level, documented in docs/conventions.md):
the head is crown to chin of the mannequin, the body crown to soles.
"""

from __future__ import annotations

import numpy as np
import pytest

from daotai.plan import geometry
from daotai.plan.planner import plan_script
from daotai.render.previz import PrevizRenderer, RenderSettings
from daotai.render.previz.backend import environment_for_plan, frame_states
from daotai.render.previz.meshes import HEAD_C, HEAD_R, PRIMITIVES, figure_instances, primitive_meshes
from daotai.script.load import validate_script

# framing: (what is measured, low, high, the crown in frame, the soles in frame)
BANDS = {
    "extreme_close_up": ("head", 0.90, 10.0, False, False),  # the face fills the frame, crown and chin cut
    "close_up": ("head", 0.40, 0.70, True, False),
    "medium_close_up": ("head", 0.25, 0.42, True, False),
    "medium": ("head", 0.16, 0.28, True, False),
    "medium_full": ("head", 0.12, 0.20, True, False),
    "full": ("body", 0.65, 0.92, True, True),
    "wide": ("body", 0.20, 0.42, True, True),
    "extreme_wide": ("body", 0.05, 0.16, True, True),
}
W, H = 320, 180


def _plan(framing: str, height: float, fov: float):
    data = {
        "size": {"width": W, "height": H}, "scene": {"name": "stage", "set_pieces": []},
        "characters": [{"id": "a", "height": height}],
        "shots": [{"shot_id": "s", "duration": 0.5, "framing": framing, "camera": {"type": "static", "fov": fov}}],
    }
    return plan_script(validate_script(data))


def _rows(plan):
    """Image rows (v) of the subject's crown, chin and soles at the first frame, from the plan's camera."""
    shot = plan.shots[0]
    person = shot.character_frames[0][0]
    h = plan.characters[0].height
    x, z = person.position
    points = np.array([[x, 1.0 * h, z], [x, (HEAD_C[1] - HEAD_R[1]) * h, z], [x, 0.0, z]])
    cam = shot.cameras[0]
    intr = geometry.intrinsics_from_matrix(np.array(cam.K).reshape(3, 3))
    uv, depth = geometry.project(points, np.array(cam.cam_to_world).reshape(4, 4), intr)
    assert np.all(depth > 0)
    return uv[:, 1]


@pytest.mark.parametrize("framing", list(BANDS))
@pytest.mark.parametrize(("height", "fov"), [(1.75, 60.0), (1.4, 40.0), (1.9, 75.0)])
def test_subject_fills_its_framing_band(framing, height, fov):
    what, low, high, crown_in, soles_in = BANDS[framing]
    crown, chin, soles = _rows(_plan(framing, height, fov))
    share = ((chin - crown) if what == "head" else (soles - crown)) / H
    if framing in ("wide", "extreme_wide"):  # wide sizes frame the set, not the person: scale with height
        low, high = low * height / 1.75, high * height / 1.75
    assert low <= share <= high, (framing, height, fov, share)
    assert (0 <= crown < H) == crown_in, (framing, crown)
    if soles_in:
        assert 0 <= soles < H, (framing, soles)
    else:
        assert soles >= H, (framing, soles)


def test_sizes_get_tighter_in_order():
    shares = [(lambda r: (r[1] - r[0]) / H)(_rows(_plan(f, 1.75, 60.0))) for f in BANDS]
    assert all(a > b for a, b in zip(shares, shares[1:], strict=False))


def _figure_rows(state) -> tuple[float, float]:
    """Top and bottom image rows of every vertex of the first figure, projected with the frame's camera."""
    meshes = primitive_meshes()
    models, _, prims = figure_instances(state.figures[0])
    verts = np.concatenate([meshes[PRIMITIVES[int(p)]][:, :3] @ m[:3, :3].T + m[:3, 3]
                            for m, p in zip(models, prims, strict=True)])
    uv, depth = geometry.project(verts, state.cam_to_world, geometry.intrinsics_from_fov(state.fov_deg, W, H))
    v = uv[depth > 0, 1]
    return float(v.min()), float(v.max())


@pytest.mark.parametrize("framing", list(BANDS))
def test_rendered_mask_agrees_with_the_figure_and_the_framing(framing):
    """The subject's mask spans the rows its geometry projects to, and its crown is where the band says."""
    plan = _plan(framing, 1.75, 60.0)
    crown, _, soles = _rows(plan)
    state = next(frame_states(plan, plan.shots[0]))
    with PrevizRenderer(RenderSettings(W, H, labels=False), environment_for_plan(plan)) as r:
        frame = r.render(state)
    rows = np.nonzero((frame.masks == 1).any(axis=1))[0]
    top, bottom = _figure_rows(state)
    assert rows.min() == max(0, int(np.floor(top + 0.5))) or abs(rows.min() - top) <= 1.0, (framing, rows.min(), top)
    assert rows.max() == min(H - 1, int(np.floor(bottom - 0.5))) or abs(rows.max() - bottom) <= 1.0, \
        (framing, rows.max(), bottom)
    # the hair and the toes reach a little beyond the centre line's crown and soles, never far
    assert -0.06 * H <= top - crown <= 0.01 * H or crown < 0
    assert soles >= H or -0.01 * H <= bottom - soles <= 0.06 * H


def test_over_the_shoulder_holds_the_subject_at_about_a_medium_close_up():
    data = {
        "size": {"width": W, "height": H}, "scene": {"name": "stage", "set_pieces": []},
        "characters": [{"id": "a"}, {"id": "b", "height": 1.85}],
        "shots": [{"shot_id": "s", "duration": 0.5, "framing": "OTS", "subject": "a"}],
    }
    plan = plan_script(validate_script(data))
    crown, chin, _ = _rows(plan)
    assert 0 <= crown and 0.18 <= (chin - crown) / H <= 0.36

