"""A small sample of bench/qc.py's corpus: correct previz shots pass the QC, every injected fault fails
the check that owns it. The full measurement is ``python bench/qc.py`` (``--quick`` for a short one)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from daotai.encode.read import decode_frames
from daotai.plan.layout import RenderLayout
from daotai.qc.shot import check_shot

ROOT = Path(__file__).resolve().parent.parent


def _bench():
    spec = importlib.util.spec_from_file_location("qc_bench", ROOT / "bench" / "qc.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


bench = _bench()

# One shot per kind of trouble the QC had: a low-angle push-in, a vertical move, a long-lens dolly
# zoom against the sky, a truck past close set pieces with walkers, and a dutch-angle zoom.
CASES = [
    bench.Case("push", "dolly", "in", "close_up", "low", 35, False),
    bench.Case("pedestal", "pedestal", "down", "medium", "high", 24, True),
    bench.Case("vertigo", "dolly_zoom", "in", "medium_close_up", "low", 85, False),
    bench.Case("truck", "truck", "right", "full", "low", 135, True),
    bench.Case("zoom", "zoom", "in", "full", "dutch", 50, False),
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp("corpus")
    plan, qc, _ = bench.render_corpus(CASES, "480x270", out)
    return plan, qc, out


@pytest.mark.slow
def test_correct_shots_pass(corpus):
    _, qc, _ = corpus
    for entry in qc["shots"]:
        assert entry["ok"], (entry["shot_id"], entry["failures"])


FAULTED = [  # (fault, the clip it is made from)
    ("reversed_move", "pedestal"),
    ("frozen_run", "truck"),  # a push lands on its close-up from a medium close-up: too slow a picture to hold
    ("dropped_frames", "truck"),
    ("wrong_move", "push"),
    ("wrong_move", "truck"),
    ("subject_hidden", "zoom"),
    ("black_frames", "vertigo"),
    ("green_frames", "pedestal"),
    ("wrong_length", "zoom"),
    ("starved_encode", "truck"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("fault", "shot_id"), FAULTED, ids=[f"{f}-{s}" for f, s in FAULTED])
def test_injected_faults_are_caught(corpus, tmp_path, fault, shot_id):
    plan, _, out = corpus
    layout = RenderLayout.find(out)
    shot = plan.shot(shot_id)
    clip = bench.Clip(plan, shot, layout.shot(shot_id), layout.depth(shot_id), layout.mask(shot_id))
    maker, check = bench.FAULTS[fault]
    broken = maker(clip, list(decode_frames(clip.video)), tmp_path)
    assert broken is not None, f"{fault} does not apply to {shot_id}"
    entry = check_shot(plan, shot, broken.video, broken.samples, controls=broken.controls)
    failing = {v["check"] for v in entry["verdicts"] if not v["ok"]}
    assert check in failing, (fault, entry["summary"])
