"""Memory planner: estimates against published figures and placement choices per device."""

from __future__ import annotations

import pytest

from daotai import catalog
from daotai.errors import BackendError
from daotai.runtime.memory import GIB, TIERS, choose_settings, estimate, next_tier, plan_placement

GB = 1e9


def phase(est, name):
    return dict(est.phases)[name]


def test_estimates_match_published_figures_within_15_percent():
    # Wan2.1-T2V-1.3B at 480p, 81 frames, transformer on the GPU and T5 off it: 8.19 GB published.
    small = estimate("wan2.1-t2v-1.3b", 832, 480, 81, offload="model", vae_tiling=True)
    assert phase(small, "denoise") == pytest.approx(8.19 * GB, rel=0.15)
    # Wan2.1-T2V-14B at 720p, 81 frames, nothing offloaded: ~69 GB published.
    large = estimate("wan2.1-t2v-14b", 1280, 720, 81, offload="none")
    assert large.peak_bytes == pytest.approx(69 * GB, rel=0.15)


@pytest.mark.parametrize("model", sorted({row.footprint.name for row in catalog.models().values()}))
def test_every_lower_tier_needs_less_memory(model):
    peaks = [estimate(model, 1280, 720, 81, offload=t, vae_tiling=True).peak_bytes for t in TIERS]
    assert peaks == sorted(peaks, reverse=True)
    assert estimate(model, 1280, 720, 81).peak_bytes > estimate(model, 640, 360, 81).peak_bytes
    assert estimate(model, 640, 360, 81).peak_bytes > estimate(model, 640, 360, 17).peak_bytes


# (device memory GiB, model, width, height, frames) -> expected tier, or None = refused
CASES = [
    (141, "wan2.1-t2v-1.3b", 832, 480, 81, "none"),  # H200: everything resident
    (80, "wan2.1-t2v-14b", 1280, 720, 81, "none"),  # A100/H100 80 GB runs 14B 720p without offload
    (48, "wan2.1-t2v-14b", 1280, 720, 81, "model"),
    (24, "wan2.1-t2v-1.3b", 832, 480, 81, "none"),  # 4090: fits with VAE tiling
    (16, "wan2.1-t2v-1.3b", 832, 480, 81, "model"),
    (12, "wan2.1-t2v-1.3b", 832, 480, 81, "model"),  # UMT5 in bf16 (10.6 GiB) just fits
    (10, "wan2.1-t2v-1.3b", 832, 480, 81, "group"),
    (24, "wan2.1-t2v-14b", 1280, 720, 81, "group"),
    (6, "wan2.1-t2v-1.3b", 832, 480, 81, "group"),
    (24, "ltx-video-2b", 768, 512, 121, "none"),
    (12, "ltx-video-2b", 768, 512, 121, "model"),
    (36 * 0.70, "wan2.1-vace-1.3b", 832, 480, 81, "none"),  # 36 GB Mac: the GPU's 70% share
    (2, "wan2.1-t2v-1.3b", 832, 480, 81, None),  # activations alone exceed it: refused
    (1, "wan2.1-t2v-14b", 1280, 720, 81, None),
]


@pytest.mark.parametrize("gib, model, width, height, frames, tier", CASES)
def test_planner_choices(gib, model, width, height, frames, tier):
    budget = gib * GIB
    if tier is None:
        with pytest.raises(BackendError, match=f"more than the {gib:.1f} GiB available"):
            plan_placement(model, width, height, frames, budget)
        return
    placement = plan_placement(model, width, height, frames, budget)
    assert placement.tier == tier
    assert placement.estimate.peak_bytes <= budget
    # the choice is the lightest touch: the tier above it (if any) does not fit
    index = TIERS.index(tier)
    if index > 0:
        above = estimate(model, width, height, frames, offload=TIERS[index - 1], vae_tiling=True)
        assert above.peak_bytes > budget


def test_refusal_names_a_smaller_setting_that_would_fit():
    budget = estimate("wan2.1-t2v-14b", 640, 360, 33, offload="sequential", vae_tiling=True).peak_bytes * 1.01
    with pytest.raises(BackendError, match="--preset preview with ~2 s shots \\(33 frames\\) would fit"):
        plan_placement("wan2.1-t2v-14b", 1920, 1088, 161, budget)


def test_doctor_api_still_works():
    est = choose_settings("wan2.1-t2v-1.3b", 1280, 720, 81, 24 * GIB)
    assert est is not None and est.offload in TIERS and est.peak_bytes <= 24 * GIB
    assert choose_settings("wan2.1-t2v-1.3b", 1280, 720, 81, 0.5 * GIB) is None
    assert next_tier("none") == "model" and next_tier("sequential") is None
