"""MiniMax-H3 in MLX: output error of the 4/8-bit transformer per bit width and group size, on a tiny model.

A 2-block random H3 transformer (width 128, 2 heads x 64, SwiGLU 256, AdaLN input 128: every
block linear divides into groups of 32, 64 and 128 as the released model's do) runs one
t2va-shaped packed sequence (8 text rows, 12 audio rows, 48 video rows, two noise levels).
Columns, relative L2 of the video and the audio velocity:
- ``weights``: quantised from float32 and run in float32, against float32 (the weights' error alone);
- ``vs fp32`` / ``vs bf16``: quantised from the bfloat16 weights and run in bfloat16, as the
  published checkpoint converts, against the float32 and the bfloat16 model.
The ``bf16`` row is the published precision itself. Random weights (MLX's fan-in uniform
init) have none of a trained model's outliers, so these bound the arithmetic, not the
released model's quality; that needs the real weights.

    python bench/h3_mlx_quant.py        # CPU (mlx[cpu] on Linux) or a Mac, a few seconds
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from h3_mlx_tiny import quantisation_error  # noqa: E402

SETTINGS = ((None, 0), (8, 32), (8, 64), (8, 128), (4, 32), (4, 64), (4, 128))


def main() -> None:
    print("precision   layers   weights video/audio    vs fp32 video/audio    vs bf16 video/audio")
    for bits, group in SETTINGS:
        err = quantisation_error(bits, group or 64)
        name = "bf16" if bits is None else f"{bits}-bit g{group}"
        print(f"{name:<10}  {err.layers:>6}   {err.weights_video:.2e} / {err.weights_audio:.2e}    "
              f"{err.converted_video_vs_fp32:.2e} / {err.converted_audio_vs_fp32:.2e}    "
              f"{err.converted_video_vs_bf16:.2e} / {err.converted_audio_vs_bf16:.2e}")
    kept = quantisation_error(4, 64, skip=("adaln_proj.linear",))
    print(f"4-bit g64 with the AdaLN projections kept at 16 bits ({kept.layers} layers): weights "
          f"{kept.weights_video:.2e} / {kept.weights_audio:.2e}, vs bf16 "
          f"{kept.converted_video_vs_bf16:.2e} / {kept.converted_audio_vs_bf16:.2e}")


if __name__ == "__main__":
    main()
