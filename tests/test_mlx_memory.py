"""Mac memory planning for wan-mlx: working-set share, quantised weight sizes, refusal of plans that swap,
the budget (option, environment, RAM) and the `daotai doctor` table."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from daotai.errors import BackendError
from daotai.mlx.memory import (  # noqa: E402
    ENV_BUDGET,
    WAN_SIZES,
    Budget,
    Footprint,
    check_fits,
    check_plan,
    doctor_rows,
    footprint_peak,
    mac_table,
    memory_budget,
    peak_bytes,
    tokens,
    total_ram_bytes,
    weight_bytes,
    working_set_bytes,
)

GB = 1024**3


def test_working_set_share():
    assert working_set_bytes(64) == int(64 * GB * 0.75)
    assert working_set_bytes(32) == int(32 * GB * 2 / 3)


def test_quantised_weights_include_group_scales():
    # the converter quantises float32 weights, so each group's scale and bias are float32:
    # 4-bit g64 = 4 bits + (32 + 32) / 64 = 5 bits per weight
    assert weight_bytes(1e9, 4, 64) == pytest.approx(1e9 * 5 / 8)
    assert weight_bytes(1e9, 8, 128) == pytest.approx(1e9 * 8.5 / 8)
    assert weight_bytes(1e9, 4, 64, scale_bits=16) == pytest.approx(1e9 * 4.5 / 8)
    assert weight_bytes(1e9, None) == 4e9


def test_tokens_match_wan_patching():
    assert tokens(832, 480, 81) == 21 * 30 * 52


def test_plans_that_would_swap_are_refused_and_the_message_names_the_numbers():
    big = WAN_SIZES["wan2.1-t2v-14b"]
    with pytest.raises(BackendError, match=r"64 GB Mac.*rule: peak <= working set"):
        check_fits(big, 1280, 720, 81, None, 64)
    assert check_fits(big, 1280, 720, 81, 4, 512) == peak_bytes(big, 1280, 720, 81, 4)


def test_table_is_monotonic_and_4bit_never_needs_more():
    for size in WAN_SIZES.values():
        fits = [ok for _, _, ok in mac_table(size, 832, 480, 81, 4)]
        assert fits == sorted(fits)  # once a Mac size fits, every larger one does
        assert (peak_bytes(size, 832, 480, 81, 4) < peak_bytes(size, 832, 480, 81, 8)
                < peak_bytes(size, 832, 480, 81, None))


def test_budget_comes_from_option_then_environment_then_ram():
    assert memory_budget(2.5, env={ENV_BUDGET: "7"}) == Budget(int(2.5 * GB), "memory_gb=2.5")
    assert memory_budget(None, env={ENV_BUDGET: "7"}) == Budget(7 * GB, f"{ENV_BUDGET}=7")
    ram = memory_budget(None, env={})
    if sys.platform.startswith("linux"):  # MLX on the CPU: the whole RAM is the budget
        assert ram.bytes == total_ram_bytes() > 0 and "total RAM" in ram.source


@pytest.mark.parametrize("value", ["lots", "0", "-3", "nan", "inf"])
def test_bad_budget_values_are_refused_naming_the_variable(value):
    with pytest.raises(BackendError, match=rf"{ENV_BUDGET}: '{value}' must be a positive number of GB"):
        memory_budget(None, env={ENV_BUDGET: value})


def _fp14(bits):
    return Footprint.from_size(WAN_SIZES["wan2.1-t2v-14b"], bits)


def test_refusal_names_settings_that_do_fit_and_they_do():
    # 14B in float32 on a 64 GB budget: its weights alone (80 GB) rule out fewer frames or a
    # smaller size, so the one way out named is converting the transformer
    budget = Budget(int(64 * GB), "test")
    with pytest.raises(BackendError) as info:
        check_plan(_fp14(None), 1280, 720, 81, budget)
    msg = str(info.value)
    assert "transformer float32 needs ~104.8 GB but the budget is 64.0 GB (test)" in msg
    assert "rule: estimated peak <= budget" in msg
    bits = re.search(r"would fit: the transformer at (\d)-bit "
                     r"\(daotai models convert <model> --to mlx --bits \d\)", msg)
    assert bits and footprint_peak(_fp14(int(bits.group(1))), 1280, 720, 81) <= budget.bytes
    assert "frames (" not in msg and "with 81 frames" not in msg
    # 14B at 4-bit on a 64 GB Mac's working set: fewer frames or a smaller size; each named one must fit
    budget = Budget(working_set_bytes(64), "64 GB Mac")
    with pytest.raises(BackendError) as info:
        check_plan(_fp14(4), 1280, 720, 81, budget)
    msg = str(info.value)
    assert "-bit (daotai models convert" not in msg  # nothing below 4-bit to offer
    frames = re.search(r"(\d+) frames \(~[\d.]+ s\) at 1280x720", msg)
    assert frames and footprint_peak(_fp14(4), 1280, 720, int(frames.group(1))) <= budget.bytes
    assert footprint_peak(_fp14(4), 1280, 720, int(frames.group(1)) + 4) > budget.bytes  # the most that fits
    assert (int(frames.group(1)) - 1) % 4 == 0  # Wan's 4k + 1 rule
    size = re.search(r"(\d+)x(\d+) with 81 frames", msg)
    assert size and footprint_peak(_fp14(4), int(size.group(1)), int(size.group(2)), 81) <= budget.bytes
    assert int(size.group(1)) % 16 == 0 and int(size.group(2)) % 16 == 0
    # and a plan inside the budget passes, returning its estimate
    assert check_plan(_fp14(4), 832, 480, 81, budget) == footprint_peak(_fp14(4), 832, 480, 81)


def test_refusal_says_so_when_nothing_smaller_fits():
    with pytest.raises(BackendError, match=r"nothing smaller fits: the weights alone need ~[\d.]+ GB"):
        check_plan(_fp14(4), 832, 480, 81, Budget(8 * GB, "test"))


def test_doctor_rows_for_every_mac_size_and_this_mac():
    rows = dict(doctor_rows())
    assert list(rows) == [f"wan-mlx {gb} GB Mac" for gb in (64, 96, 128, 192, 256, 512)]
    # 14B float32 weights alone (57 GB) exceed a 64 GB Mac's ~48 GB working set; 192 GB runs everything
    assert rows["wan-mlx 64 GB Mac"].startswith("GPU ~48 GB, 81 frames: 1.3b: preview float32")
    assert "14b: preview 8-bit" in rows["wan-mlx 64 GB Mac"]
    assert rows["wan-mlx 192 GB Mac"].endswith("1.3b: all presets float32; 14b: all presets float32")
    mine = doctor_rows((96 * GB, 70 * GB, "MLX"))[-1]
    assert mine[0] == "wan-mlx this Mac (96 GB)" and mine[1].startswith("GPU 70 GB (MLX), 81 frames: ")


def test_daotai_doctor_lists_the_mac_table():
    """Through the real command line, as tests/test_cli.py runs it (wide, so rows do not wrap)."""
    env = dict(os.environ, COLUMNS="250")
    done = subprocess.run([sys.executable, "-m", "daotai.cli", "doctor"], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    for gb in (64, 96, 128, 192, 256, 512):
        line = next((ln for ln in done.stdout.splitlines() if f"wan-mlx {gb} GB Mac" in ln), None)
        assert line is not None, done.stdout
        assert dict(doctor_rows())[f"wan-mlx {gb} GB Mac"] in line
    if not (sys.platform == "darwin" and os.uname().machine == "arm64"):
        assert "wan-mlx this Mac" not in done.stdout
