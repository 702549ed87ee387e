"""Our `wan` backend against stock diffusers `WanPipeline`, same weights, same process.

The full-size Wan2.1-T2V-1.3B architecture (30 blocks, 12 heads x 128, FFN 8960, text
width 4096; 1.42 B transformer parameters) and the stock Wan VAE are built with random
weights on the GPU and saved as a diffusers folder; both contenders load that folder.
The UMT5 text encoder keeps its 4096 width but only 2 layers and a word vocabulary: text
encoding happens once per video, outside the per-step and decode timings compared here,
and both sides carry the same encoder.

Measured per contender, 480x832, 81 frames, CFG 5, bf16 transformer, float32 VAE:
seconds per denoising step (first step reported apart: it holds kernel warm-up), VAE
decode seconds, peak GPU memory allocated during the generation. Each side runs ``--repeats``
times, alternating, and keeps its best. Printed as a table and one JSON line; ``ratio`` = stock s/step / ours s/step (>= 0.95 means ours is no slower).

    python bench/neural.py                 # on an NVIDIA GPU (bf16)
    python bench/neural.py --tiny          # CPU smoke test with a tiny random model
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FULL = {
    "transformer": dict(patch_size=(1, 2, 2), num_attention_heads=12, attention_head_dim=128, in_channels=16,
                        out_channels=16, text_dim=4096, freq_dim=256, ffn_dim=8960, num_layers=30,
                        cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-6, rope_max_seq_len=1024),
    "vae": dict(base_dim=96, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2, temperal_downsample=[False, True, True]),
    "text": dict(d_model=4096, d_kv=64, d_ff=10240, num_layers=2, num_heads=64),
    "width": 832, "height": 480, "frames": 81,
}
TINY = {
    "transformer": dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=16,
                        out_channels=16, text_dim=32, freq_dim=256, ffn_dim=32, num_layers=2,
                        cross_attn_norm=True, qk_norm="rms_norm_across_heads", rope_max_seq_len=32),
    "vae": dict(base_dim=3, z_dim=16, dim_mult=[1, 1, 1, 1], num_res_blocks=1, temperal_downsample=[False, True, True]),
    "text": dict(d_model=32, d_kv=8, d_ff=32, num_layers=2, num_heads=2),
    "width": 64, "height": 64, "frames": 17,
}
WORDS = ("a the of and in on at with medium wide close shot camera slowly pushes toward woman man "
         "office street blue shirt glasses walks looks stands light day night").split()


def word_tokenizer() -> Any:
    """A word-level fast tokenizer built in code (no download)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2}
    for word in WORDS:
        vocab.setdefault(word, len(vocab))
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")


def build_folder(config: dict, folder: Path, device: str, dtype: Any) -> Path:
    """Random-weight Wan pipeline of ``config`` saved as a diffusers folder (built on ``device``)."""
    import torch
    from diffusers import AutoencoderKLWan, FlowMatchEulerDiscreteScheduler, WanPipeline, WanTransformer3DModel
    from transformers import UMT5Config, UMT5EncoderModel

    torch.manual_seed(0)
    with torch.device(device):  # initialise on the GPU: 1.4 B random parameters take minutes on a CPU
        transformer = WanTransformer3DModel(**config["transformer"]).to(dtype)
        vae = AutoencoderKLWan(**config["vae"]).to(torch.float32)
        text = UMT5EncoderModel(UMT5Config(vocab_size=64, relative_attention_num_buckets=32, pad_token_id=0,
                                           eos_token_id=1, decoder_start_token_id=0, **config["text"])).to(dtype)
    pipe = WanPipeline(tokenizer=word_tokenizer(), text_encoder=text, vae=vae,
                       scheduler=FlowMatchEulerDiscreteScheduler(shift=3.0), transformer=transformer)
    pipe.save_pretrained(folder)
    del pipe, transformer, vae, text
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return folder


@dataclass
class Timings:
    first_step_s: float  # call start → first step end (text encoding and warm-up kernels included)
    s_per_step: float  # steps 2..n: first step end → decode start (GPU queue drained), / (n - 1)
    decode_s: float
    total_s: float
    peak_bytes: int


class Clock:
    """Step-end marks (not synchronised, identical for both sides) and a synchronised VAE decode timer.

    Steps are timed from the first step's end to the start of the VAE decode, after a device
    synchronise, so work still queued on the GPU is counted the same way for both contenders.
    """

    def __init__(self, sync):
        self.sync = sync
        self.started = 0.0
        self.step_ends: list[float] = []
        self.decode_started: float | None = None
        self.decode_s = 0.0

    def start(self) -> None:
        self.sync()
        self.started = time.perf_counter()
        self.step_ends = []
        self.decode_started = None
        self.decode_s = 0.0

    def step_end(self) -> None:
        self.step_ends.append(time.perf_counter())

    def wrap_decode(self, vae) -> None:
        original = vae.decode

        def timed(*args, **kwargs):
            self.sync()
            began = time.perf_counter()
            if self.decode_started is None:
                self.decode_started = began
            out = original(*args, **kwargs)
            self.sync()
            self.decode_s += time.perf_counter() - began
            return out

        vae.decode = timed

    def timings(self, total_s: float, peak_bytes: int) -> Timings:
        n = len(self.step_ends)
        end = self.decode_started if self.decode_started is not None else self.step_ends[-1]
        per_step = (end - self.step_ends[0]) / (n - 1) if n > 1 else end - self.started
        return Timings(self.step_ends[0] - self.started, per_step, self.decode_s, total_s, peak_bytes)


def _device_tools(device: str):
    import torch

    if device.startswith("cuda"):
        return torch.cuda.synchronize, torch.cuda.reset_peak_memory_stats, torch.cuda.max_memory_allocated
    return (lambda: None), (lambda: None), (lambda: 0)


def run_stock(folder: Path, device: str, dtype: Any, request, steps: int) -> Timings:
    """Stock diffusers: WanPipeline.from_pretrained, VAE in float32, everything on the device."""
    import torch
    from diffusers import AutoencoderKLWan, WanPipeline

    sync, reset_peak, peak = _device_tools(device)
    vae = AutoencoderKLWan.from_pretrained(folder, subfolder="vae", torch_dtype=torch.float32)
    pipe = WanPipeline.from_pretrained(folder, vae=vae, torch_dtype=dtype).to(device)
    pipe.set_progress_bar_config(disable=True)
    clock = Clock(sync)
    clock.wrap_decode(pipe.vae)

    def on_step_end(pipe_, step, timestep, tensors):
        clock.step_end()
        return tensors

    def generate(frames: int):
        return pipe(prompt=request.prompt, negative_prompt=request.negative_prompt, height=request.height,
                    width=request.width, num_frames=frames, num_inference_steps=steps, guidance_scale=5.0,
                    generator=torch.Generator("cpu").manual_seed(request.seed), output_type="np",
                    callback_on_step_end=on_step_end)

    generate(5)  # warm-up: kernels, allocator, same as ours
    reset_peak()
    clock.start()
    generate(request.frames)
    sync()
    result = clock.timings(time.perf_counter() - clock.started, int(peak()))
    del pipe, vae
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return result


def run_ours(folder: Path, device: str, plan, steps: int) -> tuple[Timings, str | None]:
    """daotai's `wan` backend rendering the shot (native request, retiming, uint8 frames included)."""
    import torch

    from daotai.render.base import Progress, RenderJob, RunContext
    from daotai.render.wan import WanBackend

    sync, reset_peak, peak = _device_tools(device)
    backend = WanBackend(model=str(folder), device=device, steps=steps, guidance=5.0)
    shot = plan.shots[0]
    # Warm-up on a 5-frame request (0.25 s at 16 fps), which also loads the pipeline.
    warm_shot = shot.model_copy(update={"duration_s": 0.25})
    list(backend.render(RenderJob(plan, warm_shot, controls=False), RunContext()))
    clock = Clock(sync)
    clock.wrap_decode(backend.runner.pipe.vae)
    reset_peak()
    clock.start()
    for event in backend.render(RenderJob(plan, shot, controls=False), RunContext()):
        if isinstance(event, Progress) and event.stage == "denoise":
            clock.step_end()
    sync()
    result = clock.timings(time.perf_counter() - clock.started, int(peak()))
    tier = backend.runner.tier
    backend.close()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return result, tier


def bench_plan(width: int, height: int, frames: int):
    """A one-shot plan whose Wan request is exactly ``frames`` native frames at ``width``x``height``."""
    from daotai.plan.planner import plan_script
    from daotai.script.load import validate_script

    seconds = (frames - 1) / 16.0  # frames_for(.., 16) = frames - 1, snapped up to 4k+1 = frames
    script = validate_script({
        "title": "bench", "fps": 16, "size": [width, height], "seed": 1,
        "characters": [{"id": "ana", "appearance": "blue shirt, glasses"}],
        "shots": [{"shot_id": "s01", "duration": seconds, "camera": {"type": "dolly", "motion": [0, 0, -0.5]}}],
    })
    return plan_script(script)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="tiny random model on the CPU (smoke test)")
    parser.add_argument("--steps", type=int, default=None, help="denoising steps measured (default 10; tiny 3)")
    parser.add_argument("--device", default=None, help="default cuda (cpu with --tiny)")
    parser.add_argument("--repeats", type=int, default=2, help="alternating runs per side (best kept)")
    parser.add_argument("--folder", type=Path, default=None, help="reuse/keep the random-weight folder here")
    args = parser.parse_args()

    import torch

    config = TINY if args.tiny else FULL
    device = args.device or ("cpu" if args.tiny else "cuda")
    dtype = torch.float32 if device == "cpu" else torch.bfloat16  # daotai's device rules
    steps = args.steps or (3 if args.tiny else 10)
    work = Path(tempfile.mkdtemp(prefix="daotai-bench-"))
    folder = args.folder or work / "wan-random"
    try:
        if not (folder / "model_index.json").is_file():
            started = time.perf_counter()
            build_folder(config, folder, device, dtype)
            print(f"built random-weight folder in {time.perf_counter() - started:.1f} s: {folder}")
        from daotai.render.diffusers_common import SamplingOptions, effective_defaults, native_request

        plan = bench_plan(config["width"], config["height"], config["frames"])
        request = native_request(plan, plan.shots[0], effective_defaults("wan", SamplingOptions(steps=steps, guidance=5.0)))
        assert (request.width, request.height, request.frames) == (config["width"], config["height"], config["frames"])
        stocks, ourses = [], []
        for _ in range(args.repeats):  # alternate, keep each side's best: machine noise hits both
            stocks.append(run_stock(folder, device, dtype, request, steps))
            timing, tier = run_ours(folder, device, plan, steps)
            ourses.append(timing)
        stock = min(stocks, key=lambda t: t.s_per_step)
        ours = min(ourses, key=lambda t: t.s_per_step)
    finally:
        if args.folder is None:
            shutil.rmtree(work, ignore_errors=True)

    ratio = stock.s_per_step / ours.s_per_step
    report = {
        "device": torch.cuda.get_device_name(0) if device.startswith("cuda") else "cpu",
        "size": f"{request.width}x{request.height}", "frames": request.frames, "steps": steps, "cfg": 5.0,
        "dtype": str(dtype).replace("torch.", ""), "our_memory_tier": tier,
        **{name: {"s_per_step": t.s_per_step, "first_step_s": t.first_step_s, "vae_decode_s": t.decode_s,
                  "total_s": t.total_s, "peak_gib": t.peak_bytes / 1024**3}
           for name, t in (("stock", stock), ("ours", ours))},
        "ratio_stock_over_ours": ratio,
        "ok_speed": ratio >= 0.95,
        "ok_memory": ours.peak_bytes <= stock.peak_bytes * 1.01 if device.startswith("cuda") else None,
    }
    print(f"{'':8}{'s/step':>10}{'1st step':>10}{'VAE dec s':>11}{'total s':>9}{'peak GiB':>10}")
    for name in ("stock", "ours"):
        r = report[name]
        print(f"{name:8}{r['s_per_step']:10.3f}{r['first_step_s']:10.3f}{r['vae_decode_s']:11.2f}"
              f"{r['total_s']:9.1f}{r['peak_gib']:10.2f}")
    print(f"ratio (stock s/step / ours) = {ratio:.3f}  (target >= 0.95); memory tier chosen: {tier}")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
