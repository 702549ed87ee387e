"""MiniMax-H3 at its released size: our `h3` backend against diffusers' stock modular pipeline.

The released transformer partition (diffusers' default MiniMaxH3Transformer3DModel config: 50 blocks,
width 5376, 56 heads x 128, SwiGLU 14336; 33.1 B parameters, 66 GB in bf16) is built with random
weights on the GPU, one fresh copy per contender from the same seed. It is not saved: the folder the
contenders load (conditioner, tokenizer, processor, the full-size video and audio VAEs, schedulers)
holds a tiny placeholder partition, and the full-size one replaces it as it loads. The Qwen3-VL
conditioner keeps the released text width (5120) and the 51 layers MiniMax-H3 reads its
conditioning from, but narrow attention and MLP, so its share here is small (the released one is
a ~32 B model; daotai releases it from the GPU before denoising at this size either way).

Contenders, each rendering the same request (one 5 s t2va generation: 124 frames at 1344x768, the
same prompt and seed; the first forward of each run absorbs compilation and is reported apart):
- ``stock``: ``MiniMaxH3ModularPipeline`` as diffusers ships it, everything on the GPU.
- ``strong``: the same with the two lines a user can type (bench/baselines.py): the fastest diffusers
  attention backend that works here (cuDNN, flash, FA3, Sage: tried, timed, the fastest kept) and
  ``compile_repeated_blocks(fullgraph=True)``. Ratios are given against both baselines.
- ``exact``: our backend, ``--speed exact`` (attention kernel choice, compiled repeated blocks).
- ``fast``: our backend, ``--speed fast`` (adds FP8 block linears and the fixed-schedule step cache).
- ``turbo``: our backend, ``--speed exact`` with ``-O turbo=`` a random LoRA of the released
  partition's shape (every linear of the blocks, ``--turbo-rank``) whose metadata says 4 forwards: the
  issue's "5 s clip end to end at 4 steps" (its 50-step column holds its own 4 forwards; its picture
  is a different schedule's, so no PSNR is given for it).

Per contender: seconds per transformer forward (median of the warm ones), the end-to-end seconds of
a second, warm render of the same request (prompt encoding, denoising, both decodes, and for ours
trimming to the shot and delivering frames), peak GPU memory during it, and PSNR of the decoded
frames against stock's. The step cache
makes a 50-step render compute only part of its forwards; that share is exact (the schedule does
not depend on the weights), so the 50-step projection multiplies it out.

    python bench/h3.py                  # one NVIDIA GPU with >= 100 GiB (H200): ~8 minutes
    python bench/h3.py --tiny           # CPU smoke test: tiny random components, same code path
    python bench/h3.py --steps 50       # the issue's 50-step denoise measured rather than projected
    python bench/h3.py --ref2va         # adds a stock ref2va run (a 5 s video reference packed beside)
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent.parent / "tests"
BENCH = Path(__file__).resolve().parent
FULL_CANVAS = (1344, 768)
TINY_CANVAS = (128, 64)
SECONDS = 5.0
# Self-attention of one 5 s generation, for the strong baseline's kernel probe: (tokens, heads, head_dim).
# 124 frames make 37 latent frames of (768/32) x (1344/32) = 1008 tokens; the tiny canvas 2 x 4.
FULL_ATTENTION = (37 * 1008, 56, 128)
TINY_ATTENTION = (37 * 8, 2, 16)


def conditioner(tiny: bool, tokenizer: Any) -> Any:
    """A random Qwen3-VL conditioner with the 51 layers MiniMax-H3 reads layer 50 of."""
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    ids = tokenizer.get_vocab()
    width = 32 if tiny else 5120  # MiniMax-H3's text_dim
    text = dict(vocab_size=len(ids) + 8, hidden_size=width, intermediate_size=32 if tiny else 512,
                num_hidden_layers=51, num_attention_heads=2 if tiny else 8, num_key_value_heads=1,
                head_dim=16 if tiny else 128,
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                 "mrope_section": [4, 2, 2] if tiny else [24, 20, 20], "mrope_interleaved": True})
    vision = dict(depth=1, hidden_size=16 if tiny else 64, intermediate_size=16 if tiny else 64, num_heads=2,
                  out_hidden_size=width, patch_size=16, spatial_merge_size=2, temporal_patch_size=2,
                  deepstack_visual_indexes=[0], num_position_embeddings=64)
    return Qwen3VLForConditionalGeneration(Qwen3VLConfig(
        text_config=text, vision_config=vision, image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"], vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"])).eval()


def transformer_config(tiny: bool) -> dict:
    """The partition's config: diffusers' defaults are the released model's."""
    if not tiny:
        return {}
    return dict(num_attention_heads=2, attention_head_dim=16, hidden_size=32, num_layers=2, num_refiner_layers=1,
                ffn_dim=32, in_channels=8, audio_in_channels=8, text_dim=32, freq_dim=32, time_embed_hidden_dim=32,
                time_embed_dim=16, rope_freq_dim=2)


def partition(tiny: bool, device: str, seed: int = 7) -> Any:
    """A fresh random transformer partition on ``device`` in bf16 (built there: 66 GB never touch the host)."""
    import torch
    from diffusers import MiniMaxH3Transformer3DModel

    torch.manual_seed(seed)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device):
            model = MiniMaxH3Transformer3DModel(**transformer_config(tiny)).eval()
    finally:
        torch.set_default_dtype(previous)
    for name in MiniMaxH3Transformer3DModel._keep_in_fp32_modules:  # the checkpoint's float32 modules
        for module_name, module in model.named_modules():
            if module_name.split(".")[0] == name:
                module.float()
    return model.requires_grad_(False)


def build_folder(folder: Path, tiny: bool) -> Path:
    """Everything but the transformer at its bench size, with tiny placeholder partitions, saved as a folder."""
    import torch
    from diffusers import AutoencoderKLMiniMaxH3, AutoencoderKLMiniMaxH3Audio, MiniMaxH3Scheduler
    from diffusers.modular_pipelines import MiniMaxH3Blocks, MiniMaxH3ModularPipeline
    from transformers import Qwen2VLImageProcessor, Qwen3VLProcessor

    sys.path.insert(0, str(TESTS))
    import builders  # the tests' word-level tokenizer with Qwen3-VL's vision tokens

    builders.qwen3vl_without_torchvision()
    video_processing = __import__("importlib").import_module(
        "transformers.models.qwen3_vl.video_processing_qwen3_vl")
    tokenizer = builders.h3_tokenizer()
    torch.manual_seed(0)
    pixels = {"shortest_edge": 32 * 32, "longest_edge": 64 * 64}
    image_processor = getattr(__import__("transformers"), "Qwen2VLImageProcessorPil", Qwen2VLImageProcessor)
    processor = Qwen3VLProcessor(
        image_processor=image_processor(patch_size=16, temporal_patch_size=2, merge_size=2,
                                        min_pixels=pixels["shortest_edge"], max_pixels=pixels["longest_edge"]),
        tokenizer=tokenizer,
        video_processor=video_processing.Qwen3VLVideoProcessor(patch_size=16, temporal_patch_size=2, merge_size=2,
                                                               size=pixels),
        chat_template="{{ '' }}")
    if tiny:
        vae = AutoencoderKLMiniMaxH3(
            latent_channels=8, block_out_channels=(8, 8), layers_per_block=1, spatial_downsample_factors=(2, 2),
            temporal_downsample_factors=(2, 2), norm_num_groups=4, decoder_num_layers=1,
            decoder_num_attention_heads=2, decoder_attention_head_dim=8, decoder_num_register_tokens=1,
            latents_mean=(0.0,) * 8, latents_std=(1.0,) * 8)
        audio_vae = AutoencoderKLMiniMaxH3Audio(
            encoder_dim=4, latent_dim=16, latent_channels=8, num_attention_heads=2, decoder_dim=128,
            resblock_kernel_sizes=(3,), resblock_dilation_sizes=((1,),), latents_mean=[0.0] * 8,
            latents_std=[1.0] * 8)
    else:
        vae = AutoencoderKLMiniMaxH3()
        audio_vae = AutoencoderKLMiniMaxH3Audio(latents_mean=[0.0] * 32, latents_std=[1.0] * 32)
    placeholder = builders.h3_transformer(1)  # replaced by the bench-size partition as it loads
    pipe = MiniMaxH3ModularPipeline(blocks=MiniMaxH3Blocks())
    pipe.update_components(text_encoder=conditioner(tiny, tokenizer).to(torch.bfloat16), tokenizer=tokenizer,
                           processor=processor, vae=vae.eval().to(torch.bfloat16),
                           audio_vae=audio_vae.eval(), scheduler=MiniMaxH3Scheduler(shift=12.0),
                           audio_scheduler=MiniMaxH3Scheduler(shift=3.0), transformer=placeholder,
                           transformer_ref=builders.h3_transformer(2))
    canvas = TINY_CANVAS if tiny else FULL_CANVAS
    pipe.register_to_config(canvas_short_edge=canvas[1], canvas_max_pixels=canvas[0] * canvas[1])
    pipe.save_pretrained(str(folder), overwrite_modular_index=True)
    return folder


class ForwardTimer:
    """Seconds of every transformer forward (synchronised on CUDA), by hooks on the module."""

    def __init__(self, sync: Any):
        self.sync, self.seconds, self._started = sync, [], 0.0

    def attach(self, module: Any) -> list:
        def before(*_: Any, **__: Any) -> None:
            self.sync()
            self._started = time.perf_counter()

        def after(*_: Any, **__: Any) -> None:
            self.sync()
            self.seconds.append(time.perf_counter() - self._started)

        return [module.register_forward_pre_hook(before), module.register_forward_hook(after)]


class StageTimer:
    """Seconds spent in the pipeline call and in each decoder, accumulated (synchronised on CUDA)."""

    def __init__(self, sync: Any):
        self.sync, self.seconds = sync, {}

    def wrap(self, owner: Any, attribute: str, label: str) -> None:
        original = getattr(owner, attribute)

        def timed(*args: Any, **kwargs: Any) -> Any:
            self.sync()
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.sync()
                self.seconds[label] = self.seconds.get(label, 0.0) + time.perf_counter() - started

        setattr(owner, attribute, timed)


def _device_tools(device: str) -> tuple[Any, Any, Any]:
    import torch

    if device.startswith("cuda"):
        return (torch.cuda.synchronize, torch.cuda.reset_peak_memory_stats,
                lambda: torch.cuda.max_memory_allocated() / 1024**3)
    return (lambda: None), (lambda: None), (lambda: 0.0)


def _free() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def script_plan(work: Path, tiny: bool) -> Any:
    """One static 5 s shot at the canvas size (t2va: no camera move, no reference images)."""
    from daotai.plan.planner import plan_script
    from daotai.script.load import load_script

    width, height = TINY_CANVAS if tiny else FULL_CANVAS
    script = {"title": "h3 bench", "fps": 24, "size": [width, height], "seed": 11, "scene": "a quiet office",
              "characters": [{"id": "mara", "appearance": "red coat"}],
              "shots": [{"shot_id": "s1", "duration": SECONDS, "characters": ["mara"], "action": "mara reads"}]}
    (work / "bench.json").write_text(json.dumps(script))
    return plan_script(load_script(work / "bench.json"))


def run_stock(folder: Path, tiny: bool, device: str, plan: Any, steps: int, workflow: str = "t2va",
              strong: bool = False) -> dict:
    """diffusers' modular pipeline as shipped, every component on the device; ``strong``: with the fastest
    attention backend that works here and compiled repeated blocks (bench/baselines.py)."""
    import numpy as np
    import torch
    from diffusers.modular_pipelines import MiniMaxH3ModularPipeline

    from daotai.plan.prompt import compose_h3_prompt
    from daotai.plan.timing import snap_frames
    from daotai.render.neural.retime import to_uint8
    from daotai.runtime.device import generator_for

    sync, reset, peak = _device_tools(device)
    pipe = MiniMaxH3ModularPipeline.from_pretrained(str(folder))
    names = ["text_encoder", "tokenizer", "processor", "vae", "audio_vae", "scheduler", "audio_scheduler"]
    pipe.load_components(names=names, torch_dtype=torch.bfloat16)
    name = "transformer_ref" if workflow == "ref2va" else "transformer"
    pipe.update_components(**{name: partition(tiny, device)})
    pipe.to(device)
    pipe.set_progress_bar_config(disable=True)
    levers = "diffusers defaults"
    if strong:
        from baselines import make_strong

        levers = make_strong(getattr(pipe, name), TINY_ATTENTION if tiny else FULL_ATTENTION, device,
                             torch.bfloat16).describe()
    shot = plan.shots[0]
    frames = snap_frames(int(round(SECONDS * 24)), 17, 5)
    inputs: dict[str, Any] = {}
    if workflow == "ref2va":
        from diffusers.modular_pipelines.minimax_h3 import MiniMaxH3VideoReference

        rng = np.random.default_rng(0)
        video = rng.integers(0, 255, (frames, plan.height, plan.width, 3), dtype=np.uint8)
        inputs["references"] = [MiniMaxH3VideoReference(frames=video, fps=24.0)]
    prompt = compose_h3_prompt(plan, shot, workflow, (), video=workflow == "ref2va", keyframe=None)
    timer = ForwardTimer(sync)
    handles = timer.attach(getattr(pipe, name))
    stages = StageTimer(sync)
    stages.wrap(pipe.vae, "decode", "video decode")
    stages.wrap(pipe.audio_vae, "decode", "audio decode")
    stages.wrap(pipe.text_encoder, "forward", "prompt encode")

    def call() -> Any:
        return pipe(prompt=prompt, num_frames=frames, height=plan.height, width=plan.width,
                    num_inference_steps=steps, generator=generator_for(shot.seed), output_type="pt",
                    output=["videos", "audio", "sampling_rate"], **inputs)

    started = time.perf_counter()
    out = call()
    sync()
    first_total = time.perf_counter() - started
    first_forwards = list(timer.seconds)
    if workflow == "t2va":  # the warm call, as for ours (ref2va is measured once: it is the expensive one)
        timer.seconds.clear()
        stages.seconds.clear()
        reset()
        started = time.perf_counter()
        out = call()
        sync()
        total = time.perf_counter() - started
    else:
        total = first_total
    stage_seconds = dict(stages.seconds, denoise=sum(timer.seconds))
    for handle in handles:
        handle.remove()
    video = to_uint8(out["videos"])
    result = {"contender": f"{'strong' if strong else 'stock'} {workflow}", "notices": [levers], "forwards": first_forwards[:1] + timer.seconds[
              len(first_forwards) if workflow != "t2va" else 0:], "total_s": total, "cold_s": first_total,
              "stages": stage_seconds,
              "peak_gib": peak(), "frames": video}
    pipe = out = None  # drop the 66 GB partition before the next contender builds its own
    _free()
    return result


TURBO_FORWARDS = 4  # the turbo target is at 4 steps


def turbo_lora(path: Path, tiny: bool, rank: int) -> Path:
    """A random LoRA for every linear of the partition's blocks at ``rank``, with turbo metadata (4 forwards,
    the base shift 12, alpha 1), saved as safetensors: the released LoRAs' shape, not their weights."""
    import torch
    from diffusers import MiniMaxH3Transformer3DModel
    from safetensors.torch import save_file

    with torch.device("meta"):  # names and shapes only: nothing is allocated
        layout = MiniMaxH3Transformer3DModel(**transformer_config(tiny))
    generator = torch.Generator("cpu").manual_seed(3)
    state = {}
    for name, module in layout.named_modules():
        if isinstance(module, torch.nn.Linear) and name.startswith("transformer_blocks."):
            # (rank, in) and (out, rank) bf16; small B so the fused weights stay near the random base
            state[f"transformer.{name}.lora_A.weight"] = torch.randn(
                rank, module.in_features, generator=generator).to(torch.bfloat16)
            state[f"transformer.{name}.lora_B.weight"] = (torch.randn(
                module.out_features, rank, generator=generator) * 1e-3).to(torch.bfloat16)
    save_file(state, str(path), metadata={"steps": str(TURBO_FORWARDS), "shift": "12", "alpha": "1"})
    return path


def run_ours(folder: Path, tiny: bool, device: str, plan: Any, steps: int, speed: str,
             turbo: Path | None = None, offload: str | None = None) -> dict:
    """Our h3 backend; the folder's placeholder partition is replaced by the bench-size one as it loads.
    ``turbo``: a turbo LoRA file (its own steps replace ``steps``); ``offload``: a memory tier in place
    of the planner's choice (``none`` keeps everything on a card the planner finds too small, as stock does)."""
    import numpy as np

    import daotai.runtime.model_loading as model_loading
    from daotai.events import Frame, Notice
    from daotai.render.base import RenderJob, RunContext
    from daotai.render.h3 import H3Backend

    sync, reset, peak = _device_tools(device)
    original = model_loading.load_components
    timer = ForwardTimer(sync)

    def load_with_bench_partition(pipe: Any, resolved: Any, family: str, runtime: Any, names: Any) -> Any:
        loaded = original(pipe, resolved, family, runtime, [n for n in names if n != "transformer"])
        if "transformer" in names:
            pipe.update_components(transformer=partition(tiny, "cpu" if runtime.kind == "cpu" else device))
            timer.attach(pipe.transformer)
        return loaded

    model_loading.load_components = load_with_bench_partition
    try:
        options: dict[str, Any] = {"turbo": str(turbo)} if turbo is not None else {"steps": steps}
        if offload is not None:
            options["offload"] = offload
        backend = H3Backend(model=str(folder), device=device, speed=speed, accept_licence=True, workflow="t2va",
                            **options)
        started = time.perf_counter()
        events = list(backend.render(RenderJob(plan, plan.shots[0], controls=False), RunContext()))
        sync()
        first_total = time.perf_counter() - started  # loading, placement, compilation and one render
        # The render a director waits for once the backend is warm: the same shot again, end to end.
        first_forwards = list(timer.seconds)
        timer.seconds.clear()
        stages = StageTimer(sync)
        pipe = backend.runner.pipe
        stages.wrap(pipe.vae, "decode", "video decode")
        stages.wrap(pipe.audio_vae, "decode", "audio decode")
        stages.wrap(pipe.text_encoder, "forward", "prompt encode")
        stages.wrap(pipe, "__call__", "pipeline call")
        reset()
        started = time.perf_counter()
        events = list(backend.render(RenderJob(plan, plan.shots[0], controls=False), RunContext()))
        sync()
        total = time.perf_counter() - started
    finally:
        model_loading.load_components = original
    notices = [e.text for e in events if isinstance(e, Notice)]
    frames = np.stack([e.rgb for e in events if isinstance(e, Frame)])
    cache = getattr(backend.runner.pipe.transformer, "_daotai_interval_cache", None)
    result = {"contender": "ours turbo" if turbo is not None else f"ours {speed}", "forwards": first_forwards[:1] + timer.seconds, "total_s": total,
              "cold_s": first_total, "peak_gib": peak(), "stages": dict(stages.seconds, denoise=sum(timer.seconds)),
              "frames": frames, "notices": [n for n in notices if "speed" in n or "tier" in n or "linears" in n
                                            or "compiled" in n or "cache" in n or "turbo" in n],
              "cache": (cache.computed, cache.reused) if cache is not None else None}
    backend.close()
    _free()
    return result


PLANNED = re.compile(r"~([0-9.]+) GiB (?:peak|of unified memory) estimated")  # the memory tier notice's estimate


def planner_verdicts(table: list[dict]) -> list[str]:
    """Issue 35's memory target: the H3 memory planner's peak estimate (in our contenders' tier notice)
    within 10% of the peak measured during the render, one line per contender of ours."""
    lines = []
    for row in table:
        if not row["contender"].startswith("ours"):
            continue
        what = f"memory planner's estimate for {row['contender']} within 10% of its measured peak"
        found = next((m for m in (PLANNED.search(text) for text in row["notices"]) if m), None)
        if found is None or not row["peak_gib"]:
            lines.append(f"{what}: not measured" + ("" if found else " (no estimate: the planner was not asked)"))
            continue
        planned, off = float(found.group(1)), float(found.group(1)) / row["peak_gib"] - 1
        lines.append(f"{what}: {planned:.1f} vs {row['peak_gib']:.1f} GiB ({off:+.0%}) "
                     f"{'met' if abs(off) <= 0.10 else 'MISSED'}")
    return lines


def keep_row(folder: Path, name: str, row: dict) -> None:
    """Write one contender's measured row: its frames as .npy, the rest as JSON (written last: it marks it whole)."""
    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / f"{name}.npy", row["frames"])
    rest = {key: value for key, value in row.items() if key != "frames"}
    (folder / f"{name}.json").write_text(json.dumps(rest, default=str))


def load_row(folder: Path, name: str) -> dict | None:
    """A row `keep_row` wrote for this contender, or None when there is none (or only its frames)."""
    import numpy as np

    if not (folder / f"{name}.json").is_file():
        return None
    return dict(json.loads((folder / f"{name}.json").read_text()), frames=np.load(folder / f"{name}.npy"))


def psnr(a: Any, b: Any) -> float:
    import numpy as np

    count = min(len(a), len(b))
    error = np.mean((a[:count].astype(np.float64) - b[:count].astype(np.float64)) ** 2)
    return float("inf") if error == 0 else float(10 * np.log10(255.0**2 / error))


def warm_forward(seconds: list) -> float:
    """Median of the computed forwards after the first (which carries compilation and first-call costs).

    A forward the step cache answers returns in microseconds; those are not forwards and are left out.
    """
    warm = seconds[1:] if len(seconds) > 1 else seconds
    if not warm:
        return float("nan")
    computed = [s for s in warm if s > 0.1 * max(warm)]
    return statistics.median(computed)


def main(argv: list[str] | None = None) -> int:
    from daotai.runtime.memory import TIERS

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="tiny random components on the CPU (smoke test)")
    parser.add_argument("--steps", type=int, default=4, help="sigma points per render (steps - 1 forwards)")
    parser.add_argument("--contenders", default="stock,strong,exact,fast,turbo",
                        help="comma-separated: stock, strong (stock + best attention backend + compile), exact, fast, "
                             "turbo (exact with a random 4-forward turbo LoRA)")
    parser.add_argument("--turbo-rank", type=int, default=64, help="rank of the turbo contender's random LoRA")
    parser.add_argument("--ref2va", action="store_true", help="also a stock ref2va run with a 5 s video reference")
    parser.add_argument("--json", type=Path, help="write the table as JSON here")
    parser.add_argument("--folder", type=Path, help="build the component folder here, or reuse it if it is there")
    parser.add_argument("--keep", type=Path, help="keep each measured contender's row here and reuse the ones already "
                        "kept: a run cut short by a time limit goes on where it stopped")
    parser.add_argument("--offload", choices=TIERS,
                        help="our contenders' memory tier instead of the planner's (none: all on the GPU, as stock; for "
                             "a card the planner finds a little small, where stock still fits)")
    args = parser.parse_args(argv)
    import torch

    from daotai.render.speed import computed_steps, levers_for

    device = "cpu" if args.tiny or not torch.cuda.is_available() else "cuda"
    tiny = args.tiny or device == "cpu"
    work = Path(tempfile.mkdtemp(prefix="h3bench-"))
    started = time.perf_counter()
    sys.path.insert(0, str(TESTS))
    sys.path.insert(0, str(BENCH))
    import builders

    builders.qwen3vl_without_torchvision()  # only where torchvision is missing (the tests' CPU machines)
    folder = args.folder or work / "h3"
    if not (folder / "modular_model_index.json").is_file():
        build_folder(folder, tiny)
    print(f"folder built in {time.perf_counter() - started:.0f} s ({'tiny' if tiny else 'released-size'}; "
          f"device {device}, torch {torch.__version__})", flush=True)
    plan = script_plan(work, tiny)
    rows = []
    for name in [c.strip() for c in args.contenders.split(",") if c.strip()]:
        print(f"-- {name}", flush=True)
        kept = load_row(args.keep, name) if args.keep else None
        if kept is not None:
            print("   kept from an earlier run", flush=True)
            rows.append(kept)
            continue
        try:
            if name in ("stock", "strong"):
                row = run_stock(folder, tiny, device, plan, args.steps, strong=name == "strong")
            elif name == "turbo":
                lora = turbo_lora(work / "turbo.safetensors", tiny, args.turbo_rank)
                row = run_ours(folder, tiny, device, plan, args.steps, "exact", turbo=lora, offload=args.offload)
            else:
                row = run_ours(folder, tiny, device, plan, args.steps, name, offload=args.offload)
        except Exception as exc:  # noqa: BLE001 - one contender failing must not lose the others' numbers
            print(f"   failed: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
            _free()
            continue
        rows.append(row)
        if args.keep:
            keep_row(args.keep, name, row)
        print(f"   forwards {[round(s, 2) for s in row['forwards']]}, total {row['total_s']:.1f} s, "
              f"peak {row['peak_gib']:.1f} GiB", flush=True)
        print("   stages: " + ", ".join(f"{k} {v:.1f} s" for k, v in row.get("stages", {}).items()), flush=True)
        for text in row.get("notices", []):
            print(f"   {text[:160]}", flush=True)
    if args.ref2va:
        print("-- stock ref2va", flush=True)
        row = run_stock(folder, tiny, device, plan, args.steps, workflow="ref2va")
        rows.append(row)
        print(f"   forwards {[round(s, 2) for s in row['forwards']]}, peak {row['peak_gib']:.1f} GiB", flush=True)
    from baselines import Target, memory_verdict

    stock = next((r for r in rows if r["contender"] == "stock t2va"), None)
    strong = next((r for r in rows if r["contender"] == "strong t2va"), None)
    exact_row = next((r for r in rows if r["contender"] == "ours exact"), None)
    steps50 = {mode: sum(computed_steps(49, levers_for(mode, "cuda"))) for mode in ("exact", "fast")}
    steps50["turbo"] = TURBO_FORWARDS  # its whole schedule

    def denoise50(row: dict | None) -> float:
        """Seconds of a 50-step denoise: warm s/forward times the forwards the contender computes of 49."""
        if row is None:
            return float("nan")
        return warm_forward(row["forwards"]) * steps50.get(row["contender"].split()[-1], 49)

    def versus(row: dict, base: dict | None) -> float:
        same_request = base is not None and row["contender"] != "stock ref2va"
        return denoise50(base) / denoise50(row) if same_request else float("nan")

    def quality(row: dict, base: dict | None) -> float:
        return psnr(row["frames"], base["frames"]) if base is not None and row is not base \
            and row["contender"] not in ("stock ref2va", "ours turbo") else float("nan")

    print(f"\n{'contender':<14} {'s/forward':>10} {'vs stock':>9} {'vs strong':>10} {'50-step denoise s':>18} "
          f"{'warm e2e s':>11} {'peak GiB':>9} {'PSNR/stock':>11} {'PSNR/exact':>11}")
    table = []
    for row in rows:
        per = warm_forward(row["forwards"])
        ratio, ratio_strong = versus(row, stock), versus(row, strong)
        psnr_stock, psnr_exact = quality(row, stock), quality(row, exact_row)
        print(f"{row['contender']:<14} {per:>10.3f} {ratio:>8.2f}x {ratio_strong:>9.2f}x {denoise50(row):>18.1f} "
              f"{row['total_s']:>11.1f} {row['peak_gib']:>9.1f} {psnr_stock:>11.1f} {psnr_exact:>11.1f}")
        table.append({"contender": row["contender"], "s_per_forward": per, "first_forward_s": row["forwards"][0]
                      if row["forwards"] else None, "forwards_of_49": steps50.get(row["contender"].split()[-1], 49),
                      "ratio_vs_stock": ratio, "ratio_vs_strong": ratio_strong,
                      "denoise_50_steps_s": denoise50(row), "peak_gib": row["peak_gib"], "psnr_vs_stock": psnr_stock,
                      "psnr_vs_exact": psnr_exact, "total_s": row["total_s"], "cold_s": row.get("cold_s"),
                      "stages": row.get("stages"), "cache": row.get("cache"), "notices": row.get("notices", [])})
    print("\n50-step denoise: 49 forwards (the schedule's last sigma is 0); the fast mode's step cache computes "
          f"{steps50['fast']} of them (exact, independent of the weights); the turbo row holds its own "
          f"{TURBO_FORWARDS} forwards. Ratios are of those denoise seconds.")
    found = {r["contender"]: r for r in table}

    def measured(name: str, key: str) -> float | None:
        return found[name][key] if name in found else None

    targets = [(Target("ours exact vs plain stock", 1.3), measured("ours exact", "ratio_vs_stock")),
               (Target("ours exact vs strong stock", 1.15), measured("ours exact", "ratio_vs_strong")),
               (Target("ours fast vs plain stock", 3.5), measured("ours fast", "ratio_vs_stock")),
               (Target("ours fast vs strong stock", 3.0), measured("ours fast", "ratio_vs_strong")),
               (Target("ours fast PSNR vs ours exact", 40.0, " dB"), measured("ours fast", "psnr_vs_exact")),
               (Target("ours turbo: 5 s clip end to end", 45.0, " s", at_most=True), measured("ours turbo", "total_s"))]
    verdicts = [target.verdict(value) for target, value in targets]
    verdicts += memory_verdict({r["contender"].removesuffix(" t2va"): r["peak_gib"] for r in table
                                if r["contender"] != "stock ref2va"})
    verdicts += planner_verdicts(table)
    print("\ntargets (issue 35, 50-step denoise, random weights"
          + ("; a tiny CPU smoke run: these verdicts say nothing about speed):" if tiny else "):"))
    for line in verdicts:
        print(f"  {line}")
    print("  random weights show speed, memory and how far the levers move the output; they cannot show "
          "whether a real model's picture survives that move")
    if args.json:
        args.json.write_text(json.dumps({"device": device, "tiny": tiny, "steps": args.steps, "rows": table,
                                         "targets": verdicts}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
