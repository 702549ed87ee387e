"""Pure helpers of the diffusers backends: defaults, native requests, retiming."""

from __future__ import annotations

import numpy as np
import pytest

from daotai.errors import BackendError, OptionError
from daotai.plan.planner import plan_script
from daotai.render.neural.request import effective_defaults, family_defaults, native_request
from daotai.render.neural.retime import plan_to_native_indexes, retime_indexes, retime_notice, to_uint8
from daotai.render.spec import NeuralOptions
from daotai.script.load import validate_script


def make_plan(fps=24, size=(1280, 720), duration=5.0, negative=""):
    return plan_script(validate_script({
        "fps": fps, "size": list(size), "characters": [{"id": "a"}],
        "shots": [{"shot_id": "s", "duration": duration, "negative_prompt": negative}],
    }))


def test_wan_request_is_the_shot_at_16_fps_snapped_to_4k_plus_1():
    plan = make_plan(fps=24, duration=5.0)
    shot = plan.shots[0]
    request = native_request(plan, shot, family_defaults("wan"))
    assert shot.frames == 120
    assert (request.width, request.height, request.frames, request.fps) == (1280, 720, 81, 16.0)
    assert request.seed == shot.seed and request.prompt == shot.prompt


def test_ltx_request_snaps_size_to_32_and_frames_to_8k_plus_1():
    plan = make_plan(fps=30, duration=5.0, negative="no cats")
    request = native_request(plan, plan.shots[0], family_defaults("ltx"))
    assert request.width == 1280 and request.height in (704, 736)
    assert request.frames == 121 and (request.frames - 1) % 8 == 0
    assert request.negative_prompt.startswith(plan.shots[0].negative_prompt)
    assert "no cats" in request.negative_prompt and family_defaults("ltx").negative_prompt in request.negative_prompt


def test_retiming_repeats_when_the_plan_is_faster_and_drops_when_slower():
    up = retime_indexes(81, 16.0, 120, 24.0)
    assert len(up) == 120 and up[0] == 0 and up[-1] == 79 and up == sorted(up)  # 119/24 s ≈ native 79.3
    assert max(np.bincount(up)) == 2 and min(np.bincount(up)) == 1  # each frame shown once or twice
    down = retime_indexes(121, 24.0, 80, 16.0)
    assert len(down) == 80 and len(set(down)) == 80 and down[:6] == [0, 2, 3, 5, 6, 8]  # every third dropped
    same = retime_indexes(121, 24.0, 120, 24.0)
    assert same == list(range(120))
    # the time of each plan frame matches the time of the native frame it shows within half a native frame
    for i, j in enumerate(up):
        assert abs(i / 24.0 - j / 16.0) <= 0.5 / 16.0 + 1e-9
    assert plan_to_native_indexes(120, 24.0, 81, 16.0)[:4] == [0, 2, 3, 5]


def test_retime_notice_says_what_happened():
    plan = make_plan(fps=24, duration=5.0)
    request = native_request(plan, plan.shots[0], family_defaults("ltx"))
    notice = retime_notice(request, plan, plan.shots[0])
    assert "121 frames at 24 fps" in notice.text and "resized to 1280x720" in notice.text
    wan = native_request(plan, plan.shots[0], family_defaults("wan"))
    assert "by motion interpolation" in retime_notice(wan, plan, plan.shots[0]).text  # never by repeating frames


def test_overrides_and_their_limits():
    d = effective_defaults("wan", NeuralOptions(steps=4, guidance=0.0))
    assert (d.steps, d.guidance, d.shift) == (4, 0.0, family_defaults("wan").shift)
    assert effective_defaults("wan", NeuralOptions(), "wan2.2-ti2v-5b").native_fps == 24.0
    distilled = effective_defaults("ltx", NeuralOptions(), "ltx-video-0.9.7-distilled")
    assert (distilled.steps, distilled.guidance) == (8, 1.0)
    assert effective_defaults("ltx", NeuralOptions(steps=20), "ltx-video-0.9.7-distilled").steps == 20
    from daotai.render.registry import spec_for

    with pytest.raises(OptionError, match="options.steps: 0 must be greater than or equal to 1"):
        spec_for("wan").validate_options({"steps": 0})
    with pytest.raises(OptionError, match="options.guidance"):
        spec_for("ltx").validate_options({"guidance": -1.0})


def test_pipeline_output_to_uint8():
    frames = np.linspace(0, 1, 2 * 3 * 4 * 4 * 3, dtype=np.float32).reshape(1, 3, 4, 4, 6)[..., :3]
    out = to_uint8(frames)
    assert out.shape == (3, 4, 4, 3) and out.dtype == np.uint8
    assert to_uint8(np.ones((1, 2, 2, 3)))[0, 0, 0].tolist() == [255, 255, 255]
    assert to_uint8(np.full((1, 1, 1, 3), 2.0)).max() == 255 and to_uint8(np.full((1, 1, 1, 3), -1.0)).min() == 0
    with pytest.raises(BackendError, match="expected \\(F, H, W, 3\\)"):
        to_uint8(np.zeros((2, 2)))


def test_device_frames_become_the_same_bytes_as_host_frames():
    torch = pytest.importorskip("torch")
    from daotai.render.neural.retime import to_uint8

    generator = torch.Generator().manual_seed(3)
    video = torch.rand(1, 19, 3, 6, 8, generator=generator)  # (B, F, C, H, W); 19 frames: 3 device chunks
    video[0, 0, 0, 0, :3] = torch.tensor([0.0, 1.0, 0.5 / 255.0])  # the ends and a rounding edge
    host = video[0].permute(0, 2, 3, 1).numpy()  # (F, H, W, C) as output_type="np" gives it
    got = to_uint8(video)
    assert got.dtype == np.uint8 and got.shape == (19, 6, 8, 3)
    assert np.array_equal(got, to_uint8(host))
