"""Motion code: 16-bit angle quantisation, its error bound, zero vector and JSON form."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daotai.errors import PlanError
from daotai.plan.motion_code import (
    ANGLE_ERROR_BOUND_RAD,
    STEP_PHI,
    STEP_THETA,
    MotionCode,
    decode_motion,
    encode_motion,
    from_list,
    to_list,
)


def angle_between(a: np.ndarray, b: np.ndarray) -> float:
    """Angle in radians between two non-zero vectors, accurate when tiny."""
    return math.atan2(np.linalg.norm(np.cross(a, b)), float(a @ b))


def test_bound_follows_from_the_quantisation_steps():
    assert STEP_THETA == 2 * math.pi / 65536 and STEP_PHI == math.pi / 65535
    assert ANGLE_ERROR_BOUND_RAD == pytest.approx(math.hypot(math.pi / 65536, math.pi / 131070), rel=1e-15)
    assert 5.3e-5 < ANGLE_ERROR_BOUND_RAD < 5.4e-5


@pytest.mark.parametrize(
    ("vector", "theta_q", "phi_q"),
    [
        ((0, 0, 2), 0, 0),
        ((0, 0, -1), 0, 65535),
        ((1, 0, 0), 0, 32768),
        ((0, 1, 0), 16384, 32768),
        ((-1, 0, 0), 32768, 32768),
        ((-1, -0.0, 0), 32768, 32768),  # atan2 gives -pi here; same code as +pi
        ((0, -1, 0), 49152, 32768),
    ],
)
def test_axis_codes(vector, theta_q, phi_q):
    code = encode_motion(vector)
    assert (code.theta_q, code.phi_q) == (theta_q, phi_q)
    assert code.magnitude == np.linalg.norm(vector)
    decoded = decode_motion(code)
    assert angle_between(decoded, np.asarray(vector, dtype=float)) <= ANGLE_ERROR_BOUND_RAD


def test_zero_vector_has_a_defined_code():
    assert encode_motion([0.0, -0.0, 0.0]) == MotionCode(0, 0, 0.0)
    np.testing.assert_array_equal(decode_motion(MotionCode(0, 0, 0.0)), np.zeros(3))
    np.testing.assert_array_equal(decode_motion(MotionCode(1234, 4321, 0.0)), np.zeros(3))


@settings(max_examples=500)
@given(
    st.tuples(*[st.floats(-1e3, 1e3, allow_nan=False, allow_subnormal=False)] * 3).filter(
        lambda v: math.hypot(*v) > 1e-6
    )
)
def test_round_trip_error_within_bound(vector):
    m = np.asarray(vector)
    code = encode_motion(m)
    assert 0 <= code.theta_q <= np.iinfo(np.uint16).max and 0 <= code.phi_q <= np.iinfo(np.uint16).max
    decoded = decode_motion(code)
    assert code.magnitude == pytest.approx(np.linalg.norm(m), rel=1e-15)
    assert np.linalg.norm(decoded) == pytest.approx(code.magnitude, rel=1e-12)
    # 1e-12 rad covers the float rounding of sin/cos/atan2, seven orders below the bound
    assert angle_between(decoded, m) <= ANGLE_ERROR_BOUND_RAD + 1e-12


def test_bound_is_tight():
    # Half a step off in both angles at the equator: the worst case the bound describes.
    theta = (1000 + 0.5 - 1e-6) * STEP_THETA
    phi = (32767 + 0.5 - 1e-6) * STEP_PHI
    worst = np.array([math.sin(phi) * math.cos(theta), math.sin(phi) * math.sin(theta), math.cos(phi)])
    assert angle_between(decode_motion(encode_motion(worst)), worst) > 0.999 * ANGLE_ERROR_BOUND_RAD
    # And random directions come within a factor of 2 of it.
    rng = np.random.default_rng(20240601)
    vectors = rng.normal(size=(20_000, 3))
    worst_seen = max(angle_between(decode_motion(encode_motion(v)), v) for v in vectors)
    assert ANGLE_ERROR_BOUND_RAD / 2 < worst_seen <= ANGLE_ERROR_BOUND_RAD + 1e-12


def test_json_round_trip_is_exact():
    code = encode_motion([0.3, -1.2, 0.7])
    values = json.loads(json.dumps(to_list(code)))
    assert from_list(values) == code
    assert isinstance(values[0], int) and isinstance(values[1], int) and isinstance(values[2], float)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ([70000, 0, 1.0], "theta_q: 70000 must be in"),
        ([0, -1, 1.0], "phi_q: -1 must be in"),
        ([1.5, 0, 1.0], "theta_q: 1.5 must be an integer"),
        ([True, 0, 1.0], "theta_q: True must be an integer"),
        ([0, 0, -2.0], "magnitude: -2.0 must be finite and >= 0"),
        ([0, 0, math.nan], "magnitude: nan must be finite"),
        ([0, 0], "must be \\[theta_q, phi_q, magnitude\\]"),
    ],
)
def test_from_list_refuses_bad_codes(values, message):
    with pytest.raises(PlanError, match=message):
        from_list(values)


@pytest.mark.parametrize("vector", [[1.0, 2.0], [math.nan, 0.0, 1.0], [math.inf, 0.0, 0.0]])
def test_encode_refuses_bad_vectors(vector):
    with pytest.raises(PlanError, match="must be three finite numbers"):
        encode_motion(vector)
