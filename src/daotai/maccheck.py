"""`daotai doctor --check` (a front end; ``scripts/mac-check.sh`` wraps it): one run that measures
what this machine does with daotai and writes it to one report to send back.

Sections, each timed and each allowed to fail on its own (a failure is written into the report,
the other sections still run):

- ``machine``: OS, chip, memory, library versions.
- ``doctor``: every ``daotai doctor`` row.
- ``previz``: every bundled example rendered with the previz backend at the ``preview`` preset,
  with QC (quick: the first second of ``minimal.json``'s first shot at 320x180, camera QC off).
- ``mlx_parity``: the tiny random Wan transformer, VAE decoder and UMT5 encoder in MLX against
  diffusers/transformers in torch on the same machine (MPS when torch has it, else CPU).
- ``wan_mlx``: a timed render of a one-shot script through ``wan-mlx`` (and ``wan-vace-mlx``
  when that backend is registered) at each transformer precision that fits — float32, 8-bit and
  4-bit — with the peak memory at each stage the backend samples (halfway through denoising,
  after decoding) beside the memory planner's estimate. The tiny model always; the published
  ``wan2.1-t2v-1.3b`` too when it has been pulled (not in quick mode).
- ``encode``: every hardware encoder that opens here (VideoToolbox on a Mac, NVENC elsewhere)
  against the software encoder: encode speed and PSNR on the synthetic test clip, judged by the
  encode-fidelity gate; "not available" when none opens.

The report is ``mac-check.json`` (everything) and ``mac-check.md`` (the same, readable) in the
report folder; docs/mlx.md says how to read them and send them back.
"""

from __future__ import annotations

import json
import math
import platform
import resource
import shutil
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from fractions import Fraction
from pathlib import Path
from typing import Any

REPORT_VERSION = 1
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"  # the checkout's examples (the script runs from it)
REAL_MODEL = "wan2.1-t2v-1.3b"
PRECISIONS: tuple[int | None, ...] = (None, 8, 4)  # transformer bits (None: float32), least compressed first
QUICK_PRECISIONS: tuple[int | None, ...] = (None, 4)
QUICK_SHOT_S = 1.0  # quick mode renders this much of the first example shot
GROUP_SIZE = 64
# The timed script: one 1 s shot (17 frames at Wan's 16 fps). Tiny model: 64x64, 2 steps; the
# published model: 832x480 (Wan2.1-1.3B's native size), 10 steps, enough for a stable s/step.
TINY_RENDER = {"size": "64x64", "steps": 2}
REAL_RENDER = {"size": "832x480", "steps": 10}
# Parity bounds: those of tests/test_mlx_parity.py on the CPU; MPS float32 kernels reorder sums,
# so its torch side is allowed ten times more.
PARITY_BOUNDS = {"transformer": 1e-4, "vae_decode": 1e-3, "umt5": 1e-4}
MPS_SLACK = 10.0


@dataclass(frozen=True)
class CheckConfig:
    """What one check run does."""

    report_dir: Path
    quick: bool = False  # minutes, not an hour: CI on Linux runs this
    examples: Path = EXAMPLES
    model: str | None = None  # a real Wan model to time besides the tiny one (default: REAL_MODEL when pulled)
    h3_model: str | None = None  # a MiniMax-H3 folder (converted or not) to time (default: minimax-h3 when pulled)
    say: Callable[[str], None] = field(default=lambda line: None, compare=False)


# ------------------------------------------------------------------ running sections


def _section(name: str, work: Callable[[], Any], say: Callable[[str], None]) -> dict[str, Any]:
    """Run one section: {"status": ok | skipped | error, "seconds", "result" | "reason" | "error"}."""
    from daotai.errors import DependencyMissing
    from daotai.mlx.h3_check import WeightsMissing

    say(f"mac-check: {name} …")
    started = time.perf_counter()
    try:
        result = work()
        entry: dict[str, Any] = {"status": "ok", "result": result}
    except (DependencyMissing, ImportError, WeightsMissing) as exc:
        entry = {"status": "skipped", "reason": str(exc)}
    except Exception as exc:  # noqa: BLE001  (one failing section is a finding; the report still gets written)
        entry = {"status": "error", "error": f"{type(exc).__name__}: {exc}",
                 "traceback": traceback.format_exc(limit=6)}
    entry["seconds"] = round(time.perf_counter() - started, 2)
    say(f"mac-check: {name} {entry['status']} in {entry['seconds']} s")
    return entry


def run_check(config: CheckConfig) -> dict[str, Any]:
    """Every section, then the report written to ``config.report_dir``; returns the report."""
    config.report_dir.mkdir(parents=True, exist_ok=True)
    work = config.report_dir / "work"
    work.mkdir(exist_ok=True)
    started = time.perf_counter()
    report: dict[str, Any] = {
        "report_version": REPORT_VERSION,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "quick": config.quick,
        "command": "daotai doctor --check" + (" --quick" if config.quick else ""),
    }
    say = config.say
    report["machine"] = _section("machine", machine, say)
    report["doctor"] = _section("doctor", doctor_rows, say)
    report["previz"] = _section("previz", lambda: previz(config, work / "previz"), say)
    report["mlx_parity"] = _section("mlx_parity", lambda: mlx_parity(work / "models"), say)
    report["wan_mlx"] = _section("wan_mlx", lambda: wan_mlx(config, work), say)
    report["encode"] = _section("encode", lambda: encode(config.quick), say)
    report["h3_mlx"] = _section("h3_mlx", lambda: _h3_mlx(config, work), say)
    report["seconds"] = round(time.perf_counter() - started, 1)
    write_report(report, config.report_dir)
    return report


# ------------------------------------------------------------------ machine and doctor


def _run_text(*command: str) -> str:
    """A command's stripped output, '' when it fails or is missing."""
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _cpu_name() -> str:
    if sys.platform == "darwin":
        return _run_text("sysctl", "-n", "machdep.cpu.brand_string") or platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def machine() -> dict[str, Any]:
    """What this machine is, and the library versions that decide the numbers."""
    from importlib.metadata import PackageNotFoundError, version

    from daotai import __version__
    from daotai.mlx.memory import total_ram_bytes

    libraries = {}
    for name in ("mlx", "torch", "diffusers", "transformers", "av", "moderngl", "numpy"):
        try:
            libraries[name] = version(name)
        except PackageNotFoundError:
            libraries[name] = None
    return {
        "os": f"{platform.system()} {platform.release()}",
        "arch": platform.machine(),
        "model": _run_text("sysctl", "-n", "hw.model") if sys.platform == "darwin" else "",
        "cpu": _cpu_name(),
        "memory_gb": round(total_ram_bytes() / 1e9, 1),
        "python": platform.python_version(),
        "daotai": __version__,
        "libraries": libraries,
    }


def doctor_rows() -> list[dict[str, Any]]:
    """Every row of ``daotai doctor``."""
    from daotai.doctor import collect

    return [asdict(check) for check in collect()]


# ------------------------------------------------------------------ previz


@dataclass
class Rendered:
    """What one pipeline run gave: its result, notices, wall time and when each denoising step ended."""

    result: Any
    notices: list[str]
    wall_s: float
    step_times: list[float]  # perf_counter() at each "denoise" progress event


def _render(plan: Any, out: Path, settings: Any, health: Callable[[Any], dict] | None = None) -> Rendered:
    """Run the pipeline to its end, keeping what the report needs."""
    from daotai.events import Notice, Progress
    from daotai.run.pipeline import run
    from daotai.run.records import Finished

    notices: list[str] = []
    steps: list[float] = []
    result = None
    shutil.rmtree(out, ignore_errors=True)  # the check's own work folder: each run starts from nothing
    started = time.perf_counter()
    for event in run(plan, out, settings, health=health):
        if isinstance(event, Notice):
            notices.append(event.text)
        elif isinstance(event, Progress) and event.stage == "denoise":
            steps.append(time.perf_counter())
        elif isinstance(event, Finished):
            result = event.result
    return Rendered(result, notices, time.perf_counter() - started, steps)


def previz(config: CheckConfig, work: Path) -> list[dict[str, Any]]:
    """Every example rendered with previz and QC (quick: minimal.json's first shot at 320x180)."""
    from daotai.plan.planner import plan_script
    from daotai.run.settings import PipelineSettings
    from daotai.script.load import load_script
    from daotai.script.presets import apply_preset, apply_size

    paths = sorted(config.examples.glob("*.json"))
    if config.quick:
        paths = [p for p in paths if p.name == "minimal.json"] or paths[:1]
    if not paths:
        raise FileNotFoundError(f"no example scripts in {config.examples}")
    rows = []
    for path in paths:
        script = load_script(path)
        if config.quick:  # the first shot, 1 s of it, small: the same code path in a few seconds
            first = script.shots[0].model_copy(update={"duration": min(script.shots[0].duration, QUICK_SHOT_S)})
            script = apply_size(script.model_copy(update={"shots": [first]}), "320x180")
        else:
            script = apply_preset(script, "preview")
        plan = plan_script(script)
        done = _render(plan, work / path.stem, PipelineSettings(camera_qc=not config.quick))
        result, notices, wall = done.result, done.notices, done.wall_s
        frames = sum(s.frames for s in plan.shots)
        qc = json.loads(Path(result.qc_path).read_text(encoding="utf-8"))
        rows.append({
            "example": path.name, "size": f"{plan.width}x{plan.height}", "shots": len(plan.shots), "frames": frames,
            "wall_s": round(wall, 2), "fps": round(frames / wall, 1), "qc_ok": bool(result.qc_ok),
            "qc_failures": [f"{s.get('shot_id')}: {v}" for s in qc.get("shots", []) if isinstance(s, dict)
                            for v in s.get("problems", []) or []][:10],
            "renderer": next((n.split("previz OpenGL: ", 1)[1] for n in notices if "previz OpenGL: " in n), None),
        })
    return rows


# ------------------------------------------------------------------ tiny models


def _tiny_wan(folder: Path, vace: bool = False) -> Path:
    """A tiny random Wan (or Wan-VACE) pipeline saved with save_pretrained: 2 heads x 32 (so 4-bit group 64
    quantises every block linear), 2 layers, diffusers' own tiny VAE and a 2-layer UMT5 over a word tokenizer."""
    if (folder / "model_index.json").is_file():
        return folder
    import torch
    from diffusers import AutoencoderKLWan, FlowMatchEulerDiscreteScheduler
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, UMT5Config, UMT5EncoderModel

    words = ("a the of and in on at with to shot camera wide medium close up office street man woman walks "
             "talks looks dolly pan tilt orbit push pull day night").split()
    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2, **{w: i + 3 for i, w in enumerate(words)}}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")
    torch.manual_seed(0)
    transformer_args = dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=32, in_channels=16,
                            out_channels=16, text_dim=32, freq_dim=256, ffn_dim=128, num_layers=2,
                            cross_attn_norm=True, qk_norm="rms_norm_across_heads", rope_max_seq_len=32)
    text_encoder = UMT5EncoderModel(UMT5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=32, num_layers=2, num_heads=2,
                                               relative_attention_num_buckets=8, pad_token_id=0, eos_token_id=1,
                                               decoder_start_token_id=0))
    vae = AutoencoderKLWan(base_dim=3, z_dim=16, dim_mult=[1, 1, 1, 1], num_res_blocks=1,
                           temperal_downsample=[False, True, True])
    scheduler = FlowMatchEulerDiscreteScheduler(shift=3.0)
    if vace:
        from diffusers import WanVACEPipeline, WanVACETransformer3DModel

        transformer = WanVACETransformer3DModel(**{**transformer_args, "num_layers": 3, "vace_layers": [0, 2],
                                                   "vace_in_channels": 96})
        pipe: Any = WanVACEPipeline(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, scheduler=scheduler,
                                    transformer=transformer)
    else:
        from diffusers import WanPipeline, WanTransformer3DModel

        pipe = WanPipeline(transformer=WanTransformer3DModel(**transformer_args).eval(), tokenizer=tokenizer,
                           text_encoder=text_encoder.eval(), vae=vae.eval(), scheduler=scheduler)
    pipe.save_pretrained(folder)
    return folder


def _rel_l2(a: Any, b: Any) -> float:
    """||a - b|| / ||b|| in float64."""
    import numpy as np

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def _torch_device() -> str:
    import torch

    mps = getattr(torch.backends, "mps", None)
    return "mps" if mps is not None and mps.is_available() else "cpu"


def mlx_parity(work: Path) -> dict[str, Any]:
    """The tiny transformer, VAE decoder and UMT5 encoder: MLX against torch on this machine (relative L2)."""
    from daotai.mlx import require_mlx

    require_mlx("the MLX parity check")
    import mlx.core as mx
    import numpy as np
    import torch
    from diffusers import AutoencoderKLWan, WanTransformer3DModel
    from transformers import UMT5EncoderModel

    from daotai.mlx.pipeline import load_transformer, load_vae_decoder
    from daotai.mlx.text_encoder import UMT5Config, UMT5Encoder, wan_prompt_embeds
    from daotai.mlx.weights import load_into, mapped_weights, read_config

    folder = _tiny_wan(work / "tiny-wan")
    device = _torch_device()
    slack = MPS_SLACK if device == "mps" else 1.0
    g = torch.Generator().manual_seed(1)
    measured: dict[str, float] = {}
    with torch.no_grad():
        tr = WanTransformer3DModel.from_pretrained(folder / "transformer").eval().to(device)
        x, t, ctx = torch.randn(2, 16, 3, 8, 6, generator=g), torch.tensor([999.0, 312.5]), torch.randn(2, 7, 32, generator=g)
        ref = tr(x.to(device), t.to(device), ctx.to(device)).sample.cpu().numpy()
        out = np.array(load_transformer(folder / "transformer")(mx.array(x.numpy()), mx.array(t.numpy()),
                                                                mx.array(ctx.numpy())))
        measured["transformer"] = _rel_l2(out, ref)
        vae = AutoencoderKLWan.from_pretrained(folder / "vae").eval().to(device)
        z = torch.randn(1, 16, 3, 4, 5, generator=g)
        ref = vae.decode(z.to(device)).sample.cpu().numpy()  # (1, 3, 9, 32, 40)
        out = np.array(load_vae_decoder(folder / "vae").decode(mx.array(z.numpy()), chunked=True))
        measured["vae_decode"] = _rel_l2(out, ref)
        te = UMT5EncoderModel.from_pretrained(folder / "text_encoder").eval().to(device)
        ids = torch.randint(3, 30, (2, 20), generator=g)
        mask = torch.ones(2, 20, dtype=torch.long)
        mask[1, 12:] = 0  # the second prompt padded, as the pipeline pads
        ref = te(ids.to(device), mask.to(device)).last_hidden_state.cpu().numpy() * (mask.numpy()[..., None] > 0)
        encoder = UMT5Encoder(UMT5Config.from_dict(read_config(folder / "text_encoder")))
        load_into(encoder, mapped_weights(folder / "text_encoder", "text_encoder"), "text encoder")
        measured["umt5"] = _rel_l2(np.array(wan_prompt_embeds(encoder, ids.numpy(), mask.numpy())), ref)
    parts = {name: {"rel_l2": value, "bound": PARITY_BOUNDS[name] * slack, "ok": value < PARITY_BOUNDS[name] * slack}
             for name, value in measured.items()}
    return {"torch_device": device, "mlx_device": str(mx.default_device()), "parts": parts,
            "ok": all(p["ok"] for p in parts.values())}


# ------------------------------------------------------------------ wan-mlx timing and memory


# The stages between the backend's two health samples of a shot: MLX's peak is read and reset at each.
STAGES = ("load, text encoder, first half of denoising", "second half of denoising, VAE decode")


def _memory_stages() -> tuple[list[dict[str, Any]], Callable[[Any], dict]]:
    """A health sampler for the backend that also keeps MLX's peak per stage (then resets it) and this
    process's peak resident size."""
    import mlx.core as mx

    from daotai.render.wan_mlx import mlx_health_sample

    stages: list[dict[str, Any]] = []

    def sample(runtime: Any = None) -> dict:
        found = mlx_health_sample(runtime)  # what the backend itself would have seen
        peak = mx.get_peak_memory()
        mx.reset_peak_memory()
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
        stages.append({"stage": STAGES[len(stages) % 2], "mlx_peak_gib": round(peak / 1024**3, 4),
                       "process_peak_rss_gib": round(rss / 1024**3, 3)})
        return found

    return stages, sample


def _timed_script(path: Path, size: str) -> Path:
    """The one-shot script every timed render uses, written to ``path``: a slow push-in on one character, 1 s."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "title": "mac check", "fps": 24, "size": size, "seed": 7,
        "scene": {"name": "office", "description": "a quiet office at day"},
        "characters": [{"id": "lin", "description": "a woman in a blue shirt", "colour": "blue"}],
        "shots": [{"shot_id": "push", "duration": 1.0, "subject": "lin", "framing": "medium",
                   "camera": "dolly in", "action": "looks at the camera"}],
    }), encoding="utf-8")
    return path


def _timed_render(backend: str, folder: Path, precision: str, script: Path, steps: int, out: Path) -> dict[str, Any]:
    """One timed render: wall time, s/step, the planner's estimate and the peak per stage."""
    import mlx.core as mx

    from daotai.mlx.memory import folder_footprint, footprint_peak, memory_budget
    from daotai.plan.planner import plan_script
    from daotai.render.neural.request import native_request
    from daotai.run.settings import PipelineSettings
    from daotai.script.load import load_script

    plan = plan_script(load_script(script))
    stages, sampler = _memory_stages()
    mx.reset_peak_memory()
    settings = PipelineSettings(backend=backend, options={"model": str(folder), "steps": steps}, camera_qc=False)
    done = _render(plan, out, settings, health=sampler)
    steps_s = [b - a for a, b in zip(done.step_times[:-1], done.step_times[1:], strict=True)]  # the first step's start is not seen
    request = native_request(plan, plan.shots[0], _defaults_for(backend, folder, steps))
    estimate = footprint_peak(folder_footprint(folder), request.width, request.height, request.frames)
    budget = memory_budget()
    measured = max(s["mlx_peak_gib"] for s in stages) if stages else None
    return {
        "backend": backend, "model": folder.name, "precision": precision, "steps": steps,
        "size": f"{request.width}x{request.height}", "frames": request.frames,
        "wall_s": round(done.wall_s, 2), "s_per_step": round(sum(steps_s) / len(steps_s), 4) if steps_s else None,
        "estimate_gib": round(estimate / 1024**3, 4), "budget_gib": round(budget.bytes / 1024**3, 1),
        "budget_source": budget.source, "stages": stages, "mlx_peak_gib": measured,
        "estimate_over_measured": round(estimate / 1024**3 / measured, 2) if measured else None,
        "qc_ok": bool(done.result.qc_ok), "notices": [n for n in done.notices if "mlx" in n][:6],
    }


def _defaults_for(backend: str, folder: Path, steps: int) -> Any:
    """The sampling defaults the backend uses for a folder (for the frame count and size it asks for)."""
    from daotai.render.neural.request import effective_defaults
    from daotai.render.registry import spec_for

    spec = spec_for(backend)
    return effective_defaults(spec.family, spec.validate_options({"model": str(folder), "steps": steps}), None)


def _precisions_that_fit(folder: Path, width: int, height: int, frames: int) -> list[int | None]:
    """The transformer precisions whose estimated peak fits this machine's budget, least compressed first."""
    from daotai.mlx.memory import folder_footprint, footprint_peak, memory_budget

    base, budget = folder_footprint(folder), memory_budget().bytes
    return [bits for bits in PRECISIONS if footprint_peak(base.with_bits(bits, GROUP_SIZE), width, height, frames) <= budget]


def _converted(source: Path, label: str, bits: int | None, work: Path) -> Path:
    """The folder at this precision: the source itself for float32, else an MLX conversion (made once,
    kept in ``work/converted`` under the model's label)."""
    from daotai.mlx.convert import convert, read_manifest

    if bits is None:
        return source
    dest = work / "converted" / f"{label}-q{bits}"
    if read_manifest(dest) is None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        convert(source, dest, bits, GROUP_SIZE)
    return dest


def _model_folder(config: CheckConfig) -> Path | None:
    """The published model to time: --model, else REAL_MODEL when it has been pulled; None in quick mode."""
    if config.quick:
        return None
    name = config.model or REAL_MODEL
    path = Path(name).expanduser()
    if path.is_dir():
        return path.resolve()
    from daotai import catalog
    from daotai.runtime.model_lookup import pulled_model, resolve_model

    if config.model is None:  # the default model only when it is already here: the check downloads nothing
        spec = catalog.models().get(name)
        if spec is None or pulled_model(spec) is None:
            return None
    return resolve_model(name).path


def wan_mlx(config: CheckConfig, work: Path) -> dict[str, Any]:
    """Timed wan-mlx (and wan-vace-mlx, when registered) renders at each precision that fits; ``work``
    holds the tiny models (``models/``), conversions, scripts and renders."""
    from daotai.mlx import require_mlx
    from daotai.render.registry import backend_names

    require_mlx("the wan-mlx timing")
    runs: list[dict[str, Any]] = []
    vace_registered = "wan-vace-mlx" in backend_names()
    # (backend, label, model folder, render settings); the label names its conversions, script and output
    models: list[tuple[str, str, Path, dict[str, Any]]] = [
        ("wan-mlx", "tiny-wan", _tiny_wan(work / "models" / "tiny-wan"), TINY_RENDER)]
    if vace_registered:
        models.append(("wan-vace-mlx", "tiny-wan-vace", _tiny_wan(work / "models" / "tiny-wan-vace", vace=True),
                       TINY_RENDER))
    skipped: list[str] = []
    real = None
    try:
        real = _model_folder(config)
    except Exception as exc:  # noqa: BLE001  (a missing model is noted, the tiny runs still count)
        skipped.append(f"{config.model or REAL_MODEL}: {exc}")
    if real is not None:
        models.append(("wan-mlx", "model", real, REAL_RENDER))
    elif not config.quick and not skipped:
        skipped.append(f"{REAL_MODEL} not pulled (daotai models pull {REAL_MODEL}): only the tiny model was timed")
    from daotai.plan.planner import plan_script
    from daotai.render.neural.request import native_request
    from daotai.script.load import load_script

    for backend, label, source, render in models:
        script = _timed_script(work / "scripts" / f"{label}.json", render["size"])
        plan = plan_script(load_script(script))
        request = native_request(plan, plan.shots[0], _defaults_for(backend, source, render["steps"]))
        fits = _precisions_that_fit(source, request.width, request.height, request.frames)
        for bits in QUICK_PRECISIONS if config.quick else PRECISIONS:
            precision = "float32" if bits is None else f"{bits}-bit g{GROUP_SIZE}"
            if bits not in fits:
                runs.append({"backend": backend, "model": label, "precision": precision,
                             "status": "does not fit this machine's memory budget (planner estimate)"})
                continue
            try:
                folder = _converted(source, label, bits, work)
                entry = _timed_render(backend, folder, precision, script, render["steps"],
                                      work / "out" / f"{backend}-{label}-{precision.split()[0]}")
                entry.update(model=label, folder=source.name, status="ok")
            except Exception as exc:  # noqa: BLE001  (one precision failing is reported; the next still runs)
                entry = {"backend": backend, "model": label, "precision": precision,
                         "status": f"error: {type(exc).__name__}: {exc}"}
            runs.append(entry)
    return {"wan_vace_mlx_registered": vace_registered, "runs": runs, "notes": skipped}


def _h3_mlx(config: CheckConfig, work: Path) -> dict[str, Any]:
    """A timed h3-mlx render when MiniMax-H3 weights are here; skipped, naming what to get, when not."""
    from daotai.mlx.h3_check import CHECK_STEPS, h3_mlx_check_plan

    folder, result, script = h3_mlx_check_plan(config.h3_model, config.quick)
    if script is None:
        return result
    import mlx.core as mx

    from daotai.plan.planner import plan_script
    from daotai.run.settings import PipelineSettings
    from daotai.script.load import load_script

    path = work / "scripts" / "h3-mlx.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(script), encoding="utf-8")
    mx.reset_peak_memory()
    # the licence is never accepted for the user here: a refusal names the one command that accepts it
    settings = PipelineSettings(backend="h3-mlx", options={"model": str(folder), "steps": CHECK_STEPS},
                                camera_qc=False)
    done = _render(plan_script(load_script(path)), work / "out" / "h3-mlx", settings)
    steps_s = [b - a for a, b in zip(done.step_times[:-1], done.step_times[1:], strict=True)]
    result.update(status="ok", wall_s=round(done.wall_s, 2),
                  s_per_step=round(sum(steps_s) / len(steps_s), 3) if steps_s else None,
                  mlx_peak_gib=round(mx.get_peak_memory() / 1024**3, 2), qc_ok=bool(done.result.qc_ok),
                  notices=[n for n in done.notices if "h3-mlx" in n][:6])
    return result


# ------------------------------------------------------------------ encoders


def encode(quick: bool) -> dict[str, Any]:
    """Speed and PSNR of every hardware encoder that opens here, beside the software encoder."""
    from daotai.encode.hardware import hardware_encoder, probe_platform
    from daotai.run.encoder_choice import measure_encoder

    width, height, frames = (640, 360, 12) if quick else (1920, 1080, 48)
    fps = Fraction(24)
    probes = probe_platform()

    def row(measure: Any) -> dict[str, Any]:
        gate = measure.gate
        return {"encoder": measure.encoder, "fps": round(measure.fps, 1), "encode_s": round(measure.encode_s, 3),
                "psnr_mean_db": None if gate.psnr_mean_db is None else round(gate.psnr_mean_db, 2),
                "psnr_std_db": round(gate.psnr_std_db, 3), "gate_ok": gate.ok, "gate": gate.reason}

    # the software encoder of every codec compared: H.264 always, HEVC when a hardware HEVC encoder opens
    codecs = ["h264"] + (["hevc"] if any(p.opens and hardware_encoder(n).codec == "hevc" for n, p in probes.items())
                         else [])
    rows = [row(measure_encoder(None, width, height, fps, frames, codec=codec)) for codec in codecs]
    for name, probe in probes.items():
        if probe.opens:
            try:
                rows.append(row(measure_encoder(hardware_encoder(name), width, height, fps, frames)))
            except Exception as exc:  # noqa: BLE001  (opens in the probe yet fails at full size: a finding)
                rows.append({"encoder": name, "error": f"{type(exc).__name__}: {exc}"})
    opened = [p.name for p in probes.values() if p.opens]
    return {"clip": f"{width}x{height}, {frames} frames at {fps} fps", "probes": [asdict(p) for p in probes.values()],
            "hardware": ", ".join(opened) if opened else "not available", "encoders": rows}


# ------------------------------------------------------------------ the report


def _status_line(entry: dict[str, Any]) -> str:
    if entry["status"] == "ok":
        return f"ok ({entry['seconds']} s)"
    return f"{entry['status']}: {entry.get('reason') or entry.get('error')}"


def markdown(report: dict[str, Any]) -> str:
    """The report as Markdown (what a person reads first; the JSON has everything)."""
    lines = [f"# daotai mac check ({'quick' if report['quick'] else 'full'})", "",
             f"Created {report['created']}, {report['seconds']} s.", ""]
    m = report["machine"]
    if m["status"] == "ok":
        r = m["result"]
        lines += [f"Machine: {r['model'] or r['arch']}, {r['cpu']}, {r['memory_gb']} GB, {r['os']}, Python {r['python']}, "
                  f"daotai {r['daotai']}", "",
                  "Libraries: " + ", ".join(f"{k} {v}" for k, v in r["libraries"].items() if v), ""]
    lines += ["| section | status |", "|---|---|"]
    lines += [f"| {name} | {_status_line(report[name])} |"
              for name in ("machine", "doctor", "previz", "mlx_parity", "wan_mlx", "encode", "h3_mlx") if name in report]
    lines.append("")
    if report["doctor"]["status"] == "ok":
        lines += ["## doctor", "", "| check | finding |", "|---|---|"]
        lines += [f"| {c['name']} | {c['value'].replace('|', '/')} |" for c in report["doctor"]["result"]]
        lines.append("")
    if report["previz"]["status"] == "ok":
        lines += ["## previz", "", "| example | size | shots | frames | wall s | fps | qc |", "|---|---|---|---|---|---|---|"]
        lines += [f"| {r['example']} | {r['size']} | {r['shots']} | {r['frames']} | {r['wall_s']} | {r['fps']} | "
                  f"{'passed' if r['qc_ok'] else 'FAILED'} |" for r in report["previz"]["result"]]
        lines.append("")
    if report["mlx_parity"]["status"] == "ok":
        p = report["mlx_parity"]["result"]
        lines += ["## MLX parity", "", f"torch on {p['torch_device']}, MLX on {p['mlx_device']}", "",
                  "| part | relative L2 | bound | ok |", "|---|---|---|---|"]
        lines += [f"| {k} | {v['rel_l2']:.2e} | {v['bound']:.0e} | {'yes' if v['ok'] else 'NO'} |"
                  for k, v in p["parts"].items()]
        lines.append("")
    if report["wan_mlx"]["status"] == "ok":
        w = report["wan_mlx"]["result"]
        lines += ["## wan-mlx timing and memory", "", f"wan-vace-mlx registered: {w['wan_vace_mlx_registered']}", "",
                  "| backend | model | precision | size, frames | steps | wall s | s/step | estimate GiB | MLX peak GiB "
                  "per stage | estimate / peak | status |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in w["runs"]:
            peaks = " / ".join(str(s["mlx_peak_gib"]) for s in r.get("stages", [])) or "—"
            lines.append(f"| {r['backend']} | {r['model']} | {r['precision']} | "
                         f"{r.get('size', '—')}, {r.get('frames', '—')} | {r.get('steps', '—')} | {r.get('wall_s', '—')} | "
                         f"{r.get('s_per_step', '—')} | {r.get('estimate_gib', '—')} | {peaks} | "
                         f"{r.get('estimate_over_measured', '—')} | {r['status']} |")
        lines += ["", "Stages: " + "; ".join(f"{i + 1}. {name}" for i, name in enumerate(STAGES)) + "."]
        lines += [""] + [f"- {note}" for note in w["notes"]] + ([""] if w["notes"] else [])
    if report["encode"]["status"] == "ok":
        e = report["encode"]["result"]
        lines += ["## encoders", "", f"Clip: {e['clip']}. Hardware: {e['hardware']}.", "",
                  "| encoder | fps | PSNR mean dB | PSNR std dB | gate |", "|---|---|---|---|---|"]
        lines += [f"| {r['encoder']} | {r.get('fps', '—')} | {r.get('psnr_mean_db', '—')} | {r.get('psnr_std_db', '—')} | "
                  f"{'passed' if r.get('gate_ok') else r.get('error') or 'missed: ' + r.get('gate', '')} |"
                  for r in e["encoders"]]
        lines += [""] + [f"- {p['name']}: " + ("opens" if p["opens"] else p["detail"] or "does not open")
                         for p in e["probes"]]
        lines.append("")
    h3 = report.get("h3_mlx", {})
    if h3.get("status") == "ok":
        r = h3["result"]
        lines += ["## h3-mlx (MiniMax-H3)", "", "| folder | bits | canvas, frames | steps | wall s | s/step | estimate GiB | "
                  "MLX peak GiB (conditioner in torch: not counted) | status |", "|---|---|---|---|---|---|---|---|---|",
                  f"| {r['folder']} | {r['bits']} | {r['canvas']}, {r['frames']} | {r['steps']} | {r.get('wall_s', '—')} | "
                  f"{r.get('s_per_step', '—')} | {r['estimate_gib']} | {r.get('mlx_peak_gib', '—')} | {r['status']} |", ""]
    return "\n".join(lines) + "\n"


def write_report(report: dict[str, Any], folder: Path) -> tuple[Path, Path]:
    """mac-check.json and mac-check.md in ``folder`` (each written atomically)."""
    from daotai.files import atomic_write_text

    home = str(Path.home())

    def clean(value: Any) -> Any:  # JSON has no inf/nan (written as strings); the home folder is written ~
        if isinstance(value, float) and not math.isfinite(value):
            return str(value)
        if isinstance(value, str) and len(home) > 1:
            return value.replace(home, "~")
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(v) for v in value]
        return value

    json_path, md_path = folder / "mac-check.json", folder / "mac-check.md"
    report = clean(report)
    atomic_write_text(json_path, json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    atomic_write_text(md_path, markdown(report))
    return json_path, md_path


def lines_of(report: dict[str, Any]) -> Iterator[str]:
    """One summary line per section, for the terminal."""
    for name in ("machine", "doctor", "previz", "mlx_parity", "wan_mlx", "encode", "h3_mlx"):
        if name in report:
            yield f"{name:11} {_status_line(report[name])}"
