"""Encode policy: the settings a render's videos get from the codec asked for, the frame
size and the backend's :class:`~daotai.render.spec.EncodeDefaults`."""

from __future__ import annotations

from daotai.encode.video import EncodeSettings
from daotai.render.spec import EncodeDefaults

LARGE_FRAME_PIXELS = 1280 * 720  # at and above this, the backend's large-frame preset applies
# One x264 thread: threaded x264 did not give the same bytes for the same frames from run to
# run (one 320x180 shot on 2 busy cores: 3 different files in 150 encodes with slice threads,
# 2 in 200 with 3 frame threads; with 1 thread always the same file), and "auto" follows the
# core count, so bytes would also differ between a laptop, a cluster node and CI. Encoders run
# beside the renderer (in processes or threads), so one thread each costs no wall time there.
ENCODE_THREADS = 1


def encode_settings(codec: str, crf: int | None, preset: str | None, defaults: EncodeDefaults,
                    width: int = 0, height: int = 0) -> EncodeSettings:
    """The user's choices where given, else the backend's defaults for this frame size (none for ProRes)."""
    if codec == "prores":
        defaults = EncodeDefaults()
    if preset is None:
        preset = defaults.large_preset if width * height >= LARGE_FRAME_PIXELS else "veryfast"
    return EncodeSettings(codec=codec, crf=crf if crf is not None else defaults.crf, preset=preset,  # type: ignore[arg-type]
                          tune=defaults.tune, threads=ENCODE_THREADS)
