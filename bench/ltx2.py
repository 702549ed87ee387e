"""LTX-2 at its released size: our `ltx2` backend against diffusers' stock condition pipeline.

The released transformer (diffusers' default LTX2VideoTransformer3DModel config: 48 blocks, video width
4096 = 32 heads x 128, FFN 16384, the audio stream at 2048; about 19 B parameters, 38 GB in bf16) is
built with random weights on the GPU, one fresh copy per contender from the same seed. It is not saved:
the folder the contenders load (text encoder, connectors, the full-size video and audio VAEs, vocoder,
scheduler) holds a tiny placeholder transformer, and the full-size one replaces it as the pipeline
loads. Gemma 3 keeps the released text width (3840) but 2 layers and a word vocabulary, so its share
here is small (the released one is a 12 B model).

Contenders, each rendering the same request (one 5 s shot: 121 frames at 768x512, 24 fps, the same
prompt, guidance and seed; the first render of each absorbs compilation and is reported apart):
- ``stock``: ``LTX2ConditionPipeline.from_pretrained`` in bf16, everything on the GPU;
- ``exact``: our backend, ``--speed exact`` (attention kernel choice, compiled repeated blocks);
- ``fast``: our backend, ``--speed fast`` (adds the fixed-schedule step cache, FP8 block linears where the
  GPU has them, the VAE in bf16 channels-last).

Per contender: seconds per denoising step (median of the warm steps: each step runs the conditional and
unconditional batch, the spatio-temporal guidance pass and the modality pass), end-to-end seconds of a
second, warm render (prompt encoding, denoising, video and audio decoding, and for ours the frames
delivered on the plan's grid), peak GPU memory, and PSNR of the frames and of the sound against stock's.

    python bench/neural.py --model ltx2 --steps 8      # one NVIDIA GPU with >= 80 GiB
    python bench/neural.py --model ltx2 --tiny         # CPU smoke test: tiny random components, same code path

The tiny run checks the code path and that exact matches stock (PSNR inf); its timings say nothing (a shared
CPU, a model too small for any lever to matter).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent.parent / "tests"
FULL_SIZE = (768, 512)
TINY_SIZE = (96, 64)
SECONDS = 5.0
GEMMA_WIDTH = 3840  # Gemma 3 12B's hidden size, which the connectors and the transformer's caption input take
GEMMA_LAYERS = 2  # the released encoder has 48; the connectors read every layer's hidden state (layers + 1)


def transformer_config(tiny: bool) -> dict:
    """The transformer's config: diffusers' defaults are the released model's."""
    if not tiny:
        return {}
    return dict(in_channels=4, out_channels=4, patch_size=1, patch_size_t=1, num_attention_heads=2,
                attention_head_dim=8, cross_attention_dim=16, audio_in_channels=4, audio_out_channels=4,
                audio_num_attention_heads=2, audio_attention_head_dim=4, audio_cross_attention_dim=8, num_layers=2,
                qk_norm="rms_norm_across_heads", caption_channels=32, rope_double_precision=False, rope_type="split")


def transformer(tiny: bool, device: str, seed: int = 7) -> Any:
    """A fresh random transformer on ``device`` in bf16 (built there: 38 GB never touch the host)."""
    import torch
    from diffusers import LTX2VideoTransformer3DModel

    torch.manual_seed(seed)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32 if tiny else torch.bfloat16)
    try:
        with torch.device(device):
            model = LTX2VideoTransformer3DModel(**transformer_config(tiny)).eval()
    finally:
        torch.set_default_dtype(previous)
    return model.requires_grad_(False)


def build_folder(folder: Path, tiny: bool) -> Path:
    """Everything but the transformer at its bench size, with a tiny placeholder transformer, saved as a folder."""
    import torch
    from diffusers import AutoencoderKLLTX2Audio, AutoencoderKLLTX2Video, FlowMatchEulerDiscreteScheduler, LTX2Pipeline
    from diffusers.pipelines.ltx2 import LTX2TextConnectors
    from diffusers.pipelines.ltx2.vocoder import LTX2Vocoder
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration

    sys.path.insert(0, str(TESTS))
    import builders  # the tests' tiny LTX-2 and word-level tokenizer

    if tiny:
        return builders.build_ltx2(folder)
    torch.manual_seed(0)
    text = dict(builders.LTX2_GEMMA, hidden_size=GEMMA_WIDTH, intermediate_size=1024, num_hidden_layers=GEMMA_LAYERS,
                num_attention_heads=16, num_key_value_heads=8, head_dim=256)
    gemma = Gemma3ForConditionalGeneration(Gemma3Config(text_config=text, vision_config=builders.LTX2_SIGLIP,
                                                        mm_tokens_per_image=4)).to(torch.bfloat16).eval()
    connectors = LTX2TextConnectors(caption_channels=GEMMA_WIDTH, text_proj_in_factor=GEMMA_LAYERS + 1)
    pipe = LTX2Pipeline(transformer=transformer(True, "cpu"), vae=AutoencoderKLLTX2Video(),
                        audio_vae=AutoencoderKLLTX2Audio(), scheduler=FlowMatchEulerDiscreteScheduler(),
                        text_encoder=gemma, tokenizer=builders.word_tokenizer(), connectors=connectors.to(torch.bfloat16),
                        vocoder=LTX2Vocoder())
    pipe.save_pretrained(folder)
    return folder


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
    """One static 5 s shot with a line of dialogue and a sound, at the bench size."""
    from daotai.plan.planner import plan_script
    from daotai.script.load import load_script

    width, height = TINY_SIZE if tiny else FULL_SIZE
    script = {"title": "ltx2 bench", "fps": 24, "size": [width, height], "seed": 11, "scene": "a quiet office",
              "characters": [{"id": "mara", "appearance": "red coat"}],
              "shots": [{"shot_id": "s1", "duration": SECONDS, "characters": ["mara"], "action": "mara reads",
                         "dialogue": [{"character": "mara", "line": "Nearly done."}], "sound": "rain on the window"}]}
    (work / "bench.json").write_text(json.dumps(script))
    return plan_script(load_script(work / "bench.json"))


class StepTimer:
    """Start time of each denoising step, read from the timesteps the transformer is called with."""

    def __init__(self, sync: Any):
        self.sync, self.starts, self.last = sync, [], None

    def attach(self, module: Any) -> Any:
        def before(module: Any, args: Any, kwargs: Any) -> None:
            timestep = kwargs.get("timestep")
            value = float(timestep.max()) if timestep is not None else None
            if value != self.last:  # a new step (the guidance passes of one step share its timestep)
                self.sync()
                self.starts.append(time.perf_counter())
                self.last = value

        return module.register_forward_pre_hook(before, with_kwargs=True)

    def warm_step(self) -> float:
        """Median step after the first (which carries compilation and first-call costs)."""
        steps = [b - a for a, b in zip(self.starts[:-1], self.starts[1:], strict=True)][1:]
        return statistics.median(steps) if steps else float("nan")


def request_kwargs(plan: Any, steps: int) -> dict:
    """What our backend asks the pipeline for this plan's shot (prompt, sizes, guidance, seed), for stock too."""
    from daotai.plan.prompt import ltx2_prompt_for
    from daotai.render.neural.request import family_defaults

    defaults = family_defaults("ltx2", "ltx-2")
    shot = plan.shots[0]
    frames = 8 * round(SECONDS * 24 / 8) + 1
    return dict(prompt=ltx2_prompt_for(plan, shot),
                negative_prompt=", ".join(p for p in (shot.negative_prompt, defaults.negative_prompt) if p),
                height=plan.height, width=plan.width, num_frames=frames, frame_rate=24.0, num_inference_steps=steps,
                guidance_scale=defaults.guidance, max_sequence_length=defaults.max_sequence_length)


def run_stock(folder: Path, tiny: bool, device: str, plan: Any, steps: int) -> dict:
    """diffusers' condition pipeline as shipped, every component on the device in bf16 (float32 on the CPU)."""
    import numpy as np
    import torch
    from diffusers import LTX2ConditionPipeline

    from daotai.render.neural.retime import resize_rgb, to_uint8
    from daotai.runtime.device import generator_for

    sync, reset, peak = _device_tools(device)
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    pipe = LTX2ConditionPipeline.from_pretrained(str(folder), torch_dtype=dtype)
    pipe.register_modules(transformer=transformer(tiny, device))
    pipe.to(device)
    pipe.set_progress_bar_config(disable=True)
    timer = StepTimer(sync)
    handle = timer.attach(pipe.transformer)
    kwargs = request_kwargs(plan, steps)

    def call() -> Any:
        return pipe(**kwargs, generator=generator_for(plan.shots[0].seed), output_type="pt")

    started = time.perf_counter()
    call()
    sync()
    cold = time.perf_counter() - started
    timer.starts, timer.last = [], None
    reset()
    started = time.perf_counter()
    out = call()
    sync()
    total = time.perf_counter() - started
    handle.remove()
    frames = to_uint8(out.frames)[: plan.shots[0].frames]  # (F, H, W, 3) at the size the VAE decodes to
    made = (frames.shape[2], frames.shape[1])
    if made != (plan.width, plan.height):
        # Our backend delivers every frame at the plan's size (resizing what the pipeline made); stock's frames
        # are resized the same way so the two are compared like for like.
        frames = np.stack([resize_rgb(frame, plan.width, plan.height) for frame in frames])
    result = {"contender": "stock", "step_s": timer.warm_step(), "total_s": total, "cold_s": cold,
              "peak_gib": peak(), "frames": frames, "made": made,
              "audio": out.audio[0].float().cpu().numpy()}
    pipe = out = None  # drop the 38 GB transformer before the next contender builds its own
    _free()
    return result


def run_ours(folder: Path, tiny: bool, device: str, plan: Any, steps: int, speed: str) -> dict:
    """Our ltx2 backend; the folder's placeholder transformer is replaced by the bench-size one as it loads."""
    import numpy as np

    import daotai.render.ltx2 as ltx2
    from daotai.events import Audio, Frame, Notice
    from daotai.render.base import RenderJob, RunContext

    sync, reset, peak = _device_tools(device)
    original = ltx2._load_condition_pipeline
    timer = StepTimer(sync)

    def load_with_bench_transformer(model: str, family: str, runtime: Any) -> Any:
        pipe, resolved = original(model, family, runtime)
        pipe.register_modules(transformer=transformer(tiny, "cpu" if runtime.kind == "cpu" else device))
        timer.attach(pipe.transformer)
        return pipe, resolved

    ltx2._load_condition_pipeline = load_with_bench_transformer
    backend = ltx2.LTX2Backend(model=str(folder), device=device, steps=steps, speed=speed, accept_licence=True)
    try:
        job = RenderJob(plan, plan.shots[0], controls=False)
        started = time.perf_counter()
        list(backend.render(job, RunContext()))
        sync()
        cold = time.perf_counter() - started  # loading, placement, compilation and one render
        timer.starts, timer.last = [], None
        reset()
        started = time.perf_counter()
        events = list(backend.render(job, RunContext()))
        sync()
        total = time.perf_counter() - started
    except BaseException:
        backend.close()  # a failed contender must give its GPU memory back before the next one loads
        raise
    finally:
        ltx2._load_condition_pipeline = original
    (audio,) = [e for e in events if isinstance(e, Audio)]
    cache = getattr(backend.runner.pipe.transformer, "_daotai_interval_cache", None)
    result = {"contender": speed, "step_s": timer.warm_step(), "total_s": total, "cold_s": cold, "peak_gib": peak(),
              "frames": np.stack([e.rgb for e in events if isinstance(e, Frame)]), "audio": audio.samples.T,
              "notices": [e.text for e in events if isinstance(e, Notice) and ("speed" in e.text or "tier" in e.text)],
              "cache": (cache.computed, cache.reused) if cache is not None else None}
    backend.close()
    _free()
    return result


def psnr(a: Any, b: Any, peak: float = 255.0, axis: int = 0) -> float:
    """PSNR over the common length along ``axis`` (frames: axis 0 of (F, H, W, 3); sound: axis 1 of (C, N))."""
    import numpy as np

    count = min(a.shape[axis], b.shape[axis])
    a, b = np.take(a, range(count), axis=axis), np.take(b, range(count), axis=axis)
    error = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if error == 0 else float(10 * np.log10(peak**2 / error))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="tiny random components on the CPU (smoke test)")
    parser.add_argument("--steps", type=int, default=8, help="denoising steps per render (at least 3)")
    parser.add_argument("--contenders", default="stock,exact,fast", help="comma-separated: stock, exact, fast")
    parser.add_argument("--json", type=Path, help="write the table as JSON here")
    parser.add_argument("--folder", type=Path, help="build the component folder here, or reuse it if it is there")
    args = parser.parse_args(argv)
    if args.steps < 3:
        parser.error("--steps: at least 3 (the first step is a warm-up, then two to time)")
    import torch

    device = "cpu" if args.tiny or not torch.cuda.is_available() else "cuda"
    tiny = args.tiny or device == "cpu"
    work = Path(tempfile.mkdtemp(prefix="ltx2bench-"))
    started = time.perf_counter()
    folder = args.folder or work / "ltx2"
    if not (folder / "model_index.json").is_file():
        build_folder(folder, tiny)
    print(f"folder built in {time.perf_counter() - started:.0f} s ({'tiny' if tiny else 'released-size'}; "
          f"device {device}, torch {torch.__version__})", flush=True)
    plan = script_plan(work, tiny)
    rows = []
    for name in [c.strip() for c in args.contenders.split(",") if c.strip()]:
        print(f"-- {name}", flush=True)
        try:
            row = run_stock(folder, tiny, device, plan, args.steps) if name == "stock" else \
                run_ours(folder, tiny, device, plan, args.steps, name)
        except Exception as exc:  # noqa: BLE001 - one contender failing must not lose the others' numbers
            import traceback

            print(f"   failed: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
            print("".join(traceback.format_exception(exc)[-6:]), flush=True)  # where, for the bug report
            _free()
            continue
        rows.append(row)
        print(f"   {row['step_s']:.3f} s/step, warm total {row['total_s']:.1f} s, cold {row['cold_s']:.1f} s, "
              f"peak {row['peak_gib']:.1f} GiB, step cache {row.get('cache')}", flush=True)
        for text in row.get("notices", []):
            print(f"   {text[:160]}", flush=True)
        if row.get("made", (plan.width, plan.height)) != (plan.width, plan.height):
            print(f"   made at {row['made'][0]}x{row['made'][1]}, resized to {plan.width}x{plan.height} as our backend "
                  "delivers", flush=True)
    stock = next((r for r in rows if r["contender"] == "stock"), None)
    print(f"\n{'contender':<10} {'s/step':>8} {'vs stock':>9} {'warm e2e s':>11} {'peak GiB':>9} "
          f"{'PSNR frames':>12} {'PSNR sound':>11}")
    table = []
    for row in rows:
        ratio = stock["step_s"] / row["step_s"] if stock else float("nan")
        frames = psnr(row["frames"], stock["frames"]) if stock and row is not stock else float("nan")
        sound = psnr(row["audio"], stock["audio"], peak=2.0, axis=1) if stock and row is not stock else float("nan")
        print(f"{row['contender']:<10} {row['step_s']:>8.3f} {ratio:>8.2f}x {row['total_s']:>11.1f} "
              f"{row['peak_gib']:>9.1f} {frames:>12.1f} {sound:>11.1f}")
        table.append({"contender": row["contender"], "s_per_step": row["step_s"], "ratio_vs_stock": ratio,
                      "total_s": row["total_s"], "cold_s": row["cold_s"], "peak_gib": row["peak_gib"],
                      "psnr_frames_vs_stock": frames, "psnr_sound_vs_stock": sound, "cache": row.get("cache"),
                      "notices": row.get("notices", [])})
    print("\nsound PSNR is over the [-1, 1] range (peak 2); frames are compared on the shot's own frames.")
    if args.json:
        args.json.write_text(json.dumps({"device": device, "tiny": tiny, "steps": args.steps, "rows": table},
                                        indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
