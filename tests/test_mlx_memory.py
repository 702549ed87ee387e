"""Mac memory planning for wan-mlx: working-set share, quantised weight sizes, refusal of plans that swap."""

from __future__ import annotations

import pytest

from daotai.errors import BackendError
from daotai.mlx.memory import WAN_SIZES, check_fits, mac_table, peak_bytes, tokens, weight_bytes, working_set_bytes

GB = 1024**3


def test_working_set_share():
    assert working_set_bytes(64) == int(64 * GB * 0.75)
    assert working_set_bytes(32) == int(32 * GB * 2 / 3)


def test_quantised_weights_include_group_scales():
    # 4-bit g64: 4 bits + (16-bit scale + 16-bit bias) / 64 = 4.5 bits per weight
    assert weight_bytes(1e9, 4, 64) == pytest.approx(1e9 * 4.5 / 8)
    assert weight_bytes(1e9, 8, 128) == pytest.approx(1e9 * 8.25 / 8)
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
        assert peak_bytes(size, 832, 480, 81, 4) < peak_bytes(size, 832, 480, 81, 8) < peak_bytes(size, 832, 480, 81, None)
