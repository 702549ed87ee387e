"""Continuity references (carry_looks): scoring characters in finished frames by the plan's masks, and later
MiniMax-H3 shots receiving the chosen frames as extra picture references (tiny random model, real pipeline)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from daotai.events import Frame, Notice
from daotai.render.base import RenderJob, RunContext
from daotai.render.carry_looks import (
    LookBook,
    best_looks,
    frame_looks,
    frontality,
    sample_indexes,
)

TESTS = Path(__file__).parent
SCRIPT = {
    "title": "carry",
    "fps": 24,
    "size": [112, 64],
    "seed": 11,
    "scene": "office",
    "characters": [{"id": "lin", "appearance": "blue shirt"}, {"id": "mara", "appearance": "glasses"}],
    "shots": [
        # A camera move: ref2va with colour swatches for both.
        {"shot_id": "s1", "duration": 1, "subject": "lin", "camera": {"type": "dolly", "motion": [0, 0, -0.5]}},
        # Static, no reference images: t2va, unless a look of lin is carried in.
        {"shot_id": "s2", "duration": 1, "subject": "lin", "characters": ["lin"]},
    ],
}


def plan_of(data: dict):
    from daotai.plan.planner import plan_script
    from daotai.script.load import parse_script

    return plan_script(parse_script(json.dumps(data)))


def previz_samples(plan, shot, backend=None) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
    """The previz RGB and masks of a shot at the sampled indexes."""
    from daotai.render.previz.backend import PrevizBackend

    previz = backend or PrevizBackend(labels=False)
    wanted = set(sample_indexes(shot.frames))
    rgb, masks = {}, {}
    try:
        for event in previz.render(RenderJob(plan, shot, controls=True), RunContext()):
            if isinstance(event, Frame) and event.index in wanted:
                rgb[event.index], masks[event.index] = event.rgb, event.mask
    finally:
        if backend is None:
            previz.close()
    return rgb, masks


# ------------------------------------------------------------------ scoring


def test_frontality_and_sampling_rules():
    assert frontality((0, 0), 0.0, (0, 5)) == pytest.approx(1.0)  # facing +z, camera on +z
    assert frontality((0, 0), 180.0, (0, 5)) == 0.0  # its back to the camera
    assert frontality((0, 0), 90.0, (0, 5)) == pytest.approx(0.0, abs=1e-9)  # profile
    assert frontality((0, 0), 45.0, (0, 5)) == pytest.approx(np.cos(np.radians(45)))
    assert sample_indexes(5) == [0, 1, 2, 3, 4]
    picked = sample_indexes(100)
    assert len(picked) == 16 and picked[0] == 0 and picked[-1] == 99


def test_frontal_large_sharp_figures_score_higher():
    data = {"size": [320, 180], "scene": "office", "characters": [{"id": "lin"}],
            "shots": [{"shot_id": "front", "duration": 0.25, "framing": "medium"},
                      {"shot_id": "far", "duration": 0.25, "framing": "extreme_wide"}]}
    plan = plan_of(data)
    front = plan.shots[0]
    rgb, masks = previz_samples(plan, front)
    look = best_looks(front, rgb, masks)["lin"]
    assert look.front > 0.9 and look.size == 1.0 and 0 < look.sharp < 1
    # The same frame with the figure turned away from the camera scores nothing.
    turned = front.model_copy(update={"character_frames": tuple(
        tuple(f.model_copy(update={"facing": f.facing + 180.0}) for f in frame) for frame in front.character_frames)})
    assert best_looks(turned, rgb, masks) == {}
    # Blurred, it scores lower on sharpness only.
    import cv2

    blurred = cv2.GaussianBlur(rgb[look.frame], (0, 0), 2.0)
    [soft] = frame_looks(front, look.frame, blurred, masks[look.frame])
    assert soft.sharp < look.sharp * 0.7 and soft.size == look.size and soft.front == look.front
    # A tiny figure (extreme wide) is not worth carrying.
    far = plan.shots[1]
    assert best_looks(far, *previz_samples(plan, far)) == {}
    # A figure cut by the frame's side is skipped; the crop is the figure's box with a margin.
    index = sorted(rgb)[0]
    mask = masks[index]
    [found] = frame_looks(front, index, rgb[index], mask)
    columns = np.flatnonzero((mask == 1).any(axis=0))
    rows = np.flatnonzero((mask == 1).any(axis=1))
    assert found.image.shape[1] > columns[-1] + 1 - columns[0] and found.image.shape[0] >= rows[-1] + 1 - rows[0]
    at_edge = np.roll(mask, -int(columns[0]), axis=1)  # the same figure, moved to touch the left edge
    assert frame_looks(front, index, rgb[index], at_edge) == []


def test_the_look_book_keeps_each_characters_best_and_respects_the_room():
    plan = plan_of(SCRIPT)
    s1, s2 = plan.shots
    book = LookBook()
    looks = best_looks(s1, *previz_samples(plan, s1))
    assert set(looks) == {"lin"} or set(looks) == {"lin", "mara"}
    assert book.add(looks.values()) == list(looks.values())
    assert book.for_shot("s1", ["lin"], 5) == []  # never a shot's own look
    assert [look.character for look in book.for_shot("s2", ["lin", "mara"], 5)] == list(looks)
    assert len(book.for_shot("s2", ["lin", "mara"], 1)) == 1
    assert book.for_shot("s2", ["lin"], 0) == []
    weaker = looks["lin"].__class__(**{**looks["lin"].__dict__, "shot_id": "s9", "size": looks["lin"].size / 2})
    assert book.add([weaker]) == [] and book.best["lin"] is looks["lin"]


def test_the_service_takes_carry_looks_as_an_h3_option(tmp_path):
    pytest.importorskip("fastapi")
    httpx = pytest.importorskip("httpx")
    from daotai.server.app import create_app
    from daotai.server.testing import thread_server

    app = create_app(tmp_path / "data", start_dispatcher=False)
    with thread_server(app) as url:
        queued = httpx.post(f"{url}/v1/jobs", params={"backend": "h3"}, json={**SCRIPT, "options": {"carry_looks": True}})
        assert queued.status_code == 202, queued.text
        assert json.loads(app.state.store.get(queued.json()["id"]).options) == {"carry_looks": True}
        refused = httpx.post(f"{url}/v1/jobs", params={"backend": "previz"},
                             json={**SCRIPT, "options": {"carry_looks": True}})
        assert refused.status_code == 422 and refused.json()["issues"][0]["path"] == "options.carry_looks"


# ------------------------------------------------------------------ MiniMax-H3 receives the chosen frames

pytest.importorskip("torch")
pytest.importorskip("diffusers")
pytest.importorskip("transformers")


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "config"
    monkeypatch.setenv("DAOTAI_CONFIG_DIR", str(folder))
    return folder


def test_a_later_shot_receives_the_best_frame_of_an_earlier_one(tiny_h3, tmp_path, monkeypatch):
    from diffusers.modular_pipelines import MiniMaxH3ModularPipeline
    from diffusers.modular_pipelines.minimax_h3 import MiniMaxH3ImageReference, MiniMaxH3VideoReference

    from daotai.render.h3 import H3Backend
    from daotai.render.spec import BackendEnv

    calls: list[dict] = []
    original = MiniMaxH3ModularPipeline.__call__

    def recording_call(self, *args, **kwargs):  # the real pipeline runs; its inputs are kept
        calls.append(kwargs)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(MiniMaxH3ModularPipeline, "__call__", recording_call)
    plan = plan_of(SCRIPT)
    s1, s2 = plan.shots
    backend = H3Backend(env=BackendEnv(reference_root=tmp_path), model=str(tiny_h3), device="cpu", steps=2,
                        accept_licence=True, carry_looks=True)
    try:
        first = list(backend.render(RenderJob(plan, s1, controls=False), RunContext()))
        second = list(backend.render(RenderJob(plan, s2, controls=False), RunContext()))
    finally:
        backend.close()
    # What s1 delivered, scored by its plan masks, independently of the backend's bookkeeping.
    delivered = {e.index: e.rgb for e in first if isinstance(e, Frame) and e.index in set(sample_indexes(s1.frames))}
    _, masks = previz_samples(plan, s1)
    expected = best_looks(s1, delivered, masks)["lin"]
    assert len(calls) == 2
    references = calls[1]["references"]
    assert [type(r) for r in references] == [MiniMaxH3ImageReference, MiniMaxH3ImageReference, MiniMaxH3VideoReference]
    swatch, carried = np.asarray(references[0].image), np.asarray(references[1].image)
    assert (swatch == swatch[0, 0]).all()  # lin has no reference image: its colour swatch comes first
    assert np.array_equal(carried, expected.image)  # then its best frame of s1, cropped to the figure
    assert "<Picture 2> shows lin in an earlier shot: keep that look" in calls[1]["prompt"]
    notices = [e.text for e in second if isinstance(e, Notice)]
    assert any("workflow ref2va (looks carried from earlier shots (carry_looks))" in n for n in notices)
    assert any(f"<Picture 2> lin (carried look: lin from s1 frame {expected.frame} (score {expected.score:.2f}" in n
               for n in notices)
    kept = [e.text for e in first if isinstance(e, Notice) and "carry_looks: kept" in e.text]
    assert kept and f"lin from s1 frame {expected.frame}" in kept[0]


@pytest.mark.slow
def test_carry_looks_through_the_command_line_records_the_frames_in_the_manifest(tiny_h3, tmp_path):
    script = tmp_path / "carry.json"
    script.write_text(json.dumps(SCRIPT))
    out = tmp_path / "out"
    code = ("import sys; sys.path.insert(0, sys.argv.pop(1)); import builders; builders.qwen3vl_without_torchvision(); "
            "from daotai.cli import main; sys.argv[0] = 'daotai'; main()")
    done = subprocess.run(
        [sys.executable, "-c", code, str(TESTS), "render", str(script), "--backend", "h3", "-O", f"model={tiny_h3}",
         "--device", "cpu", "--steps", "2", "-O", "accept_licence=true", "--carry-looks", "--cache", str(tmp_path / "cache"), "-o", str(out)],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "DAOTAI_DEBUG": "", "DAOTAI_NO_CACHE": ""})
    assert done.returncode == 0, done.stderr[-3000:]
    # A shot's pictures depend on the shots before it: nothing is read from or kept in the shot cache.
    assert "the shot cache is not used" in done.stdout + done.stderr
    assert not any(p.is_file() for p in (tmp_path / "cache").rglob("*"))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["settings"]["options"]["carry_looks"] is True
    notices = {s["shot_id"]: "\n".join(s["notices"]) for s in manifest["shots"]}
    assert "carry_looks: kept lin from s1 frame" in notices["s1"]
    assert "<Picture 2> lin (carried look: lin from s1 frame" in notices["s2"]
    assert "carried look" not in notices["s1"]  # the first shot has nothing to carry
