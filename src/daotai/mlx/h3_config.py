"""The MiniMax-H3 transformer's configuration, importable without MLX (the memory planner reads it).

Defaults are the released checkpoint's (diffusers' MiniMaxH3Transformer3DModel defaults):
50 blocks of width 5376, attention 56 heads x 128 (wider than the residual stream), SwiGLU FFN 14336.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Rows of the AdaLN table per timestep: one per modality tag (0 video, 1 text, 2 audio).
MODALITIES = 3


@dataclass(frozen=True)
class H3TransformerConfig:
    """The diffusers config of MiniMaxH3Transformer3DModel; defaults are the released model's."""

    num_attention_heads: int = 56
    attention_head_dim: int = 128
    hidden_size: int = 5376
    num_layers: int = 50
    num_refiner_layers: int = 2
    ffn_dim: int = 14336
    in_channels: int = 24
    audio_in_channels: int = 32
    patch_size: tuple[int, int, int] = (1, 2, 2)
    text_dim: int = 5120
    freq_dim: int = 256
    time_embed_hidden_dim: int = 5376
    time_embed_dim: int = 2688
    rope_freq_dim: int = 16
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    qk_norm_eps: float = 1e-5
    final_norm_eps: float = 1e-5

    def __post_init__(self):
        if 6 * self.rope_freq_dim > self.attention_head_dim:
            raise ValueError(f"rope_freq_dim={self.rope_freq_dim}: 6 * rope_freq_dim must be <= attention_head_dim "
                             f"({self.attention_head_dim}), the channels rotated per head")

    @property
    def inner_dim(self) -> int:
        """Attention width heads * head_dim (wider than hidden_size in the released model)."""
        return self.num_attention_heads * self.attention_head_dim

    @property
    def video_patch_dim(self) -> int:
        """Channels of one patchified video row: in_channels * pt * ph * pw."""
        return self.in_channels * math.prod(self.patch_size)

    @classmethod
    def from_dict(cls, cfg: dict) -> "H3TransformerConfig":
        """Build from a diffusers config.json dict (its ``_class_name`` / ``_diffusers_version`` keys ignored)."""
        names = set(cls.__dataclass_fields__)
        kw = {k: v for k, v in cfg.items() if k in names}
        if "patch_size" in kw:
            kw["patch_size"] = tuple(kw["patch_size"])
        return cls(**kw)
