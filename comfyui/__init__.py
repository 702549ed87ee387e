"""daotai's ComfyUI node pack: the loader ComfyUI's ``custom_nodes`` scanner imports.

Install (README, "ComfyUI"): put daotai into ComfyUI's Python environment
(``pip install -e /path/to/daotai``) and link this folder into ``ComfyUI/custom_nodes``
(``ln -s /path/to/daotai/comfyui ComfyUI/custom_nodes/daotai``). The nodes live in
:mod:`daotai.comfy.nodes`; this file only hands ComfyUI their ``comfy_entrypoint`` (the V3
node-pack entry point, ``comfy_api.latest``).
"""

from __future__ import annotations

from pathlib import Path

try:
    from daotai.comfy.nodes import comfy_entrypoint
except ModuleNotFoundError as missing:
    if missing.name != "daotai" and not (missing.name or "").startswith("daotai."):
        raise
    _repo = Path(__file__).resolve().parent.parent
    raise ModuleNotFoundError(
        "the daotai ComfyUI nodes need daotai installed in ComfyUI's Python environment; install it with: "
        f"{'pip install -e ' + str(_repo) if (_repo / 'pyproject.toml').is_file() else 'pip install daotai'}",
        name=missing.name,
    ) from None

__all__ = ["comfy_entrypoint"]
