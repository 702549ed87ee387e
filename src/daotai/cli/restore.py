"""Restoring footage outside a render: ``daotai enhance`` (a clip or a still image) and ``daotai watch``
(every new clip dropped into a folder)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from daotai.cli.common import err, out


def _cli_steps(upscale, interpolate, deflicker, match_colour, method, interpolate_method, model, sha256, h3=None,
               **diffusion):
    """Step configs from the enhance/watch options (OptionError names a bad value); ``diffusion``: re-render options,
    ``h3``: what only method h3 reads (script, shot, accept_licence)."""
    from daotai.errors import NO_VALUE, OptionError
    from daotai.post.colour import DeflickerConfig, MatchColourConfig
    from daotai.post.enhance import ordered, parse_h3, parse_interpolate, parse_upscale

    steps = []
    if method == "h3":  # a re-render at the clip's own size and rate, not an upscale method
        if upscale:
            raise OptionError.at("--upscale", upscale, "method h3 re-renders at the clip's own size; upscale the "
                                 "result in a second run (--method classical or diffusion)")
        steps.append(parse_h3(model=str(model) if model else None, **(h3 or {}), **diffusion))
    else:
        for flag, given in (h3 or {}).items():
            if given:
                raise OptionError.at(f"--{flag.replace('_', '-')}", given, "is only read by --method h3")
    if match_colour is not None:
        steps.append(MatchColourConfig(reference=str(match_colour)))
    if deflicker:
        steps.append(DeflickerConfig())
    if interpolate:
        steps.append(parse_interpolate(interpolate, interpolate_method))
    if upscale:
        given = {k: v for k, v in diffusion.items() if v is not None}
        steps.append(parse_upscale(upscale, method, str(model) if model else None, sha256, **given))
    if not steps:
        raise OptionError.at("enhance", NO_VALUE, "no step given; use --upscale, --interpolate, --deflicker, "
                             "--match-colour or --method h3")
    return ordered(steps)


_UPSCALE_HELP = "upscale ×2 or ×4"
_INTERP_HELP = "frame rate (e.g. 60), x2 or x4"
_METHOD_HELP = ("upscale method: classical | lanczos | spandrel (needs --model and --sha256) | diffusion "
                "(classical, then a Wan video-to-video re-render; --model, --strength, --steps, --prompt); or h3: "
                "MiniMax-H3 re-renders the clip at its own size (--strength, --steps, --seed, --prompt or --script "
                "with --shot, --accept-licence)")


def _image_steps(upscale, interpolate, deflicker, match_colour, method, model, sha256, denoise, denoise_strength):
    """Step configs for a still image (OptionError names a bad value or a step that needs video)."""
    from daotai.errors import NO_VALUE, EncodeError, OptionError
    from daotai.post.colour import MatchColourConfig
    from daotai.post.enhance import DenoiseConfig, parse_upscale

    if method == "h3":
        raise OptionError.at("--method", method, "re-renders video; for a still use classical, lanczos or spandrel")
    for flag, given in (("--interpolate", interpolate), ("--deflicker", deflicker)):
        if given:
            raise OptionError.at(flag, given, "works on video (it needs frames over time); a still image takes "
                                 "--match-colour, --denoise and --upscale")
    steps = []
    if match_colour is not None:
        steps.append(MatchColourConfig(reference=str(match_colour)))
    if denoise:
        try:
            steps.append(DenoiseConfig(strength=denoise_strength))
        except EncodeError as exc:  # the config's own check: the flag's value is wrong
            rule = str(exc).partition(": ")[2].removeprefix(f"{denoise_strength!r} ")
            raise OptionError.at("--denoise-strength", denoise_strength, rule) from None
    if upscale:
        steps.append(parse_upscale(upscale, method, str(model) if model else None, sha256))
    if not steps:
        raise OptionError.at("enhance", NO_VALUE, "no step given; use --upscale, --denoise or --match-colour")
    return steps


_MATCH_HELP = "reference clip whose colour to match (also spelled --match-color)"


def enhance(
    source: Path = typer.Argument(..., help="video or still image to restore"),
    output: Path = typer.Option(..., "-o", "--output", help="file to write (.mp4 for a video, .png/.jpg/… for an image)"),
    upscale: Optional[str] = typer.Option(None, "--upscale", help=_UPSCALE_HELP),
    interpolate: Optional[str] = typer.Option(None, "--interpolate", help=_INTERP_HELP),
    deflicker: bool = typer.Option(False, "--deflicker", help="remove fast brightness flicker"),
    match_colour: Optional[Path] = typer.Option(None, "--match-colour", help=_MATCH_HELP),
    match_color: Optional[Path] = typer.Option(None, "--match-color", hidden=True),  # US spelling, kept out of --help
    method: str = typer.Option("classical", "--method", help=_METHOD_HELP),
    interpolate_method: str = typer.Option("dis", "--interpolate-method", help="dis (optical flow) | blend"),
    model: Optional[Path] = typer.Option(
        None, "--model", help="spandrel: upscaler weights (.safetensors); diffusion: model name or diffusers folder "
        "(default wan2.1-t2v-1.3b); h3: model name or folder (default minimax-h3)"
    ),
    sha256: Optional[str] = typer.Option(None, "--sha256", help="expected SHA-256 of --model"),
    strength: Optional[float] = typer.Option(
        None, "--strength", help="diffusion: how much is re-rendered, 0..1 (default 0.3; 0 = classical only); "
        "h3: 0 < s <= 1 (default 0.3; 1 = a whole new generation)"
    ),
    schedule: Optional[int] = typer.Option(None, "--steps", help="diffusion: schedule length; int(steps x strength) "
                                           "run; h3: sigma points, int((steps - 1) x strength) forwards run"),
    prompt: Optional[str] = typer.Option(None, "--prompt", help="diffusion, h3: what the clip shows (optional)"),
    seed: Optional[int] = typer.Option(None, "--seed", help="diffusion, h3: noise seed (default 0)"),
    device: Optional[str] = typer.Option(None, "--device", help="diffusion, h3: auto | cuda | cuda:N | mps | cpu"),
    script: Optional[Path] = typer.Option(None, "--script", help="h3: the script whose characters and shot prompt "
                                          "the re-render uses (with --shot)"),
    shot: Optional[str] = typer.Option(None, "--shot", help="h3: the script's shot the clip is"),
    accept_licence: bool = typer.Option(False, "--accept-licence", help="h3: accept MiniMax-H3's licence (recorded "
                                        "once)"),
    denoise: bool = typer.Option(False, "--denoise", help="still images: remove noise (non-local means)"),
    denoise_strength: float = typer.Option(5.0, "--denoise-strength", help="still images: denoise strength, 1..30"),
) -> None:
    """Restore a clip (upscale, interpolate frames, deflicker, match colour) or a still image (match colour,
    denoise, upscale)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from daotai.encode.read import probe
    from daotai.events import Progress as ProgressEvent
    from daotai.post.enhance import enhance_image, enhance_iter, image_steps, is_image

    if is_image(source):
        from daotai.errors import NO_VALUE, EncodeError, OptionError

        chosen = _image_steps(upscale, interpolate, deflicker, match_colour or match_color, method, model, sha256, denoise,
                              denoise_strength)
        try:
            image_steps(chosen)
        except EncodeError as exc:  # a step this picture cannot take: the flag's fault (exit 2)
            path, _, rule = str(exc).partition(": ")
            raise OptionError.at(path, NO_VALUE, rule) from None
        with err.status("enhance"):
            result = enhance_image(source, output, chosen)
        out.print(f"[green]enhanced[/green] {output}: {result.width}x{result.height} "
                  f"({', '.join(s['step'] for s in result.manifest['steps'])})")
        return
    if denoise:
        from daotai.errors import OptionError

        raise OptionError.at("--denoise", True, "works on still images; for a clip use --deflicker or --method diffusion")

    steps = _cli_steps(upscale, interpolate, deflicker, match_colour or match_color, method, interpolate_method,
                       model, sha256,
                       h3={"script": str(script) if script else None, "shot": shot,
                           "accept_licence": accept_licence or None},
                       strength=strength, steps=schedule, prompt=prompt, seed=seed, device=device)
    probe(source)  # a missing or unreadable input is reported before the progress bar appears
    events = enhance_iter(source, output, steps)
    columns = (TextColumn("{task.description}"), BarColumn(bar_width=None), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=err) as bars:
        task = bars.add_task("enhance", total=None)
        model_task = None  # model loading and denoising steps (method diffusion) get a bar of their own
        while True:
            try:
                event = next(events)
            except StopIteration as stop:
                result = stop.value
                break
            if isinstance(event, ProgressEvent):
                if event.stage != "enhance" and model_task is None:
                    model_task = bars.add_task(event.stage, total=None)
                bars.update(task if event.stage == "enhance" else model_task, description=escape(event.message),
                            completed=event.done, total=event.total)
    out.print(
        f"[green]enhanced[/green] {output}: {result.width}x{result.height}, {result.frames} frames at "
        f"{float(result.fps):g} fps ({', '.join(s['step'] for s in result.manifest['steps'])})"
    )


def watch(
    folder: Path = typer.Argument(..., help="folder to watch"),
    upscale: Optional[str] = typer.Option(None, "--upscale", help=_UPSCALE_HELP),
    interpolate: Optional[str] = typer.Option(None, "--interpolate", help=_INTERP_HELP),
    deflicker: bool = typer.Option(False, "--deflicker", help="remove fast brightness flicker"),
    match_colour: Optional[Path] = typer.Option(None, "--match-colour", help=_MATCH_HELP),
    match_color: Optional[Path] = typer.Option(None, "--match-color", hidden=True),  # US spelling, kept out of --help
    method: str = typer.Option("classical", "--method", help=_METHOD_HELP),
    once: bool = typer.Option(False, "--once", help="scan once and exit"),
    interval: float = typer.Option(2.0, "--interval", help="seconds between scans"),
    settle: float = typer.Option(5.0, "--settle", help="seconds a new file must stay untouched"),
) -> None:
    """Enhance every new video dropped into FOLDER to <name>_enhanced.mp4 beside it."""
    from daotai.post.watch import run_watch

    steps = _cli_steps(upscale, interpolate, deflicker, match_colour or match_color, method, "dis", None, None)
    for event in run_watch(folder, steps, once=once, interval_s=interval, settle_s=settle):
        colour = {"done": "green", "failed": "red"}.get(event.status, "dim")
        if event.status != "waiting" or once:
            err.print(f"[{colour}]{event.status}[/{colour}] {escape(event.name)}: {escape(event.detail)}")
