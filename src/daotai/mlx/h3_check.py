"""h3-mlx in ``daotai doctor`` (what fits on each Mac size) and in ``scripts/mac-check.sh`` (a timed render).

Both read the planner (:mod:`daotai.mlx.h3_memory`) with the conditioner at the bit width the
backend runs it today (16: torch, see :mod:`daotai.render.h3_mlx`). Nothing here imports MLX or
torch until a render is asked for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from daotai.mlx.h3_memory import DEFAULT_FRAMES, H3_BITS, H3_CANVASES, H3Sizes, folder_h3_sizes, h3_peak
from daotai.mlx.memory import GB, MAC_SIZES_GB, working_set_bytes

# The h3-mlx backend's conditioner runs in torch at the checkpoint's precision (bf16 on MPS; float32 on a
# CPU, counted at 16 like the rest): daotai.render.h3_mlx plans with this value too.
TORCH_CONDITIONER_BITS = 16
CHECK_CANVAS = "480p"  # the timed render: one 5 s t2va generation on the smallest canvas
CHECK_STEPS = 8  # enough steps for a stable s/step; a real render takes 50


def fits_on(budget_bytes: float, workflow: str = "ref2va", pictures: int = 2, frames: int = DEFAULT_FRAMES,
            conditioner_bits: int | None = TORCH_CONDITIONER_BITS, sizes: H3Sizes | None = None
            ) -> dict[str, int | None]:
    """For each canvas, the least compressed bit width whose peak fits ``budget_bytes`` (None: none fits);
    ``sizes``: a folder's instead of the released model's."""
    out: dict[str, int | None] = {}
    for canvas, (width, height) in H3_CANVASES.items():
        out[canvas] = next((bits for bits in sorted(H3_BITS, reverse=True)
                            if h3_peak(bits, width, height, frames, workflow, pictures, conditioner_bits=conditioner_bits,
                                       sizes=sizes).peak_bytes <= budget_bytes), None)
    return out


def describe_fit(found: dict[str, int | None]) -> str:
    """'480p 8-bit, 720p 4-bit, 768p no' for one Mac."""
    return ", ".join(f"{canvas} {'no' if bits is None else f'{bits}-bit'}" for canvas, bits in found.items())


def h3_doctor_rows(this_mac: tuple[int, int, str] | None = None) -> list[tuple[str, str]]:
    """(check, finding) rows: for each common Mac size (and this Mac), the bit width each canvas needs for a 5 s
    ref2va shot (previz video and two pictures), with the conditioner as the backend runs it today."""
    rows = []
    what = f"5 s ref2va, conditioner {TORCH_CONDITIONER_BITS}-bit (torch)"
    for gb in MAC_SIZES_GB:
        ws = working_set_bytes(gb)
        rows.append((f"h3-mlx {gb} GB Mac", f"GPU ~{ws / GB:.0f} GB, {what}: {describe_fit(fits_on(ws))}"))
    if this_mac is not None:
        unified, ws, how = this_mac
        rows.append((f"h3-mlx this Mac ({unified / GB:.0f} GB)",
                     f"GPU {ws / GB:.0f} GB ({how}), {what}: {describe_fit(fits_on(ws))}"))
    return rows


class WeightsMissing(Exception):
    """The MiniMax-H3 weights the timed render needs are not on this machine (the message says how to get them)."""


def find_h3_weights(model: str | None) -> Path:
    """The MiniMax-H3 folder to time: ``model`` (a folder, converted or not, or a registry name), else the pulled
    minimax-h3; WeightsMissing naming the commands that would provide it."""
    from daotai import catalog
    from daotai.runtime.model_lookup import pulled_model

    if model is not None:
        path = Path(model).expanduser()
        if path.is_dir():
            return path.resolve()
    name = model or "minimax-h3"
    spec = catalog.models().get(name)
    pulled = pulled_model(spec) if spec is not None else None
    if pulled is None:
        raise WeightsMissing(
            f"MiniMax-H3 weights not found ({name!r} is neither a folder nor a pulled model): to time h3-mlx, run "
            "`daotai models pull minimax-h3 --workflow t2va --accept-licence` (~140 GB), then `daotai models convert minimax-h3 --to mlx "
            "--bits 4 -o minimax-h3-mlx-q4` (~35 GB more), then `scripts/mac-check.sh --h3-model minimax-h3-mlx-q4`")
    return pulled.path


def h3_mlx_check_plan(model: str | None, quick: bool) -> tuple[Path, dict[str, Any], dict[str, Any] | None]:
    """What the timed h3-mlx render of the check will be: (the folder, the report's fields so far, the script to
    render, or None when the planner says it does not fit this machine, the reason then in the fields' status).

    Raises WeightsMissing (the section is then skipped, saying what to get), and in quick mode.
    """
    from daotai.mlx.h3_convert import h3_source
    from daotai.mlx.memory import memory_budget

    if quick:
        raise WeightsMissing("quick check: MiniMax-H3 (140 GB of weights) is timed only by the full check")
    folder = find_h3_weights(model)
    source, converted, manifest = h3_source(folder)
    bits = int(manifest["bits"]) if manifest is not None else 16
    group = int(manifest["group_size"]) if manifest is not None else 64
    sizes = folder_h3_sizes(source, converted)  # the folder's own sizes (the released model's when it is that)
    width, height = H3_CANVASES[CHECK_CANVAS]
    estimate = h3_peak(bits, width, height, DEFAULT_FRAMES, "t2va", group_size=group,
                       conditioner_bits=TORCH_CONDITIONER_BITS, sizes=sizes)
    budget = memory_budget()
    fields: dict[str, Any] = {"folder": folder.name, "converted": converted is not None, "bits": bits,
                              "canvas": f"{width}x{height}", "frames": DEFAULT_FRAMES, "steps": CHECK_STEPS,
                              "estimate_gib": round(estimate.peak_bytes / 1024**3, 1),
                              "budget_gib": round(budget.bytes / 1024**3, 1), "budget_source": budget.source}
    if estimate.peak_bytes > budget.bytes:
        fit = describe_fit(fits_on(budget.bytes, "t2va", 0, sizes=sizes))
        fields["status"] = (f"does not fit: the planner estimates {fields['estimate_gib']} GiB at {bits} bits over "
                            f"this machine's {fields['budget_gib']} GiB; what fits here (t2va): {fit}")
        return folder, fields, None
    script = {
        "title": "mac check h3", "fps": 24, "size": [width, height], "seed": 7,
        "scene": {"name": "office", "description": "a quiet office at day"},
        "characters": [{"id": "lin", "description": "a woman in a blue shirt", "colour": "blue"}],
        "shots": [{"shot_id": "talk", "duration": 5.0, "subject": "lin", "framing": "medium",
                   "dialogue": [{"character": "lin", "line": "Good morning."}], "sound": "rain on the window"}],
    }
    return folder, fields, script
