"""Hardware video encoders: which ones a platform can have, whether this machine's FFmpeg can
open them, and which one a render uses.

``daotai render --encoder auto|software|hardware``:

- ``software`` (the default): libx264 / libx265 / prores_ks, the same bytes on every run.
- ``hardware``: the first hardware encoder of the codec that opens here — VideoToolbox
  (``h264_videotoolbox``, ``hevc_videotoolbox``) on macOS, NVENC (``h264_nvenc``,
  ``hevc_nvenc``) on Linux and Windows.
- ``auto``: hardware for final deliveries (frames of at least the ``final`` preset's
  1920x1080), software for previews and drafts, where reproducible bytes matter more than
  encode time.

Being compiled into FFmpeg says little: PyAV's wheels carry NVENC, AMF and QSV on Linux, and
they fail to open without the GPU and driver. :func:`probe_encoder` therefore opens each
candidate and encodes a few tiny frames. A hardware encoder's output is not reproducible
bit for bit and its quality is the encoder's own, so the pipeline measures it against the
project's encode-fidelity gate before using it and falls back to software, with a notice,
when it misses (``daotai.run.encoder_choice``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from daotai.errors import Issue, OptionError

ENCODER_MODES = ("auto", "software", "hardware")
SOFTWARE_ENCODERS = {"h264": "libx264", "hevc": "libx265", "prores": "prores_ks"}
CODEC_NAMES = {"h264": "H.264", "hevc": "HEVC", "prores": "ProRes"}
FINAL_FRAME_PIXELS = 1920 * 1080  # the `final` preset's size (daotai.script.schema.SIZE_PRESETS)
PROBE_SIZE = (320, 180)  # above every hardware encoder's minimum (NVENC's is 145x49 for HEVC)
PROBE_FRAMES = 3


@dataclass(frozen=True)
class HardwareEncoder:
    """One hardware encoder and the settings daotai opens it with."""

    name: str  # the FFmpeg encoder, e.g. "h264_videotoolbox"
    codec: str  # "h264" | "hevc": what it writes
    family: str  # "videotoolbox" | "nvenc"
    options: tuple[tuple[str, str], ...] = ()  # encoder options aiming at the fidelity gate
    # Bit rate as bits per pixel per frame, for encoders without a constant-quality mode on every
    # machine (VideoToolbox on Intel Macs); None: the options set the quality.
    bits_per_pixel: float | None = None

    def stream_options(self, width: int, height: int, fps: Fraction) -> dict[str, str]:
        """The options for a stream of this size and rate (a bit rate where the encoder needs one)."""
        options = dict(self.options)
        if self.bits_per_pixel is not None:
            options["b"] = str(round(self.bits_per_pixel * width * height * float(fps)))
        return options


# VideoToolbox: constant quality (-q:v) exists only on Apple Silicon, so the rate is set from the
# size: 0.30 bit per pixel is ~15 Mbit/s at 1080p24 for H.264 (about twice what x264 at CRF 18
# spends on a previz shot), 0.20 for HEVC. Unmeasured on a Mac: the fidelity gate checks every
# run, and scripts/mac-check.sh reports speed and PSNR for the first Mac that runs it.
# NVENC: constant-quality VBR (rc vbr, cq 19, no rate cap), slow preset p5 with the hq tune.
HARDWARE_ENCODERS: tuple[HardwareEncoder, ...] = (
    HardwareEncoder("h264_videotoolbox", "h264", "videotoolbox", (("profile", "high"), ("allow_sw", "0")), 0.30),
    HardwareEncoder("hevc_videotoolbox", "hevc", "videotoolbox", (("profile", "main"), ("allow_sw", "0")), 0.20),
    HardwareEncoder("h264_nvenc", "h264", "nvenc",
                    (("preset", "p5"), ("tune", "hq"), ("rc", "vbr"), ("cq", "19"), ("b", "0"), ("profile", "high"))),
    HardwareEncoder("hevc_nvenc", "hevc", "nvenc",
                    (("preset", "p5"), ("tune", "hq"), ("rc", "vbr"), ("cq", "21"), ("b", "0"), ("profile", "main"))),
)
# Which families a platform (sys.platform) can have: the media engine on a Mac, NVIDIA elsewhere.
PLATFORM_FAMILIES = {"darwin": ("videotoolbox",), "linux": ("nvenc",), "win32": ("nvenc",)}


@dataclass(frozen=True)
class EncoderProbe:
    """What this machine's FFmpeg does with one encoder."""

    name: str
    compiled: bool  # in this FFmpeg build
    opens: bool  # opened and encoded a few tiny frames
    detail: str = ""  # why not, when it does not open

    def describe(self) -> str:
        """One line: 'h264_nvenc: opens' or why not."""
        if self.opens:
            return f"{self.name}: opens"
        if not self.compiled:
            return f"{self.name}: not in this FFmpeg build"
        return f"{self.name}: compiled in but does not open ({self.detail})"


@dataclass(frozen=True)
class EncoderChoice:
    """The encoder a render uses and why; ``fallback`` when hardware was wanted but is not used."""

    hardware: HardwareEncoder | None
    reason: str
    fallback: bool = False


def candidates(platform: str, codec: str) -> tuple[HardwareEncoder, ...]:
    """Hardware encoders of ``codec`` that ``platform`` (a sys.platform value) can have, preferred first."""
    families = PLATFORM_FAMILIES.get(platform, ())
    return tuple(e for e in HARDWARE_ENCODERS if e.codec == codec and e.family in families)


def hardware_encoder(name: str) -> HardwareEncoder:
    """The table's row for an FFmpeg encoder name."""
    for encoder in HARDWARE_ENCODERS:
        if encoder.name == name:
            return encoder
    known = ", ".join(e.name for e in HARDWARE_ENCODERS)
    raise OptionError(Issue("--encoder", name, f"is not a hardware encoder daotai knows; one of {known}"))


def probe_encoder(name: str) -> EncoderProbe:
    """Whether this FFmpeg has encoder ``name`` and can open it: encodes PROBE_FRAMES small frames.

    Needs PyAV only (no numpy): the probe also runs on a bare machine, e.g. in ``doctor``.
    """
    import av

    if name not in av.codecs_available:
        return EncoderProbe(name, compiled=False, opens=False, detail="not in this FFmpeg build")
    width, height = PROBE_SIZE
    try:
        context = av.CodecContext.create(name, "w")
        context.width, context.height = width, height
        context.pix_fmt = "yuv420p"
        context.time_base = Fraction(1, 24)
        context.framerate = Fraction(24)
        context.open()
        packets = 0
        for index in range(PROBE_FRAMES):
            frame = av.VideoFrame(width, height, "yuv420p")
            luma, *chroma = frame.planes
            row = bytes((x + 4 * index) & 255 for x in range(luma.line_size))  # a gradient moving 4 px a frame
            luma.update(row * luma.height)
            for plane in chroma:
                plane.update(b"\x80" * plane.buffer_size)  # neutral chroma
            frame.pts = index
            packets += len(context.encode(frame))
        packets += len(context.encode(None))
    except Exception as exc:  # noqa: BLE001  (drivers fail in many ways: FFmpegError, OSError, ValueError…)
        return EncoderProbe(name, compiled=True, opens=False, detail=f"{type(exc).__name__}: {exc}")
    if packets == 0:
        return EncoderProbe(name, compiled=True, opens=False, detail="opened but wrote no packets")
    return EncoderProbe(name, compiled=True, opens=True)


def probe_platform(platform: str | None = None,
                   opener: Callable[[str], EncoderProbe] = probe_encoder) -> dict[str, EncoderProbe]:
    """Every hardware encoder the platform can have, probed (encoder name → probe)."""
    platform = platform or sys.platform
    names = [e.name for codec in ("h264", "hevc") for e in candidates(platform, codec)]
    return {name: opener(name) for name in names}


@lru_cache(maxsize=1)
def installed_probes() -> Mapping[str, EncoderProbe]:
    """This machine's probe, made once per process (opening an encoder costs a few milliseconds to
    a second of driver start-up)."""
    return probe_platform()


def is_final_delivery(width: int, height: int) -> bool:
    """Whether frames of this size are a final delivery: at least the `final` preset's pixels."""
    return width * height >= FINAL_FRAME_PIXELS


def check_mode(mode: str) -> str:
    """The encoder mode, or OptionError naming --encoder."""
    if mode not in ENCODER_MODES:
        raise OptionError(Issue("--encoder", mode, f"must be one of {', '.join(ENCODER_MODES)}"))
    return mode


def choose_encoder(mode: str, codec: str, *, final: bool, platform: str,
                   probes: Mapping[str, EncoderProbe]) -> EncoderChoice:
    """The encoder for ``mode`` (auto | software | hardware), pure: the platform and what the probe
    found are passed in."""
    check_mode(mode)
    software = SOFTWARE_ENCODERS[codec]
    if mode == "software":
        return EncoderChoice(None, f"software encoder {software} (--encoder software)")
    if mode == "auto" and not final:
        return EncoderChoice(None, f"software encoder {software}: --encoder auto uses hardware only for final "
                                   "deliveries (1920x1080 and larger)")
    if codec == "prores":
        return EncoderChoice(None, f"software encoder {software}: daotai has no hardware ProRes encoder",
                             fallback=mode == "hardware")
    found = candidates(platform, codec)
    for encoder in found:
        probe = probes.get(encoder.name)
        if probe is not None and probe.opens:
            return EncoderChoice(encoder, f"hardware encoder {encoder.name} (--encoder {mode})")
    if not found:
        why = f"this platform ({platform}) has no hardware {CODEC_NAMES[codec]} encoder daotai uses"
    else:
        why = "; ".join(probes[e.name].describe() if e.name in probes else f"{e.name}: not probed" for e in found)
    return EncoderChoice(None, f"--encoder {mode}: no hardware {CODEC_NAMES[codec]} encoder opens here ({why}); "
                               f"encoding with the software encoder {software}", fallback=True)


def summarise(probes: Iterable[EncoderProbe]) -> str:
    """The probe as one line for ``daotai doctor``."""
    lines = [probe.describe() for probe in probes]
    return "; ".join(lines) if lines else "none for this platform"
