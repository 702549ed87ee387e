"""Encode fidelity: do the delivered frames keep what was rendered?

Frames kept while rendering are compared with their decoded copies (PSNR). The thresholds are
shared with the encoder choice (daotai.run.encoder_choice gates a codec on the same numbers), so
they live here with the one measurement that applies them, not inside the shot report.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

PSNR_MEAN_MIN_DB = 38.5
PSNR_STD_MAX_DB = 1.2
# Encode fidelity fails on what a user can act on: a mean below PSNR_MEAN_MIN_DB, or one frame
# more than three allowed spreads below it (a frame the encoder starved). The spread itself is
# a warning: across a shot it follows the picture's detail far more than the encoder (a push-in
# that ends on a plain shirt, a crash zoom from a busy wide frame to a face), and no setting
# evens it out. Frames whose rendered luma varies less than FLAT_LUMA_STD code values (a wall or
# a shirt filling the frame, a fade's black) are left out: there PSNR measures nothing but the
# encoder's noise floor and runs to 50 dB or infinity.
PSNR_FRAME_MIN_DB = PSNR_MEAN_MIN_DB - 3 * PSNR_STD_MAX_DB
FLAT_LUMA_STD = 10.0
FIDELITY_ADVICE = "re-render with --codec prores (near-lossless) or --codec hevc"


def check_fidelity(samples: dict[int, np.ndarray],
                   decoded: dict[int, np.ndarray]) -> tuple[dict[str, Any], list[str], list[str]]:
    """The "fidelity" entry of rendered frames against their decoded copies, its failures and
    warnings (see PSNR_FRAME_MIN_DB and FLAT_LUMA_STD for what is judged and why)."""
    from daotai.qc.metrics import frame_stats, psnr

    compared = [i for i in sorted(samples) if i in decoded]
    flat = [i for i in compared if frame_stats(samples[i]).std_luma < FLAT_LUMA_STD]
    values = {i: psnr(samples[i], decoded[i]) for i in compared if i not in flat}
    finite = {i: v for i, v in values.items() if math.isfinite(v)}  # inf: decoded exactly
    mean = float(np.mean(list(finite.values()))) if finite else math.inf
    std = float(np.std(list(finite.values()))) if len(finite) > 1 else 0.0
    worst = min(finite, key=finite.__getitem__) if finite else None
    entry = {
        "frames_compared": len(compared),
        "frames_flat_excluded": flat,
        "psnr_mean_db": round(mean, 3) if math.isfinite(mean) else None,
        "psnr_std_db": round(std, 3),
        "psnr_min_db": round(finite[worst], 3) if worst is not None else None,
        "psnr_min_frame": worst,
        "rule": (f"mean >= {PSNR_MEAN_MIN_DB} dB and every frame >= {PSNR_FRAME_MIN_DB:.1f} dB; "
                 f"std <= {PSNR_STD_MAX_DB} dB is a warning; frames with luma std under "
                 f"{FLAT_LUMA_STD:g} are left out"),
    }
    failures: list[str] = []
    warnings: list[str] = []
    if len(compared) != len(samples):
        failures.append(f"only {len(compared)} of {len(samples)} sampled frames could be decoded")
    elif math.isfinite(mean) and mean < PSNR_MEAN_MIN_DB:
        failures.append(f"encode fidelity: PSNR {mean:.1f} dB on average, under {PSNR_MEAN_MIN_DB} dB: "
                        f"the encode loses visible detail; {FIDELITY_ADVICE}")
    elif worst is not None and finite[worst] < PSNR_FRAME_MIN_DB:
        failures.append(f"encode fidelity: frame {worst} at {finite[worst]:.1f} dB, under "
                        f"{PSNR_FRAME_MIN_DB:.1f} dB: the encoder starved it; {FIDELITY_ADVICE}")
    elif std > PSNR_STD_MAX_DB:
        warnings.append(f"encode fidelity varies {std:.1f} dB across the shot (over {PSNR_STD_MAX_DB} dB), "
                        f"every frame at {finite[worst]:.1f} dB or better: the picture's detail changes "
                        f"along the shot; nothing to fix unless frame {worst} looks soft")
    return entry, failures, warnings


def fidelity_words(entry: dict[str, Any], failures: list[str]) -> tuple[list[str], str]:
    """The fidelity verdict's failures and its passing text, each saying how many near-flat frames
    were left out (a plain wall, a fade's black: they say nothing about the encode)."""
    mean = entry["psnr_mean_db"]
    flat = len(entry["frames_flat_excluded"])
    left_out = f" ({flat} near-flat frame{'s' if flat > 1 else ''} left out)" if flat else ""
    return ([problem + left_out for problem in failures],
            (f"encode PSNR {mean:.1f} dB" if mean is not None else "encode lossless") + left_out)
