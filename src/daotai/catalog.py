"""What daotai knows about model families and models: one catalog, pure data.

Every question "what does this model need" — sampling defaults, the frame and size rules
the planner snaps to, the prompt budget of its text encoder, its memory footprint, the
diffusers pipeline classes it loads as, its VAE dtype exceptions, its licence — is answered
by a :class:`Family` row or a :class:`ModelRow`, never by comparing names elsewhere.

The catalog sits at the bottom of the layers (beside ``errors``): ``plan`` reads snap rules
and prompt budgets from it, ``runtime`` footprints and pipelines, ``render`` defaults. It
imports nothing heavier than the standard library.

Third-party packages add rows through the ``daotai.models`` entry-point group: each entry
point loads to a :class:`Family`, a :class:`ModelRow` or an iterable of them. They are
discovered on first use (no import-time side effects) and cannot replace a built-in name.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Iterable, Mapping

MODEL_ENTRY_POINTS = "daotai.models"


@dataclass(frozen=True)
class SnapRule:
    """What a renderer needs: frames of the form ``frame_step*k+frame_offset`` and sides of a multiple."""

    name: str
    frame_step: int | None  # None: any frame count works
    size_multiple: int  # width and height must be multiples of this
    native_fps: float | None  # the rate the model was trained at; None: any rate
    frame_offset: int = 1  # frames = frame_step*k + frame_offset (k >= 1); 1 for the 4k+1 / 8k+1 VAEs
    # Whether every shot of a plan lists this rule in its ``snapping`` (plan.json). Rules of models
    # whose generations have their own duration limits (and so are split or trimmed by the backend,
    # which records what it did) stay out, so plans read the same whichever models are installed.
    planned: bool = True
    min_seconds: float | None = None  # shortest generation the model makes (shorter shots are trimmed)
    max_seconds: float | None = None  # longest single generation (longer shots are made in segments)


@dataclass(frozen=True)
class Canvas:
    """A model's own canvas rule: a target short edge, an area cap, both sides multiples, an aspect range."""

    short_edge: int
    max_pixels: int
    multiple: int
    min_aspect: float  # width / height
    max_aspect: float


@dataclass(frozen=True)
class PromptBudget:
    """How long a model's text encoder reads: max T5 tokens and a rough tokens-per-word ratio."""

    model: str
    max_tokens: int
    tokens_per_word: float = 1.4  # English T5 SentencePiece averages ~1.3–1.5 pieces a word


@dataclass(frozen=True)
class ModelFootprint:
    """Parameter counts (billions) and geometry of a latent video model."""

    name: str
    transformer_b: float
    text_encoder_b: float
    vae_b: float
    spatial_down: int  # VAE spatial downsampling × patch size
    temporal_down: int  # VAE temporal downsampling
    hidden: int  # transformer width
    # Decoder activation bytes per output pixel per frame at bf16, measured order of
    # magnitude for causal 3D VAEs without tiling (their conv caches dominate).
    vae_bytes_per_pixel: float
    ffn: int = 0  # transformer MLP width (0: 4 × hidden)
    layers: int = 30  # transformer blocks (group offload keeps ~2 resident)
    # The backend can move the text encoder off the device once the prompt is encoded, so with
    # nothing offloaded it is resident only while encoding (runtime.memory reads this).
    releasable_text_encoder: bool = False
    # Share of transformer_b in the repeated blocks' linear layers other than the AdaLN modulation:
    # the weights int8 rows and fast mode's FP8 linears hold in one byte (1.0 where not counted).
    one_byte_share: float = 1.0
    vae_weight_bytes: float = 4.0  # bytes a VAE weight takes on the device (float32 by the device rules)

    def with_one_byte_linears(self) -> ModelFootprint:
        """This footprint with those linears at one byte a weight (int8 rows, FP8), in bf16-equivalent billions."""
        return replace(self, transformer_b=self.transformer_b * (1.0 - self.one_byte_share / 2))

    @property
    def weight_params(self) -> float:
        """Parameters of every component, in units (not billions)."""
        return (self.transformer_b + self.text_encoder_b + self.vae_b) * 1e9


@dataclass(frozen=True)
class Family:
    """A model family: how its models sample, what sizes and frame counts they take, how they load."""

    name: str
    snap: SnapRule  # frames, size multiple and native frame rate of the family's VAE and patching
    steps: int
    guidance: float
    shift: float | None  # flow-matching timestep shift (None: keep the scheduler's)
    negative_prompt: str
    max_sequence_length: int  # text tokens the encoder sees
    prompt: PromptBudget
    pipelines: tuple[str, ...]  # diffusers pipeline classes a local folder of this family may hold
    vae_dtypes: Mapping[str, str] = field(default_factory=dict)  # device kind → VAE dtype, where the device rule is wrong
    canvas: Canvas | None = None  # the model's own canvas rule (None: the plan's size snapped to snap.size_multiple)
    # Workflow name → the components (folders) it loads, for families whose checkpoint is split
    # into partitions a workflow loads alone (empty: every component of the folder).
    workflows: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelRow:
    """A known model: where it is published, what it needs, and what differs from its family."""

    name: str
    repo_id: str
    revision: str | None  # a commit hash pins the files; None = the repo's main branch (unpinned)
    family: str
    pipeline: str  # diffusers pipeline class in model_index.json
    footprint: ModelFootprint
    size_gb: float  # download size, roughly (for `models list`)
    licence: str
    # Sampling and geometry that differ from the family's (steps, guidance, shift, native_fps,
    # size_multiple, max_sequence_length).
    overrides: Mapping[str, float | int] = field(default_factory=dict)
    # Licences that must be shown and accepted before the weights are pulled or run: the points a
    # user has to know (one line each) and where the full text is. Empty: no gate.
    licence_summary: tuple[str, ...] = ()
    licence_url: str = ""
    # Download size per workflow (GB, roughly), for families whose workflows load partitions.
    workflow_sizes_gb: Mapping[str, float] = field(default_factory=dict)
    # A checkpoint that is not a diffusers folder (no model_index.json): `models pull` fetches only
    # the files matching these patterns (as the hub matches them: * spans folders) and checks them
    # as safetensors. Empty: a diffusers folder, pulled whole (pickles never).
    checkpoint_files: tuple[str, ...] = ()

    @property
    def licence_gated(self) -> bool:
        """Whether pulling or running the model needs an explicit acceptance of its licence."""
        return bool(self.licence_summary)

    @property
    def native_fps(self) -> float:
        """The frame rate the model generates at."""
        value = self.overrides.get("native_fps")
        return float(value) if value is not None else float(family(self.family).snap.native_fps or 0.0)


# ------------------------------------------------------------------ the built-in rows

WAN_NEGATIVE = (
    "overexposed, oversaturated, static frame, blurred details, subtitles, text, watermark, "
    "worst quality, low quality, jpeg artifacts, ugly, deformed, disfigured, extra fingers, "
    "badly drawn hands, badly drawn face, fused fingers, cluttered background, three legs, "
    "many people in the background, walking backwards"
)
LTX_NEGATIVE = "worst quality, inconsistent motion, blurry, jittery, distorted, watermark, text"

# The previz renderer takes any frame count and rate; its sides only need to be even (yuv420p).
PREVIZ_SNAP = SnapRule("previz", frame_step=None, size_multiple=2, native_fps=None)
WAN_SNAP = SnapRule("wan", frame_step=4, size_multiple=16, native_fps=16.0)
LTX_SNAP = SnapRule("ltx", frame_step=8, size_multiple=32, native_fps=24.0)
# MiniMax-H3's video VAE encodes 17-frame chunks into 5 latents: frames snap up to 17n+5 at a fixed
# 24 fps, and one generation spans 5–15 s (diffusers' MiniMaxH3ModularPipeline). The h3 backend
# trims shorter shots and makes longer ones in segments, so plans do not list the rule.
H3_SNAP = SnapRule("h3", frame_step=17, size_multiple=32, native_fps=24.0, frame_offset=5, planned=False,
                   min_seconds=5.0, max_seconds=15.0)
# LTX-2 (audio and video in one pass): 8k+1 frames at 24 fps, sides multiples of 32 (its VAE compresses 8x in time
# and 32x in space); one generation is at most 20 s (the pipelines' own ``max_seconds``). The ltx2 backend makes
# longer shots in segments and records the sizes it rounds to, so plans do not list the rule.
LTX2_SNAP = SnapRule("ltx2", frame_step=8, size_multiple=32, native_fps=24.0, planned=False, max_seconds=20.0)
# Its canvas: a 768 short edge, at most 768x1344 pixels, sides multiples of 32, 1:4 to 4:1.
H3_CANVAS = Canvas(short_edge=768, max_pixels=768 * 1344, multiple=32, min_aspect=0.25, max_aspect=4.0)

# Wan reads up to 512 T5 tokens; LTX-Video's pipelines cut at 128 by default.
WAN_PROMPT = PromptBudget("wan", 512)
LTX_PROMPT = PromptBudget("ltx", 128)
# MiniMax-H3 reads the prompt through a Qwen3-VL language model (byte-level BPE, ~1.3 pieces an
# English word) with no hard cut; 512 keeps its text rows a small share of the packed sequence.
H3_PROMPT = PromptBudget("h3", 512, tokens_per_word=1.3)
# LTX-2 reads up to 1024 Gemma 3 tokens (SentencePiece, ~1.3 pieces an English word; the pipelines' default cut).
LTX2_PROMPT = PromptBudget("ltx2", 1024, tokens_per_word=1.3)

APACHE = "Apache-2.0"
LTX_LICENCE = "LTX-Video open weights licence (see the model card; commercial use has conditions)"
H3_LICENCE = "MiniMax H3 Community License"
# The points of the licence a user must know before pulling or running the weights, as the model's
# release describes them. Not legal advice and not the licence: its full text is the licence file
# of the model repository, and that text governs.
H3_LICENCE_SUMMARY = (
    "use is limited to the territories the licence names",
    "commercial use above the licence's revenue threshold needs a separate licence from MiniMax",
    "outputs may not be used to train other models",
    "products and services that serve the model to others carry the duties the licence lists",
)
LTX2_LICENCE = "LTX-2 Community License Agreement"
# As for MiniMax-H3: the points a user must know, not the licence; the licence file of the repository governs.
LTX2_LICENCE_SUMMARY = (
    "commercial use by an entity above the licence's annual revenue threshold needs a separate licence from "
    "Lightricks",
    "use must keep to the licence's acceptable-use restrictions",
    "redistributing the weights or derivatives carries the notice duties the licence lists",
)
# The components each MiniMax-H3 workflow loads (diffusers' MiniMaxH3Blocks.get_workflow): one
# repository holds both 61.7 GiB transformer partitions, `transformer` (t2va, fl2va) and
# `transformer_ref` (ref2va).
_H3_SHARED = ("text_encoder", "tokenizer", "processor", "vae", "audio_vae", "scheduler", "audio_scheduler")
H3_WORKFLOWS = MappingProxyType({
    "t2va": _H3_SHARED + ("transformer",),
    "fl2va": _H3_SHARED + ("transformer",),
    "ref2va": _H3_SHARED + ("transformer_ref",),
})

# Values follow each model's published inference settings (Wan2.1: 50 steps, CFG 5, shift 3
# at 480p; LTX-Video: 50 steps, CFG 3, 24 fps). LTX's VAE decodes in bf16 on CUDA: in fp32 it
# doubles the decode peak for no visible difference.
_FAMILIES = (
    Family("wan", WAN_SNAP, 50, 5.0, 3.0, WAN_NEGATIVE, 512, WAN_PROMPT, ("WanPipeline",)),
    Family("wan-vace", WAN_SNAP, 50, 5.0, 3.0, WAN_NEGATIVE, 512, WAN_PROMPT, ("WanVACEPipeline",)),
    # Wan-Fun Control-Camera: the Wan grid and 16 fps; the published inference settings are 50 steps,
    # CFG 6, shift 5 (VideoX-Fun's predict_v2v_control_camera examples).
    Family("wan-camera", WAN_SNAP, 50, 6.0, 5.0, WAN_NEGATIVE, 512, WAN_PROMPT,
           ("WanPipeline", "WanImageToVideoPipeline")),
    Family("ltx", LTX_SNAP, 50, 3.0, None, LTX_NEGATIVE, 128, LTX_PROMPT, ("LTXPipeline", "LTXConditionPipeline"),
           vae_dtypes=MappingProxyType({"cuda": "bfloat16"})),
    # MiniMax-H3 is guidance-distilled (one forward per step, no negative prompt) and keeps its
    # schedulers' shifts (12 video, 3 audio). Its release names no step count: 50 sigma points (49
    # forwards) is daotai's default, not the model card's. Its video VAE ships for bf16 (diffusers
    # keeps the encoder and norms in float32 by itself): decoding it in float32, the device rule for
    # other VAEs, took 47.9 s against bf16's 6.2 s for 124 frames at 1344x768 on an H200.
    Family("h3", H3_SNAP, 50, 0.0, None, "", 512, H3_PROMPT, ("MiniMaxH3ModularPipeline",),
           canvas=H3_CANVAS, workflows=H3_WORKFLOWS, vae_dtypes=MappingProxyType({"cuda": "bfloat16"})),
    # LTX-2: 40 steps at CFG 4 (the release's diffusers example); the pipelines' own defaults for the audio
    # guidance, spatio-temporal and modality guidance apply. Folders saved as any of the three pipelines load as
    # the condition pipeline (the ltx2 backend conditions on previz frames and on the previous segment).
    Family("ltx2", LTX2_SNAP, 40, 4.0, None, LTX_NEGATIVE, 1024, LTX2_PROMPT,
           ("LTX2Pipeline", "LTX2ImageToVideoPipeline", "LTX2ConditionPipeline"),
           vae_dtypes=MappingProxyType({"cuda": "bfloat16"})),
)

# Footprints: parameters from the published configs. VACE adds control blocks beside every
# other main block (~+0.7 B at 1.3B, ~+3 B at 14B).
_WAN13 = ModelFootprint("wan2.1-t2v-1.3b", 1.42, 5.68, 0.13, 16, 4, 1536, 120.0, 8960, 30)
_WAN14 = ModelFootprint("wan2.1-t2v-14b", 14.0, 5.68, 0.13, 16, 4, 5120, 120.0, 13824, 40)
_VACE13 = ModelFootprint("wan2.1-vace-1.3b", 2.1, 5.68, 0.13, 16, 4, 1536, 120.0, 8960, 30)
_VACE14 = ModelFootprint("wan2.1-vace-14b", 17.0, 5.68, 0.13, 16, 4, 5120, 120.0, 13824, 40)
_WAN22_5B = ModelFootprint("wan2.2-ti2v-5b", 5.0, 5.68, 0.7, 32, 4, 3072, 120.0, 14336, 30)
# Control-Camera checkpoints: the Wan transformer (an I2V one on Wan2.1: CLIP image cross-attention,
# start-image latents beside the noisy ones) plus the camera adapter (a 2x2 patch convolution over
# 24 x 8 x 8 unshuffled ray channels and one residual block of two 3x3 convolutions at the model's
# width: 0.05 B at 1536, 0.5 B at 5120). The CLIP ViT-H image encoder (0.63 B) is counted with the
# text encoder. Wan2.2-A14B holds two 14B experts (high and low noise) with an adapter each.
_CAM13 = ModelFootprint("wan2.1-fun-1.3b-control-camera", 1.5, 6.31, 0.13, 16, 4, 1536, 120.0, 8960, 30)
_CAM14 = ModelFootprint("wan2.1-fun-14b-control-camera", 15.1, 6.31, 0.13, 16, 4, 5120, 120.0, 13824, 40)
_CAM22_5B = ModelFootprint("wan2.2-fun-5b-control-camera", 5.3, 5.68, 0.7, 32, 4, 3072, 120.0, 14336, 30)
_CAM22_A14B = ModelFootprint("wan2.2-fun-a14b-control-camera", 29.0, 5.68, 0.13, 16, 4, 5120, 120.0, 13824, 80)
# What the wan-camera backend reads from a published Control-Camera repository: the transformer's
# safetensors (one file, or shards with their index, at the top or, for a two-expert model, in one
# sub-folder per expert) and its config. The VAE and the text and image encoders come from the diffusers base.
CONTROL_CAMERA_FILES = ("*diffusion_pytorch_model*.safetensors", "*diffusion_pytorch_model*.safetensors.index.json",
                        "config.json", "*/config.json", "README.md", "LICENSE*")
_LTX2B = ModelFootprint("ltx-video-2b", 1.92, 4.76, 0.4, 32, 8, 2048, 40.0, 8192, 28)
_LTX13B = ModelFootprint("ltx-video-13b", 13.0, 4.76, 0.4, 32, 8, 4096, 40.0, 16384, 48)
# MiniMax-H3: one transformer partition 33.1 B (diffusers' default config: 50 blocks, width 5376,
# FFN 14336, 56 heads x 128), the Qwen3-VL conditioner ~33.3 B, video VAE 2.6 B (a 36-layer ViT
# decoder) + audio VAE 0.15 B; 16x VAE x 2x2 patches = 32 pixels a token. 17 frames make 5 latents,
# so 3 frames a latent over-counts tokens a little (42 latent frames for 124 instead of 37). The
# VAE decode figure is an estimate (nothing measured yet). The backend releases the conditioner
# after encoding when everything resident would not fit. Of the partition's 33.12 B, 20.04 B sit in
# the blocks' linears that int8 rows and FP8 round to one byte; the AdaLN modulation (13.0 B) stays
# (counted on the config; on one H100, FP8 took 19.2 GiB off the measured peak against 18.7 counted).
_H3 = ModelFootprint("minimax-h3", 33.1, 33.3, 2.75, 32, 3, 5376, 40.0, 14336, 50, releasable_text_encoder=True,
                     one_byte_share=0.605)
# On CUDA its video VAE runs in bfloat16 (the family's vae_dtypes) but for the parts diffusers keeps in
# float32 (encoder, quant_conv, norms: 0.18 B) and the float32 audio VAE (0.15 B): 2.24 bytes a weight.
H3_CUDA_VAE_WEIGHT_BYTES = (2.42 * 2 + 0.33 * 4) / 2.75

# LTX-2 19B (diffusers' LTX2VideoTransformer3DModel defaults: 48 blocks, video width 4096 = 32 heads x 128, FFN
# 16384, plus the audio stream at 2048), Gemma 3 12B as text encoder, video and audio VAEs with the vocoder (about
# 1 B together: an estimate, nothing measured yet); 32x spatial and 8x temporal VAE, patch size 1.
_LTX2 = ModelFootprint("ltx-2-19b", 19.0, 12.2, 1.0, 32, 8, 4096, 40.0, 16384, 48)

# Revisions: no commit hashes could be confirmed offline, so these track the main branch;
# `models pull` records the commit it actually got in the folder's manifest. Overrides: the
# 14B models use shift 5 at 720p; Wan2.2-TI2V-5B generates at 24 fps with a 32-pixel grid;
# the distilled LTX samples in 8 steps without CFG.
_MODELS = (
    ModelRow("wan2.1-t2v-1.3b", "Wan-AI/Wan2.1-T2V-1.3B-Diffusers", None, "wan", "WanPipeline", _WAN13, 29.0, APACHE),
    ModelRow("wan2.1-t2v-14b", "Wan-AI/Wan2.1-T2V-14B-Diffusers", None, "wan", "WanPipeline", _WAN14, 80.0, APACHE,
             MappingProxyType({"shift": 5.0})),
    ModelRow("wan2.1-vace-1.3b", "Wan-AI/Wan2.1-VACE-1.3B-diffusers", None, "wan-vace", "WanVACEPipeline", _VACE13,
             30.0, APACHE),
    ModelRow("wan2.1-vace-14b", "Wan-AI/Wan2.1-VACE-14B-diffusers", None, "wan-vace", "WanVACEPipeline", _VACE14,
             85.0, APACHE, MappingProxyType({"shift": 5.0})),
    ModelRow("wan2.2-ti2v-5b", "Wan-AI/Wan2.2-TI2V-5B-Diffusers", None, "wan", "WanPipeline", _WAN22_5B, 34.0, APACHE,
             MappingProxyType({"native_fps": 24.0, "shift": 5.0, "size_multiple": 32})),
    # Wan-Fun Control-Camera (alibaba-pai, Apache-2.0). The repositories hold VideoX-Fun's layout: the
    # transformer with its control_adapter.* tensors as safetensors, the VAE and text/image encoders as
    # pickles (which daotai refuses). The wan-camera backend runs them as a diffusers Wan folder of the
    # same base with the transformer and adapter from the checkpoint (-O checkpoint=<its folder>), so
    # `models pull` fetches only the transformer's safetensors (shards, index) and its config.
    # Sizes are the whole repositories' (the pull itself is sized from the hub's file list).
    ModelRow("wan2.1-fun-1.3b-control-camera", "alibaba-pai/Wan2.1-Fun-V1.1-1.3B-Control-Camera", None, "wan-camera",
             "WanImageToVideoPipeline", _CAM13, 19.0, APACHE, checkpoint_files=CONTROL_CAMERA_FILES),
    ModelRow("wan2.1-fun-14b-control-camera", "alibaba-pai/Wan2.1-Fun-V1.1-14B-Control-Camera", None, "wan-camera",
             "WanImageToVideoPipeline", _CAM14, 47.0, APACHE, checkpoint_files=CONTROL_CAMERA_FILES),
    ModelRow("wan2.2-fun-5b-control-camera", "alibaba-pai/Wan2.2-Fun-5B-Control-Camera", None, "wan-camera",
             "WanImageToVideoPipeline", _CAM22_5B, 30.0, APACHE,
             MappingProxyType({"native_fps": 24.0, "size_multiple": 32}), checkpoint_files=CONTROL_CAMERA_FILES),
    ModelRow("wan2.2-fun-a14b-control-camera", "alibaba-pai/Wan2.2-Fun-A14B-Control-Camera", None, "wan-camera",
             "WanImageToVideoPipeline", _CAM22_A14B, 70.0, APACHE, checkpoint_files=CONTROL_CAMERA_FILES),
    ModelRow("ltx-video-2b", "Lightricks/LTX-Video", None, "ltx", "LTXPipeline", _LTX2B, 28.0, LTX_LICENCE),
    ModelRow("ltx-video-0.9.7-distilled", "Lightricks/LTX-Video-0.9.7-distilled", None, "ltx", "LTXConditionPipeline",
             _LTX13B, 60.0, LTX_LICENCE, MappingProxyType({"steps": 8, "guidance": 1.0})),
    # The diffusers folders of Lightricks/LTX-2 (transformer ~38 GB, Gemma 3 ~24 GB, VAEs and vocoder ~2 GB at bf16);
    # the single-file checkpoints beside them are not pulled (see runtime.model_downloads._fetch).
    ModelRow("ltx-2", "Lightricks/LTX-2", None, "ltx2", "LTX2Pipeline", _LTX2, 65.0, LTX2_LICENCE,
             licence_summary=LTX2_LICENCE_SUMMARY, licence_url="https://huggingface.co/Lightricks/LTX-2"),
    # Sizes in GB at bf16: conditioner 66.6, each transformer partition 66.2, VAEs 5.5.
    ModelRow("minimax-h3", "MiniMaxAI/MiniMax-H3", None, "h3", "MiniMaxH3ModularPipeline", _H3, 205.0, H3_LICENCE,
             licence_summary=H3_LICENCE_SUMMARY, licence_url="https://huggingface.co/MiniMaxAI/MiniMax-H3",
             workflow_sizes_gb=MappingProxyType({"t2va": 138.5, "fl2va": 138.5, "ref2va": 138.5})),
)

@dataclass(frozen=True)
class TurboRow:
    """A step-distilled ("turbo") LoRA of a model family: the sampling it was distilled for.

    A file's own safetensors metadata wins over these values (see daotai.render.neural.turbo);
    a row is what a name means when the file says nothing.
    """

    name: str
    family: str
    repo_id: str  # where it is published (the file is downloaded by the user: `-O turbo=PATH`, or found in the hub cache)
    file_pattern: str  # glob of its file name inside the repository
    forwards: int  # transformer forwards (denoising steps) it was distilled for
    shift: float  # the video scheduler's flow shift it was distilled with
    alpha: float  # strength it is fused at (W += alpha * B @ A)
    short_edge: int  # canvas short edge it was distilled at (pixels)
    partition: str = "transformer"  # MiniMax-H3 partition it is for: transformer (t2va, fl2va) | transformer_ref | both


# MiniMax-H3's turbo LoRAs (published by LightX2V, 4 and 8 steps at 544p and 768p). Their files
# carry no sampling metadata we could confirm offline and the model card gives none: these rows
# hold the step counts their names state, the base model's video shift (12) and full strength;
# a file whose metadata says otherwise wins, and `-O shift=` / `-O turbo_alpha=` override both.
H3_TURBO_REPO = "lightx2v/Minimax-h3-Turbo"
_TURBOS = tuple(
    TurboRow(f"h3-turbo-{forwards}step-{edge}p", "h3", H3_TURBO_REPO, f"*{forwards}*step*{edge}*.safetensors",
             forwards, 12.0, 1.0, edge)
    for forwards in (4, 8) for edge in (544, 768)
)


def turbos() -> Mapping[str, TurboRow]:
    """Every known turbo LoRA by name."""
    return MappingProxyType({row.name: row for row in _TURBOS})


def turbo_row(name: str) -> TurboRow | None:
    """The turbo row called ``name`` (case-insensitive), or None."""
    return turbos().get(name.strip().lower())


OVERRIDABLE = frozenset({"steps", "guidance", "shift", "native_fps", "size_multiple", "max_sequence_length"})


# ------------------------------------------------------------------ lookup


@dataclass
class _Catalog:
    families: dict[str, Family]
    models: dict[str, ModelRow]


_loaded: _Catalog | None = None


def _check_row(row: ModelRow, families: Mapping[str, Family]) -> None:
    """A model row must name a known family and override only what can be overridden."""
    if row.family not in families:
        raise ValueError(f"model {row.name!r}: family {row.family!r} is not in the catalog")
    unknown = set(row.overrides) - OVERRIDABLE
    if unknown:
        raise ValueError(f"model {row.name!r}: overrides {sorted(unknown)} are not among {sorted(OVERRIDABLE)}")


def _not_rows(obj: Any) -> str | None:
    items = obj if isinstance(obj, (list, tuple)) else (obj,)
    wrong = next((item for item in items if not isinstance(item, (Family, ModelRow))), None)
    return None if wrong is None else f"gave {type(wrong).__name__}, not a daotai.catalog Family or ModelRow"


def _entry_point_rows() -> Iterable[Family | ModelRow]:
    """Rows that installed packages declare in the ``daotai.models`` entry-point group (a plugin
    that fails to load is skipped and reported: :func:`daotai.plugins.skipped`)."""
    from daotai.plugins import load_group

    for loaded in load_group(MODEL_ENTRY_POINTS, _not_rows):
        yield from loaded if isinstance(loaded, (list, tuple)) else (loaded,)


def _catalog() -> _Catalog:
    """The built-in rows plus entry-point rows, loaded once on first use."""
    global _loaded
    if _loaded is None:
        families = {f.name: f for f in _FAMILIES}
        models = {m.name: m for m in _MODELS}
        extra = list(_entry_point_rows())
        for item in extra:  # families first, so a package may add a family and its models together
            if isinstance(item, Family) and item.name not in families:
                families[item.name] = item
        for item in extra:
            if isinstance(item, ModelRow) and item.name not in models:
                try:
                    _check_row(item, families)
                except ValueError as error:  # a plugin's row that cannot join: skipped, the rest load
                    from daotai.plugins import PluginProblem, skip

                    skip(PluginProblem(MODEL_ENTRY_POINTS, item.name, f"model row {item.name!r}", str(error)))
                    continue
                models[item.name] = item
        for row in models.values():
            _check_row(row, families)
        _loaded = _Catalog(families, models)
    return _loaded


def reload() -> None:
    """Forget the loaded catalog (after installing a package that declares rows)."""
    global _loaded
    _loaded = None


def families() -> Mapping[str, Family]:
    """Every family by name."""
    return MappingProxyType(_catalog().families)


def family(name: str) -> Family:
    """The family called ``name`` (KeyError names the known ones)."""
    found = _catalog().families.get(name)
    if found is None:
        raise KeyError(f"model family {name!r} is not in the catalog; known: {', '.join(sorted(families()))}")
    return found


def models() -> Mapping[str, ModelRow]:
    """Every known model by name."""
    return MappingProxyType(_catalog().models)


def model_row(name: str) -> ModelRow | None:
    """The row of a model name (case-insensitive), or None for a local folder or an unknown name."""
    return _catalog().models.get(name.strip().lower())


def footprint(name: str) -> ModelFootprint | None:
    """A footprint by model name or footprint name, or None."""
    row = model_row(name)
    if row is not None:
        return row.footprint
    return next((m.footprint for m in _catalog().models.values() if m.footprint.name == name), None)


def snap_rules() -> Mapping[str, SnapRule]:
    """Every snap rule the planner reports on: previz's, then each family's (by rule name) that is planned."""
    rules = {PREVIZ_SNAP.name: PREVIZ_SNAP}
    for fam in _catalog().families.values():
        if fam.snap.planned:
            rules.setdefault(fam.snap.name, fam.snap)
    return MappingProxyType(rules)


def prompt_budgets() -> Mapping[str, PromptBudget]:
    """The prompt budget of every family, by family name."""
    return MappingProxyType({name: fam.prompt for name, fam in _catalog().families.items()})


def with_overrides(fam: Family, row: ModelRow | None) -> Family:
    """The family's row with a model's sampling overrides applied (snap geometry included)."""
    if row is None or not row.overrides:
        return fam
    values = dict(row.overrides)
    snap_changes = {k: values.pop(k) for k in ("native_fps", "size_multiple") if k in values}
    snap = replace(fam.snap, **snap_changes) if snap_changes else fam.snap
    return replace(fam, snap=snap, **values)
