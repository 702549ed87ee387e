"""h3-mlx in `daotai doctor` (the planner's fit per Mac size) and in the mac check (a timed render, or what is missing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from daotai.mlx.h3_check import (
    TORCH_CONDITIONER_BITS,
    WeightsMissing,
    describe_fit,
    fits_on,
    h3_doctor_rows,
    h3_mlx_check_plan,
)
from daotai.mlx.h3_memory import H3_BITS, H3_CANVASES, h3_peak
from daotai.mlx.memory import GB, MAC_SIZES_GB, working_set_bytes


def test_doctor_rows_are_the_planners_fit_per_mac_size():
    rows = dict(h3_doctor_rows())
    assert list(rows) == [f"h3-mlx {gb} GB Mac" for gb in MAC_SIZES_GB]
    for gb in MAC_SIZES_GB:
        have = working_set_bytes(gb)
        for canvas, (width, height) in H3_CANVASES.items():
            fitting = [b for b in H3_BITS if h3_peak(b, width, height, workflow="ref2va", pictures=2,
                                                     conditioner_bits=TORCH_CONDITIONER_BITS).peak_bytes <= have]
            want = f"{canvas} {max(fitting)}-bit" if fitting else f"{canvas} no"
            assert want in rows[f"h3-mlx {gb} GB Mac"], (gb, canvas)
    # with the conditioner in torch at 16 bits (66.6 GB) nothing fits under a 128 GB Mac's working set
    assert describe_fit(fits_on(working_set_bytes(96))) == "480p no, 720p no, 768p no"
    assert fits_on(working_set_bytes(128))["480p"] == 16
    mine = h3_doctor_rows((128 * GB, 100 * GB, "MLX"))[-1]
    assert mine[0] == "h3-mlx this Mac (128 GB)" and mine[1].startswith("GPU 100 GB (MLX)")


def test_docs_state_todays_table_from_the_planner():
    from daotai.mlx.h3_memory import format_mac_table, h3_mac_table

    doc = (Path(__file__).resolve().parent.parent / "docs" / "mlx.md").read_text(encoding="utf-8")
    assert format_mac_table(h3_mac_table(conditioner_bits=TORCH_CONDITIONER_BITS)) in doc


def test_daotai_doctor_lists_the_h3_mlx_rows():
    from daotai.doctor import collect

    names = [check.name for check in collect()]
    assert all(f"h3-mlx {gb} GB Mac" in names for gb in MAC_SIZES_GB)


def test_the_check_says_what_is_missing_without_weights(tmp_path):
    from daotai.maccheck import CheckConfig, _h3_mlx, _section

    with pytest.raises(WeightsMissing, match="quick check"):
        h3_mlx_check_plan(None, quick=True)
    entry = _section("h3_mlx", lambda: _h3_mlx(CheckConfig(tmp_path, h3_model=str(tmp_path / "nowhere")), tmp_path),
                     lambda line: None)
    assert entry["status"] == "skipped"
    for step in ("daotai models pull minimax-h3 --workflow t2va", "daotai models convert minimax-h3 --to mlx --bits 4",
                 "scripts/mac-check.sh --h3-model"):
        assert step in entry["reason"]


@pytest.fixture()
def tiny_h3(tiny_h3) -> Path:
    """The session's tiny H3 folder (tests/conftest.py), where MLX is installed to render it."""
    pytest.importorskip("mlx.core")
    return tiny_h3


@pytest.mark.slow
def test_the_check_times_a_render_when_weights_are_present_and_refuses_what_does_not_fit(tiny_h3, tmp_path,
                                                                                          monkeypatch):
    import daotai.mlx.h3_check as h3_check
    from daotai.maccheck import CheckConfig, _h3_mlx
    from daotai.render.h3_mlx import H3MLXBackend

    monkeypatch.setattr(h3_check, "CHECK_STEPS", 3)  # the check's timing needs 8; the test only that it runs
    monkeypatch.setenv("DAOTAI_CONFIG_DIR", str(tmp_path / "config"))
    H3MLXBackend(model=str(tiny_h3), accept_licence=True)  # the user accepts once; the check never does
    config = CheckConfig(tmp_path / "report", h3_model=str(tiny_h3))
    monkeypatch.setenv("DAOTAI_MLX_MEMORY_GB", "0.5")
    result = _h3_mlx(config, tmp_path / "work")
    assert result["status"].startswith("does not fit: the planner estimates") and "what fits here" in result["status"]
    monkeypatch.delenv("DAOTAI_MLX_MEMORY_GB")
    result = _h3_mlx(config, tmp_path / "work")
    assert result["status"] == "ok" and result["bits"] == 16 and not result["converted"]
    assert result["wall_s"] > 0 and result["s_per_step"] > 0 and result["mlx_peak_gib"] > 0
    assert any("h3-mlx: estimated peak" in n for n in result["notices"])
    assert json.loads(json.dumps(result)) == result  # the report is JSON
