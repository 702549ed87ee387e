"""Video writers, decoders and probe: colour maths, timing, atomic writes, fidelity."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from daotai.encode.colour import rgb_to_yuv_planes, rgb_to_yuv_u8, yuv_planes_to_rgb
from daotai.encode.read import decode_frames, decode_gray, probe, top_level_boxes
from daotai.encode.video import EncodeSettings, VideoWriter, as_fps, write_gray8, write_gray16, write_preview_h264
from daotai.errors import EncodeError
from daotai.qc.metrics import psnr

NTSC = Fraction(24000, 1001)

PATCH_COLOURS = [
    (255, 0, 0),
    (0, 255, 0),
    (0, 0, 255),
    (128, 128, 128),
    (255, 255, 255),
    (0, 0, 0),
    (255, 255, 0),
    (40, 90, 200),
]


def patch_frame(width: int = 256, height: int = 64) -> np.ndarray:
    """(H, W, 3) uint8 vertical stripes of PATCH_COLOURS, 32 px each."""
    frame = np.zeros((height, width, 3), np.uint8)
    for i, colour in enumerate(PATCH_COLOURS):
        frame[:, i * 32 : (i + 1) * 32] = colour
    return frame


def previz_like(index: int, height: int, width: int) -> np.ndarray:
    """(H, W, 3) uint8 frame like a previz render: sky gradient, ground with a perspective
    grid, two proxy figures with labels, a slate line; drawn at 2x and area-downsampled as an
    antialiased renderer would deliver it. The camera trucks and the figures move."""
    big_h, big_w = 2 * height, 2 * width
    s = big_h / 360.0
    horizon = int(big_h * 0.45)
    t = np.linspace(0.0, 1.0, big_h, dtype=np.float32)[:, None, None]  # (2H, 1, 1)
    sky_top = np.array([120, 165, 220], np.float32)
    sky_low = np.array([205, 220, 235], np.float32)
    far = np.array([150, 145, 130], np.float32)
    near = np.array([95, 90, 80], np.float32)
    k_sky = np.clip(t / (horizon / big_h), 0.0, 1.0)
    k_ground = np.clip((t - horizon / big_h) / (1 - horizon / big_h), 0.0, 1.0)
    image = np.empty((big_h, big_w, 3), np.float32)  # (2H, 2W, 3)
    image[:horizon] = sky_top + (sky_low - sky_top) * k_sky[:horizon]
    image[horizon:] = far + (near - far) * k_ground[horizon:]
    img = image.astype(np.uint8)
    line = tuple(int(v) for v in near * 0.7)
    thick = max(1, int(2 * s))
    vanish = big_w // 2 + int(2 * index * s)
    for k in range(-12, 13):
        end = (vanish + k * int(120 * s), big_h)
        cv2.line(img, (vanish, horizon), end, line, thick, cv2.LINE_AA)
    for r in range(1, 9):
        y = horizon + int((big_h - horizon) * (r / 8) ** 2)
        cv2.line(img, (0, y), (big_w, y), line, thick, cv2.LINE_AA)
    figures = ((int((180 + 3 * index) * s), (200, 80, 60), "A1"),
               (int((430 - 2 * index) * s), (60, 130, 190), "B2"))
    for cx, colour, label in figures:
        top_left, bottom_right = (cx - int(28 * s), int(150 * s)), (cx + int(28 * s), int(300 * s))
        cv2.rectangle(img, top_left, bottom_right, colour, -1, cv2.LINE_AA)
        cv2.circle(img, (cx, int(128 * s)), int(20 * s), colour, -1, cv2.LINE_AA)
        cv2.putText(img, label, (cx - int(16 * s), int(230 * s)), cv2.FONT_HERSHEY_SIMPLEX,
                    0.7 * s, (255, 255, 255), thick, cv2.LINE_AA)
    cv2.putText(img, f"SC 1  SHOT 3  F{index:03d}", (int(14 * s), int(30 * s)),
                cv2.FONT_HERSHEY_SIMPLEX, 0.6 * s, (20, 20, 20), thick, cv2.LINE_AA)
    return cv2.resize(img, (width, height), interpolation=cv2.INTER_AREA)


def write_clip(path: Path, frames: list[np.ndarray], fps=24, settings=None) -> Path:
    """Encode frames to path with VideoWriter."""
    height, width = frames[0].shape[:2]
    with VideoWriter(path, width, height, fps, settings) as writer:
        for frame in frames:
            writer.write(frame)
    return path


# --------------------------------------------------------------------------- settings


def test_settings_derive_format_container_and_crf():
    h264, hevc, prores = (EncodeSettings(codec=c) for c in ("h264", "hevc", "prores"))
    assert (h264.pix_fmt, h264.container, h264.effective_crf) == ("yuv420p", ".mp4", 18)
    assert (hevc.pix_fmt, hevc.container, hevc.effective_crf) == ("yuv420p", ".mp4", 18)
    assert (prores.pix_fmt, prores.container, prores.effective_crf) == ("yuv422p10le", ".mov", None)
    assert prores.codec_options() == {"profile": "3"}
    assert EncodeSettings(crf=23, preset="ultrafast").codec_options() == {
        "crf": "23",
        "preset": "ultrafast",
        # chroma averaged over 2x2 blocks sits at their centre; no mbtree, for reproducible bytes
        "x264-params": "chromaloc=1:mbtree=0",
    }


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"codec": "vp9"}, "settings.codec"),
        ({"crf": 52}, "settings.crf"),
        ({"crf": -1}, "settings.crf"),
        ({"crf": 18.5}, "settings.crf"),
        ({"codec": "prores", "crf": 18}, "settings.crf"),
        ({"preset": "warp"}, "settings.preset"),
        ({"prores_profile": 4}, "settings.prores_profile"),
        ({"threads": -2}, "settings.threads"),
        ({"keyint_s": 0}, "settings.keyint_s"),
        ({"keyint_s": float("nan")}, "settings.keyint_s"),
    ],
)
def test_settings_reject_bad_values(kwargs, field):
    with pytest.raises(EncodeError, match=field):
        EncodeSettings(**kwargs)


def test_fps_parsing():
    assert as_fps("24000/1001") == NTSC
    assert as_fps(25) == 25
    assert as_fps(23.976) == Fraction(2997, 125)  # the decimal written, not the binary float
    for bad in (0, -24, "fast", float("nan"), True, 5000):
        with pytest.raises(EncodeError, match="fps"):
            as_fps(bad)


# --------------------------------------------------------------------------- colour maths


def test_bt709_limited_code_values_of_primaries():
    # Textbook BT.709 limited-range (Y, Cb, Cr) of 8-bit primaries; BT.601 would give
    # red = (81, 90, 240), so these pin the matrix.
    expected = {
        (255, 0, 0): (63, 102, 240),
        (0, 255, 0): (173, 42, 26),
        (0, 0, 255): (32, 240, 118),
        (255, 255, 255): (235, 128, 128),
        (0, 0, 0): (16, 128, 128),
    }
    for rgb, ycbcr in expected.items():
        frame = np.full((2, 2, 3), rgb, np.uint8)
        planes = rgb_to_yuv_planes(frame)
        assert tuple(int(p.astype(np.uint8).ravel()[0]) for p in planes) == ycbcr


@pytest.mark.parametrize("sub_y", [2, 1])
def test_fast_8bit_conversion_matches_the_reference_path(sub_y):
    # The writer's OpenCV path must give the reference path's code values: identical except
    # on exact rounding ties (round half to even vs half up), which are rare and one code off.
    rng = np.random.default_rng(11)
    frame = rng.integers(0, 256, (64, 96, 3), dtype=np.uint8)
    frame[10:40, 20:70] = (200, 30, 40)  # flat areas and hard edges as well as noise
    fast = rgb_to_yuv_u8(frame, sub_y)
    reference = [p.astype(np.uint8) for p in rgb_to_yuv_planes(frame, sub_y, 8)]
    for got, want in zip(fast, reference, strict=True):
        assert got.dtype == np.uint8 and got.shape == want.shape
        diff = np.abs(got.astype(int) - want.astype(int))
        assert diff.max() <= 1 and (diff > 0).mean() < 1e-3
    studio = {(255, 0, 0): (63, 102, 240), (255, 255, 255): (235, 128, 128), (0, 0, 0): (16, 128, 128)}
    for rgb, ycbcr in studio.items():
        planes = rgb_to_yuv_u8(np.full((2, 2, 3), rgb, np.uint8))
        assert tuple(int(p.ravel()[0]) for p in planes) == ycbcr


def test_conversion_round_trip_without_codec_is_within_quantisation():
    rng = np.random.default_rng(7)
    blocks = rng.integers(0, 256, (12, 16, 3), dtype=np.uint8)
    frame = blocks.repeat(4, axis=0).repeat(4, axis=1)  # (48, 64, 3), constant 4x4 colour blocks
    y, cb, cr = (p.astype(np.uint8) for p in rgb_to_yuv_planes(frame))
    assert y.shape == (48, 64) and cb.shape == cr.shape == (24, 32)
    back = yuv_planes_to_rgb(y, cb, cr)
    # Chroma is interpolated bilinearly, so only block interiors (away from colour steps)
    # must come back exactly; 219 luma / 224 chroma levels carry 256 RGB levels: about
    # one level of rounding each way.
    inner = np.isin(np.arange(48) % 4, (1, 2))
    inner_cols = np.isin(np.arange(64) % 4, (1, 2))
    diff = np.abs(back.astype(int) - frame)[inner][:, inner_cols]
    assert diff.max() <= 2


# --------------------------------------------------------------------------- write / probe


@pytest.mark.parametrize("fps", [NTSC, Fraction(25), Fraction(30000, 1001)])
def test_write_then_probe_reports_exact_timing_and_bt709_tags(tmp_path, fps):
    frames = [previz_like(i, 180, 320) for i in range(30)]
    path = write_clip(tmp_path / "shot.mp4", frames, fps)
    info = probe(path)
    assert (info.width, info.height) == (320, 180)
    assert info.fps == fps
    assert info.frames == 30
    assert info.duration_s == float(30 / fps)  # exactly frames / fps, not rounded
    assert (info.codec, info.pix_fmt) == ("h264", "yuv420p")
    assert (info.color_primaries, info.color_trc, info.colorspace, info.color_range) == (1, 1, 1, 1)
    assert info.faststart
    boxes = top_level_boxes(path)
    assert boxes.index("moov") < boxes.index("mdat")
    with av.open(str(path)) as container:  # pts are whole frames in a 1/fps grid
        stream = container.streams.video[0]
        pts = [frame.time for frame in container.decode(stream)]
        assert stream.duration * stream.time_base == 30 / fps
    assert pts == pytest.approx([i / fps for i in range(30)], abs=1e-9)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shot.mp4"]


@pytest.mark.parametrize(("codec", "pix_fmt"), [("h264", "yuv420p"), ("hevc", "yuv420p"),
                                                ("prores", "yuv422p10le")])
def test_solid_patches_decode_within_three_levels(tmp_path, codec, pix_fmt):
    settings = EncodeSettings(codec=codec)
    frame = patch_frame()
    path = write_clip(tmp_path / f"patches{settings.container}", [frame] * 6, 24, settings)
    info = probe(path)
    assert (info.codec, info.pix_fmt, info.frames) == (codec, pix_fmt, 6)
    assert (info.color_primaries, info.colorspace, info.color_range) == (1, 1, 1)
    decoded = list(decode_frames(path))
    assert len(decoded) == 6
    for i, colour in enumerate(PATCH_COLOURS):
        centre = decoded[3][24:40, i * 32 + 8 : i * 32 + 24].astype(int)  # away from edges
        assert np.abs(centre - colour).max() <= 3, (codec, colour, centre[0, 0])


def test_third_party_decoder_agrees_and_bt601_would_not(tmp_path):
    path = write_clip(tmp_path / "patches.mp4", [patch_frame()] * 3)
    with av.open(str(path)) as container:
        frame = next(container.decode(video=0))
        as709 = frame.to_ndarray(format="rgb24", src_colorspace="ITU709",
                                 src_color_range="MPEG", dst_color_range="JPEG")
        # OpenCV's I420 conversion is BT.601 video range on every version (PyAV's own swscale
        # path ignores src_colorspace on some releases, which made the contrast vanish there).
        as601 = cv2.cvtColor(frame.to_ndarray(format="yuv420p"), cv2.COLOR_YUV2RGB_I420)
    red, green = as709[32, 16].astype(int), as709[32, 48].astype(int)
    assert np.abs(red - (255, 0, 0)).max() <= 3
    assert np.abs(green - (0, 255, 0)).max() <= 3
    # The wrong matrix is visibly wrong: the test above would catch a BT.601 encoder.
    assert np.abs(as601[32, 16].astype(int) - (255, 0, 0)).max() > 10


def test_default_h264_fidelity_on_rendered_frames(tmp_path):
    frames = [previz_like(i, 360, 640) for i in range(36)]
    path = write_clip(tmp_path / "render.mp4", frames)
    values = np.array([psnr(a, b) for a, b in zip(frames, decode_frames(path), strict=True)])
    assert len(values) == 36
    assert values.mean() >= 38.5, values.mean()
    assert values.std() <= 1.2, values.std()


def test_decode_thumbnails_with_max_side(tmp_path):
    path = write_clip(tmp_path / "small.mp4", [patch_frame(256, 64)] * 2)
    thumbs = list(decode_frames(path, max_side=64))
    assert [t.shape for t in thumbs] == [(16, 64, 3)] * 2
    assert np.abs(thumbs[0][8, 4].astype(int) - (255, 0, 0)).max() <= 3


# --------------------------------------------------------------------------- rejections


@pytest.mark.parametrize(("width", "height"), [(321, 180), (320, 181), (0, 180), (320, -2)])
def test_rejects_odd_or_empty_sizes(tmp_path, width, height):
    with pytest.raises(EncodeError, match="width|height"):
        VideoWriter(tmp_path / "odd.mp4", width, height, 24)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (np.zeros((64, 96, 3), np.float32), "dtype float32"),
        (np.zeros((64, 96, 3), np.uint16), "dtype uint16"),
        (np.zeros((64, 96), np.uint8), r"shape \(64, 96\)"),
        (np.zeros((64, 96, 4), np.uint8), r"shape \(64, 96, 4\)"),
        (np.zeros((96, 64, 3), np.uint8), r"shape \(96, 64, 3\)"),
        ([[0, 0, 0]], "dtype list"),
    ],
)
def test_rejects_wrong_frames_and_leaves_nothing(tmp_path, frame, message):
    path = tmp_path / "bad.mp4"
    with pytest.raises(EncodeError, match=message):
        with VideoWriter(path, 96, 64, 24) as writer:
            writer.write(np.zeros((64, 96, 3), np.uint8))
            writer.write(frame)
    assert list(tmp_path.iterdir()) == []


def test_rejects_wrong_suffix_and_missing_folder(tmp_path):
    with pytest.raises(EncodeError, match=r"\.mp4 or \.mov"):
        VideoWriter(tmp_path / "clip.avi", 64, 64, 24)
    with pytest.raises(EncodeError, match=r"\.mov"):
        VideoWriter(tmp_path / "clip.mp4", 64, 64, 24, EncodeSettings(codec="prores"))
    with pytest.raises(EncodeError, match="does not exist"):
        VideoWriter(tmp_path / "nowhere" / "clip.mp4", 64, 64, 24)


# --------------------------------------------------------------------------- atomic writes


@pytest.mark.parametrize("error", [RuntimeError("render crashed"), KeyboardInterrupt()])
def test_failure_inside_with_block_leaves_no_file(tmp_path, error):
    path = tmp_path / "shot.mp4"
    with pytest.raises(type(error)):
        with VideoWriter(path, 64, 48, 24) as writer:
            for _ in range(30):  # enough to get past the encoder's lookahead
                writer.write(np.full((48, 64, 3), 90, np.uint8))
            # whatever is written so far is hidden, next to the target (one temp file per run of
            # GOPs, daotai.encode.gops, once its encoder has muxed a packet)
            partial = [p.name for p in tmp_path.iterdir()]
            assert len(partial) <= 2 and not path.exists()
            assert all(name.startswith(".shot.mp4.") and name.endswith(".partial.mp4") for name in partial)
            raise error
    assert not path.exists()
    assert list(tmp_path.iterdir()) == []


def test_failure_keeps_previous_file_untouched(tmp_path):
    path = tmp_path / "shot.mp4"
    path.write_bytes(b"previous render")
    with pytest.raises(RuntimeError):
        with VideoWriter(path, 64, 48, 24) as writer:
            writer.write(np.zeros((48, 64, 3), np.uint8))
            raise RuntimeError
    assert path.read_bytes() == b"previous render"
    assert [p.name for p in tmp_path.iterdir()] == ["shot.mp4"]


def test_abort_and_empty_close_leave_nothing(tmp_path):
    writer = VideoWriter(tmp_path / "a.mp4", 64, 48, 24)
    writer.write(np.zeros((48, 64, 3), np.uint8))
    writer.abort()
    with pytest.raises(EncodeError, match="no frames"):
        with VideoWriter(tmp_path / "b.mp4", 64, 48, 24):
            pass
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- control channels


def test_gray16_ffv1_is_lossless_at_odd_sizes(tmp_path):
    rng = np.random.default_rng(3)
    depth = [rng.integers(0, 65536, (45, 81), dtype=np.uint16) for _ in range(4)]  # (H, W) mm
    depth[0][0, 0] = 65535  # sky
    path = tmp_path / "depth.mkv"
    assert write_gray16(depth, path, NTSC) == 4
    info = probe(path)
    assert (info.codec, info.pix_fmt, info.width, info.height) == ("ffv1", "gray16le", 81, 45)
    assert info.frames == 4 and info.fps == NTSC
    back = list(decode_gray(path))
    assert all(b.dtype == np.uint16 and np.array_equal(a, b) for a, b in zip(depth, back, strict=True))
    assert len(back) == 4


def test_gray8_ffv1_is_lossless_and_checks_frames(tmp_path):
    masks = [np.zeros((40, 30), np.uint8) for _ in range(3)]
    masks[1][10:20, 5:15] = 255
    path = tmp_path / "mask_A1.mkv"
    assert write_gray8(masks, path, 24) == 3
    back = list(decode_gray(path))
    assert all(b.dtype == np.uint8 and np.array_equal(a, b) for a, b in zip(masks, back, strict=True))
    with pytest.raises(EncodeError, match=r"frame 1: shape \(40, 31\)"):
        write_gray8([masks[0], np.zeros((40, 31), np.uint8)], tmp_path / "m2.mkv", 24)
    with pytest.raises(EncodeError, match="dtype uint16 must be uint8"):
        write_gray8([np.zeros((4, 4), np.uint16)], tmp_path / "m3.mkv", 24)
    with pytest.raises(EncodeError, match="no frames"):
        write_gray16([], tmp_path / "m4.mkv", 24)
    with pytest.raises(EncodeError, match=r"\.mkv"):
        write_gray16([np.zeros((4, 4), np.uint16)], tmp_path / "m5.mp4", 24)
    assert [p.name for p in tmp_path.iterdir()] == ["mask_A1.mkv"]


def test_depth_preview_h264_keeps_values(tmp_path):
    ramp = np.tile(np.arange(0, 256, 2, dtype=np.uint8), (64, 1))  # (64, 128) 0..254
    path = tmp_path / "depth_preview.mp4"
    assert write_preview_h264([ramp] * 4, path, 24) == 4
    info = probe(path)
    assert info.codec == "h264" and info.color_range == 2 and info.frames == 4
    luma = list(decode_gray(path))
    assert np.abs(luma[2].astype(int) - ramp).max() <= 3
    rgb = next(decode_frames(path))  # players see the same gray levels (full range)
    assert np.abs(rgb[..., 1].astype(int) - ramp).max() <= 3


def test_depth_preview_defaults_to_ultrafast_on_one_thread(tmp_path):
    # x264 writes its settings into the stream: ultrafast (no sub-pixel search) on one thread,
    # whose bytes do not depend on the machine's core count
    ramp = np.tile(np.arange(0, 256, 2, dtype=np.uint8), (64, 1))  # (64, 128)
    first, second = tmp_path / "a.mp4", tmp_path / "b.mp4"
    for path in (first, second):
        assert write_preview_h264([ramp] * 3, path, 24) == 3
    data = first.read_bytes()
    assert data == second.read_bytes()
    assert b" subme=0 " in data and b" threads=1 " in data


def _x264_options(path) -> bytes:
    """The options string x264 writes into the stream's first SEI message."""
    data = path.read_bytes()
    start = data.index(b"options: ") + len(b"options: ")
    return data[start : data.index(b"\x00", start)]


def test_colour_encodes_default_to_a_fixed_number_of_frame_threads_and_one_second_gops(tmp_path):
    # the default and the pipeline's shots use FRAME_THREADS frame threads (no slices), never
    # "auto", and a keyframe every second; an explicit count is kept
    from daotai.encode.video import FRAME_THREADS
    from daotai.run.settings import PipelineSettings, encode_settings_for

    frames = [np.full((64, 96, 3), v, np.uint8) for v in (10, 120, 230)]
    for name, settings in (("default", None), ("shot", encode_settings_for(PipelineSettings(), 96, 64)),
                           ("one", EncodeSettings(threads=1))):
        with VideoWriter(tmp_path / f"{name}.mp4", 96, 64, 24, settings) as writer:
            for frame in frames:
                writer.write(frame)
    for name in ("default", "shot"):
        options = _x264_options(tmp_path / f"{name}.mp4")
        assert f" threads={FRAME_THREADS} ".encode() in options and b" sliced_threads=0 " in options
        assert b" mbtree=0 " in options and b" keyint=24 " in options  # mbtree made bytes vary run to run
    assert b" threads=1 " in _x264_options(tmp_path / "one.mp4")


# --------------------------------------------------------------------------- bad inputs


def test_probe_and_decode_reject_missing_and_garbage(tmp_path):
    with pytest.raises(EncodeError, match="does not exist"):
        probe(tmp_path / "missing.mp4")
    garbage = tmp_path / "garbage.mp4"
    garbage.write_bytes(np.random.default_rng(1).integers(0, 256, 4096, np.uint8).tobytes())
    with pytest.raises(EncodeError, match="garbage.mp4"):
        probe(garbage)
    with pytest.raises(EncodeError, match="garbage.mp4"):
        decode_frames(garbage)  # raised on the call, not at the first frame
    with pytest.raises(EncodeError, match="missing.mkv"):
        decode_gray(tmp_path / "missing.mkv")
    with pytest.raises(EncodeError, match="max_side"):
        decode_frames(garbage, max_side=0)


def test_control_channels_are_the_same_bytes_on_every_write(tmp_path):
    # Matroska would stamp each file with a random segment UID; the manifest hashes these files.
    depth = [np.full((48, 64), 1000 * i, np.uint16) for i in range(3)]
    mask = [np.full((48, 64), 40 * i, np.uint8) for i in range(3)]
    for name, writer, frames in (("depth", write_gray16, depth), ("mask", write_gray8, mask)):
        writer(frames, tmp_path / f"{name}_a.mkv", 24)
        writer(frames, tmp_path / f"{name}_b.mkv", 24)
        assert (tmp_path / f"{name}_a.mkv").read_bytes() == (tmp_path / f"{name}_b.mkv").read_bytes(), name
