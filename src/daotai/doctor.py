"""`daotai doctor` (a front end): what this machine can do, collected without side effects."""

from __future__ import annotations

import importlib.util
import os
import platform
from dataclasses import dataclass
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from daotai.render.cost import hours_for
from daotai.runtime.memory import GIB, choose_settings, gpus_that_fit
from daotai.script.schema import SIZE_PRESETS


@dataclass(frozen=True)
class Check:
    name: str
    value: str
    ok: bool


def _total_ram_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def _package_version(name: str) -> str | None:
    if importlib.util.find_spec(name) is None:
        return None
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "present"


def _accelerator() -> tuple[str, int]:
    """('cuda: NAME' | 'mps' | 'none', memory bytes usable by the accelerator)."""
    if importlib.util.find_spec("torch") is None:
        return "unknown (torch not installed: pip install 'daotai[neural]')", 0
    import torch

    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        return f"cuda: {props.name}", int(props.total_memory)
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        # Unified memory: Metal's working set is about 2/3–3/4 of RAM by default.
        return "mps (Apple Silicon)", int(_total_ram_bytes() * 0.70)
    return "none (CPU only)", _total_ram_bytes()


def _speed_levers(accel: str) -> list[Check]:
    """What ``--speed exact`` and ``--speed fast`` turn on here (kernels probed on CUDA); a family
    whose fast mode has choices of its own (Wan's cadence, LTX-Video's and MiniMax-H3's VAE) gets a row of its own."""
    if importlib.util.find_spec("torch") is None:
        return []
    from daotai.render.speed import levers_for, resolve_levers, tuned_families

    kind = "cuda" if accel.startswith("cuda") else "mps" if accel.startswith("mps") else "cpu"
    rows = [(f"speed {mode}", mode, None) for mode in ("exact", "fast")]
    rows += [(f"speed fast ({family})", "fast", family) for family in tuned_families()]
    return [Check(name, resolve_levers(levers_for(mode, kind, family), kind).levers_text(), True)
            for name, mode, family in rows]


def _encoders() -> str:
    """The software encoders this FFmpeg build has (the hardware ones have their own row, opened for real)."""
    import av

    names = []
    for codec in ("libx264", "libx265", "prores_ks", "ffv1", "libsvtav1"):
        try:
            av.codec.Codec(codec, "w")
            names.append(codec)
        except Exception:  # noqa: BLE001  (PyAV raises several kinds for a codec this build lacks)
            continue
    return ", ".join(names)


def _hardware_encoders(accel: str = "") -> Check:
    """What `render --encoder hardware` would find: each of the platform's hardware encoders opened for a
    few tiny frames (compiled in is not enough: NVENC is in PyAV's Linux wheels and fails without a GPU).
    NVENC is named only where there is an NVIDIA GPU; elsewhere the row says there is none to use."""
    from daotai.encode.hardware import installed_probes, summarise

    probes = list(installed_probes().values())
    usable = [p for p in probes if p.opens]
    if not usable and probes and all("nvenc" in p.name for p in probes) and not _nvidia(accel):
        return Check("hardware encoders (--encoder)", "none: NVENC needs an NVIDIA GPU and there is none here "
                     "(renders use the software encoder)", False)
    return Check("hardware encoders (--encoder)", summarise(probes), bool(usable))


def _nvidia(accel: str) -> bool:
    """Whether there is an NVIDIA GPU: CUDA that is not a ROCm build answering as CUDA, or, when torch
    cannot see one (a CPU-only torch), the NVIDIA driver's device node."""
    if accel.startswith("cuda"):
        import torch

        return getattr(torch.version, "hip", None) is None
    return Path("/dev/nvidiactl").exists()


# A shot taking longer than this on one machine is called impractical: a short film of a dozen
# shots would take days.
IMPRACTICAL_SHOT_S = 3600.0
PRACTICAL_MODELS = ("wan2.1-t2v-1.3b", "wan2.1-t2v-14b")  # what doctor times: the smallest and the largest Wan


def _practicality(accel: str, accel_bytes: int, flops: tuple[float, str] | None = None) -> list[Check]:
    """Whether each Wan model is usable here, not only whether it fits: memory (the planner) and time
    for one 5 s draft shot (render.cost's rule at this machine's measured matmul rate)."""
    from daotai.render.cost import matmul_flops, neural_seconds_per_shot

    if flops is None:
        if importlib.util.find_spec("torch") is None:
            return []
        flops = matmul_flops()
    rate, device = flops
    width, height = SIZE_PRESETS["draft"]
    checks = []
    for model in PRACTICAL_MODELS:
        seconds, frames = neural_seconds_per_shot(model, width, height, 5.0, rate)
        fit = choose_settings(model, width, height, frames, accel_bytes * 0.9) if accel_bytes else None
        took = hours_for(seconds)
        if fit is None:
            value, ok = f"does not fit in memory here (would take {took} a shot even if it did)", False
        elif seconds > IMPRACTICAL_SHOT_S:
            value, ok = f"fits ({fit.offload} offload) but would take {took} a shot on {device}: impractical here", False
        else:
            value, ok = f"fits ({fit.offload} offload), {took} a shot on {device}", True
        checks.append(Check(f"{model}, 5 s draft shot (estimate)", value, ok))
    checks.append(Check("matmul rate (measured)", f"{rate / 1e12:.3g} TFLOP/s on {device} "
                        f"({'bf16' if device.split(':')[0] in ('cuda', 'mps') else 'float32'})", True))
    return checks


def _split_check(accel: str, accel_bytes: int) -> Check:
    """How many GPUs one 14B shot needs when its sequence is split (``--gpus``), by preset, and how many are here."""
    gpus_here = 0
    if accel.startswith("cuda"):
        import torch

        gpus_here = torch.cuda.device_count()
    fits = []
    for preset in ("draft", "final"):
        width, height = SIZE_PRESETS[preset]
        needed = gpus_that_fit("wan2.1-t2v-14b", width, height, 81, accel_bytes * 0.9)
        fits.append(f"{preset}: " + ("no split fits" if needed is None else f"--gpus {needed}"))
    return Check(f"wan 14B, 81 frames, split (GPUs here: {gpus_here})", "; ".join(fits), True)  # a finding


def collect() -> list[Check]:
    """Every check, in display order."""
    checks = [
        Check("os", f"{platform.system()} {platform.release()} ({platform.machine()})", True),
        Check("python", platform.python_version(), True),
        Check("cpu cores", str(os.cpu_count()), True),
        Check("memory", f"{_total_ram_bytes() / GIB:.1f} GiB", True),
    ]
    accel, accel_bytes = _accelerator()
    checks.append(Check("accelerator", accel, not accel.startswith("none")))
    for package in ("torch", "diffusers", "transformers", "accelerate"):
        found = _package_version(package)
        checks.append(Check(package, found or "not installed (pip install 'daotai[neural]')", found is not None))
    checks.extend(_speed_levers(accel))
    checks.append(Check("video encoders", _encoders(), True))
    checks.append(_hardware_encoders(accel))
    try:
        from daotai.render.previz.gl_context import context_backend, create_context, describe_context

        ctx = create_context()  # the renderer's own settings: the first context fixes llvmpipe's threads
        renderer = f"{describe_context(ctx)} ({context_backend() or 'platform default'} context)"
        ctx.release()
        checks.append(Check("previz OpenGL", renderer, True))
    except Exception as exc:  # noqa: BLE001  (a missing driver is a finding, not a crash)
        checks.append(Check("previz OpenGL", f"unavailable: {exc}", False))
    if accel_bytes:
        fits = []
        for preset in ("preview", "draft", "final"):
            width, height = SIZE_PRESETS[preset]
            est = choose_settings("wan2.1-t2v-1.3b", width, height, 81, accel_bytes * 0.9)
            fits.append(f"{preset}: " + (
                f"fits ({est.offload} offload{', VAE tiling' if est.vae_tiling else ''}, {est.peak_bytes / GIB:.0f} GiB)"
                if est else "does not fit"))
        checks.append(Check("wan 1.3B, 81 frames (estimate)", "; ".join(fits), True))
        checks.append(_split_check(accel, accel_bytes))
        checks.extend(_practicality(accel, accel_bytes))
        checks.append(ltx2_check(accel_bytes))
    # wan-mlx on Apple Silicon: what fits on each common Mac size, and on this Mac when it is one
    # (planning only, no MLX import; this_mac() is None unless macOS on arm64)
    from daotai.mlx.memory import doctor_rows, this_mac

    checks.extend(Check(name, value, True) for name, value in doctor_rows(this_mac()))
    checks.extend(h3_mac_checks())
    checks.append(plugin_check())
    from daotai.mlx.h3_check import h3_doctor_rows  # h3-mlx: the bit width each canvas needs per Mac size

    checks.extend(Check(name, value, True) for name, value in h3_doctor_rows(this_mac()))
    return checks


def plugin_check() -> Check:
    """Which installed plugins (backends, model rows) loaded and which were skipped, and why."""
    from daotai import catalog
    from daotai.plugins import NO_PLUGINS_ENV, plugins_enabled, skipped
    from daotai.render.registry import BUILTIN_MODULES, specs

    if not plugins_enabled():
        return Check("plugins", f"off ({NO_PLUGINS_ENV} is set): built-in backends only", True)
    names = list(specs())[len(BUILTIN_MODULES):]  # built-ins first, then the plugins' backends
    catalog.families()  # loads the model rows' plugins too
    problems = skipped()
    found = f"backends: {', '.join(names)}" if names else "no plugin backends"
    return Check("plugins", "; ".join([found, *map(str, problems)]), not problems)


def ltx2_check(accel_bytes: int) -> Check:
    """LTX-2 (picture and sound): the memory tier a 5 s shot at each preset takes here (planning only)."""
    from daotai.plan.timing import round_size, snap_frames

    fits = []
    for preset in ("preview", "draft", "final"):
        width, height = round_size(*SIZE_PRESETS[preset], 32)  # LTX-2's 32-pixel grid
        est = choose_settings("ltx-2", width, height, snap_frames(5 * 24, 8), accel_bytes * 0.9)
        fits.append(f"{preset}: " + (f"fits ({est.offload} offload, {est.peak_bytes / GIB:.0f} GiB)" if est
                                     else "does not fit"))
    return Check("ltx-2, 5 s with sound (estimate)", "; ".join(fits), True)


def h3_mac_checks() -> list[Check]:
    """MiniMax-H3 on Apple Silicon: which Mac sizes hold a 5 s 1344x768 t2va generation (planning only).

    One memory pool: every component counts, the conditioner too; int8 rows halve the transformer.
    """
    from dataclasses import replace

    from daotai import catalog
    from daotai.mlx.memory import MAC_SIZES_GB, working_set_bytes
    from daotai.runtime.memory import estimate

    footprint = catalog.footprint("minimax-h3")
    assert footprint is not None
    whole = replace(footprint, releasable_text_encoder=False)
    checks = []
    for label, model in (("bf16", whole), ("int8 weights", whole.with_one_byte_linears())):
        need = estimate(model, 1344, 768, 124, 2.0).peak_bytes
        sizes = ", ".join(f"{gb} GB {'fits' if need <= working_set_bytes(gb) else 'no'}" for gb in MAC_SIZES_GB)
        checks.append(Check(f"MiniMax-H3 5 s on a Mac, {label} (estimate)", f"~{need / GIB:.0f} GiB: {sizes}", True))
    return checks


def render_table(checks: list[Check]) -> Table:
    """A rich table of the checks."""
    table = Table(title="daotai doctor", show_header=True)
    table.add_column("check")
    table.add_column("finding")
    for check in checks:
        value = escape(check.value)
        table.add_row(escape(check.name), value if check.ok else f"[yellow]{value}[/yellow]")
    return table
