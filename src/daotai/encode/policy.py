"""Encode policy: the settings a render's videos get from the codec asked for, the frame
size and the backend's :class:`~daotai.render.spec.EncodeDefaults`."""

from __future__ import annotations

from daotai.encode.video import FRAME_THREADS, EncodeSettings
from daotai.render.spec import EncodeDefaults

LARGE_FRAME_PIXELS = 1280 * 720  # at and above this, the backend's large-frame preset applies
# A fixed number of x264 frame threads (FRAME_THREADS), never "auto": x264's bytes depend on its
# thread count and on nothing else of the machine, so a laptop, a cluster node and CI write the
# same files. (One thread was the rule while mbtree made even one-thread bytes vary; with mbtree
# off, threaded encodes match run to run and across CPU affinities: tests/test_encode_threads.py.)
ENCODE_THREADS = FRAME_THREADS


def encode_settings(codec: str, crf: int | None, preset: str | None, defaults: EncodeDefaults,
                    width: int = 0, height: int = 0) -> EncodeSettings:
    """The user's choices where given, else the backend's defaults for this frame size (none for ProRes)."""
    if codec == "prores":
        defaults = EncodeDefaults()
    if preset is None:
        preset = defaults.large_preset if width * height >= LARGE_FRAME_PIXELS else "veryfast"
    return EncodeSettings(codec=codec, crf=crf if crf is not None else defaults.crf, preset=preset,  # type: ignore[arg-type]
                          tune=defaults.tune, threads=ENCODE_THREADS)
