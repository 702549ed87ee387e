"""``daotai render`` (with its dry run, shot cache, retakes and --open) and ``daotai qc``, which checks
a render folder again."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from daotai.cli.common import (
    RESOLUTION_HELP,
    STDIN,
    boards_format,
    cluster_address,
    err,
    out,
    read_script,
    speed_mode,
)
from daotai.errors import Cancelled, interrupted_inside


def open_with_system(path: Path, platform: Optional[str] = None, run=None) -> Optional[str]:
    """Open a file with the desktop's default application; returns why not, or None when it was handed over.

    macOS ``open``, Windows ``start`` (a cmd.exe builtin), elsewhere ``xdg-open``. The opener is
    started and left running; a missing opener is a note, not a failure (the render is done).
    """
    import subprocess

    platform = platform or sys.platform
    if platform == "darwin":
        command = ["open", str(path)]
    elif platform.startswith(("win", "cygwin")):
        command = ["cmd", "/c", "start", "", str(path)]  # "" is start's window title
    else:
        command = ["xdg-open", str(path)]
    run = run or subprocess.Popen
    try:
        run(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError as exc:
        return f"could not open {path} with {command[0]} ({exc.strerror or exc}); open it yourself"
    return None


def _cache_folder(folder: Optional[Path], off: bool) -> Optional[str]:
    """The shot cache of a render: --cache, else the default one; none with --no-cache or DAOTAI_NO_CACHE=1."""
    if off or os.environ.get("DAOTAI_NO_CACHE", "") not in ("", "0"):
        return None
    from daotai.files import default_cache_dir

    return str(folder if folder is not None else default_cache_dir())


def _backend_options(pairs: list[str], **shorthands: object) -> dict[str, object]:
    """``-O key=value`` pairs plus the shorthand flags given (values stay strings: the backend's
    Options type converts and checks them)."""
    from daotai.errors import Issue, OptionError

    options: dict[str, object] = {k: v for k, v in shorthands.items() if v is not None}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise OptionError([Issue("-O", pair, "must be key=value, e.g. -O guidance=4")])
        options[key] = value.strip()
    return options


def render(
    script: Path = typer.Argument(..., help="script file, a plan .json written by `daotai plan`, or - to read a "
                                  "script from stdin"),
    output: Path = typer.Option(Path("out"), "-o", "--output", help="output folder"),
    backend: str = typer.Option("previz", "--backend", help="render backend"),
    preset: Optional[str] = typer.Option(None, "--preset", help="preview | draft | final: override the size"),
    shots: Optional[str] = typer.Option(None, "--shots", help="comma-separated shot ids to render"),
    codec: str = typer.Option("h264", "--codec", help="h264 | hevc | prores"),
    encoder: str = typer.Option(
        "software", "--encoder", help="software (default: the same bytes on every run) | hardware (VideoToolbox on "
        "macOS, NVENC where it opens; software, with a notice, when it fails or misses the fidelity gate) | auto "
        "(hardware for final deliveries, 1920x1080 and larger)"
    ),
    controls: bool = typer.Option(True, "--controls/--no-controls", help="write depth and mask channels"),
    usd_cameras: bool = typer.Option(
        False, "--usd-cameras", help="also write USD cameras (cameras/<shot>.usda, sequence.usda; needs usd-core: "
        "pip install 'daotai[usd]', else they are skipped with a notice and a manifest entry)"
    ),
    strict: bool = typer.Option(False, "--strict", help="exit non-zero when quality checks fail"),
    enhance_spec: Optional[str] = typer.Option(
        None, "--enhance", help="also deliver restored copies: comma-separated steps, e.g. "
        "'upscale=2, interpolate=60, deflicker, match=SHOT_ID' (see daotai enhance)"
    ),
    model: Optional[str] = typer.Option(None, "--model", help="neural backends: registry name or diffusers folder"),
    device: Optional[str] = typer.Option(None, "--device", help="neural backends: auto | cuda | cuda:N | mps | cpu"),
    steps: Optional[int] = typer.Option(None, "--steps", help="neural backends: denoising steps"),
    gpus: Optional[int] = typer.Option(
        None, "--gpus", help="neural backends: split each shot over N GPUs of this host (context parallel; "
        "with --device cpu, N CPU processes)"
    ),
    speed: Optional[str] = typer.Option(
        None, "--speed", help="neural backends: exact (default: compile + attention kernels on CUDA) | fast "
        "(approximate step caching) | off"
    ),
    adaptive: bool = typer.Option(
        False, "--adaptive", help="neural backends: after a shot with critical GPU health (memory pressure, "
        "throttling), render the following shots one memory tier lower; without it health is only warned about"
    ),
    carry_looks: bool = typer.Option(
        False, "--carry-looks", help="h3: give later shots each character's best-seen frame of the finished shots "
        "(large, frontal, sharp) as an extra picture reference; the manifest's notices say which frame fed which "
        "shot (same as -O carry_looks=true)"
    ),
    cluster: Optional[str] = typer.Option(
        None, "--cluster", help="render the shots on Ray: local (start one here) | auto (running cluster) | ray://host:port"
    ),
    backend_opts: list[str] = typer.Option(
        [], "-O", "--backend-opt", help="a backend option as key=value (repeatable); `daotai backends` lists each "
        "backend's options, e.g. -O guidance=4 -O offload=model"
    ),
    cache_dir: Optional[Path] = typer.Option(
        None, "--cache", help="folder of finished shots: an unchanged shot is reused, not rendered again "
        "(default: the user's cache folder, or $DAOTAI_CACHE_DIR)"
    ),
    no_cache: bool = typer.Option(False, "--no-cache", help="render every shot; read and write no shot cache"),
    cache_gb: float = typer.Option(20.0, "--cache-size", min=0.0, help="the shot cache's cap in GB (least "
                                   "recently used shots go first; never more than a quarter of its disk)"),
    resolution: Optional[str] = typer.Option(None, "--resolution", help=RESOLUTION_HELP),
    open_when_done: bool = typer.Option(
        False, "--open", help="open the sequence when done (macOS open, Linux xdg-open, Windows start)"
    ),
    force: bool = typer.Option(
        False, "--force", help="render into a folder that is not a render of this script: it is replaced "
        "whole (a folder holding files daotai did not write is kept beside it as <folder>.replaced-<time>)"
    ),
    takes: int = typer.Option(
        1, "--takes", help="render each shot up to N times with other seeds; keep the first take that passes "
        "the --retake-on checks (else the best, with a notice); the manifest records every take"
    ),
    take_budget: Optional[str] = typer.Option(
        None, "--take-budget", help="wall-clock time the run may spend on takes after each shot's first, "
        "e.g. 900, 15m, 1.5h (default: no limit); when it is spent the other shots keep their first take"
    ),
    retake_on: str = typer.Option(
        "camera", "--retake-on", help="comma-separated checks that call for another take: camera (flow check and "
        "recovered camera path), motion (judder, frozen frames), subject, framing, any, or a qc.json check name"
    ),
    keep_takes: bool = typer.Option(False, "--keep-takes", help="keep the takes not chosen under takes/<shot id>/"),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="plan, print how long the render would take on this machine, and write nothing"
    ),
    boards: Optional[str] = typer.Option(
        None, "--boards", help="also write storyboard pages, as the web console prints them: pdf (boards.pdf) | "
        "png (boards/page_01.png …)"
    ),
) -> None:
    """Render a script to shots, sequence, controls, contact sheet, timeline, manifest, qc.

    The render fills a staging folder beside the output folder and replaces the folder whole
    when it is done: a stopped render leaves the earlier one untouched and says how to resume.

    Shots whose inputs did not change since an earlier render (same shot plan, characters,
    backend, options, model files, encode settings and library versions) are reused from the
    shot cache; the manifest says which shots were rendered and which reused."""
    plan_obj = _load_plan(script, preset, resolution)
    settings = _pipeline_settings(
        backend=backend, codec=codec, encoder=encoder, preset=preset, controls=controls, usd_cameras=usd_cameras,
        shots=shots, strict=strict, enhance_spec=enhance_spec, backend_opts=backend_opts, model=model, device=device,
        steps=steps, speed=speed, adaptive=adaptive, gpus=gpus, carry_looks=carry_looks, cluster=cluster,
        cache_dir=cache_dir, no_cache=no_cache, cache_gb=cache_gb, force=force, takes=takes, take_budget=take_budget,
        retake_on=retake_on, keep_takes=keep_takes, boards=boards,
    )
    if not _preflight(plan_obj, settings, script, output, dry_run):
        return
    result = _run_render(plan_obj, output, settings, script)
    _report_done(result, open_when_done, strict)


def _load_plan(script: Path, preset: Optional[str], resolution: Optional[str]):
    """The plan to render: a plan .json as written, or a script (file or stdin) planned at --preset and
    --resolution. A plan's size is fixed, so --resolution with a plan is refused."""
    from daotai.run.settings import load_plan_or_script

    scripts_read: list[Path] = []

    def loader(path: Path, preset_name: Optional[str]):
        scripts_read.append(path)
        return read_script(path, preset_name, resolution)

    plan_obj = load_plan_or_script(script, preset=preset, loader=loader)
    if resolution and not scripts_read:  # the file was a plan: its size is fixed
        from daotai.errors import PlanError

        raise PlanError(f"--resolution: {resolution!r} cannot resize an existing plan; plan the script again "
                        "with --resolution")
    return plan_obj


def _pipeline_settings(*, backend: str, codec: str, encoder: str, preset: Optional[str], controls: bool,
                       usd_cameras: bool, shots: Optional[str], strict: bool, enhance_spec: Optional[str],
                       backend_opts: list[str], model: Optional[str], device: Optional[str], steps: Optional[int],
                       speed: Optional[str], adaptive: bool, gpus: Optional[int], carry_looks: bool,
                       cluster: Optional[str], cache_dir: Optional[Path], no_cache: bool, cache_gb: float, force: bool,
                       takes: int, take_budget: Optional[str], retake_on: str, keep_takes: bool,
                       boards: Optional[str]):
    """The render command's options as PipelineSettings, each checked as it is read (in the order the
    options' errors are reported: the first wrong one is named)."""
    from daotai.encode.hardware import check_mode
    from daotai.run.retakes import TakePolicy, parse_budget
    from daotai.run.settings import PipelineSettings

    retakes = TakePolicy(takes, parse_budget(take_budget), tuple(c.strip() for c in retake_on.split(",") if c.strip()),
                         keep_takes)
    if takes > 1 and cluster:
        from daotai.errors import OptionError

        raise OptionError.at("--takes", takes, "retakes run on this machine only; leave out --cluster to use them")
    return PipelineSettings(
        backend=backend,
        codec=codec,
        encoder=check_mode(encoder),
        size_preset=preset.strip().lower() if preset else None,
        controls=controls,
        usd_cameras=usd_cameras,
        shots=tuple(s.strip() for s in shots.split(",") if s.strip()) if shots else (),
        strict=strict,
        **({"enhance": _enhance_spec(enhance_spec)} if enhance_spec else {}),
        options=_backend_options(backend_opts, model=model, device=device, steps=steps, speed=speed_mode(speed),
                                 adaptive=adaptive or None, gpus=gpus, carry_looks=carry_looks or None),
        cluster=cluster_address(cluster),
        cache=_cache_folder(cache_dir, no_cache),
        cache_bytes=int(cache_gb * 1024**3),
        force=force,
        retakes=retakes,
        boards=boards_format(boards, "--boards"),
    )


def _preflight(plan_obj, settings, script: Path, output: Path, dry_run: bool) -> bool:
    """The checks before any work: backend options, then model files, then the estimate (a dry run's
    report, or a warning for a long render). False when it was a dry run: nothing more to do."""
    from daotai.errors import BackendError
    from daotai.run.settings import require_models, resolved_options

    resolved_options(settings)  # a wrong option is refused before the progress bar starts
    try:  # so is a model that is not downloaded, before the estimate and any warning
        require_models(settings)
    except BackendError as exc:
        if not dry_run:
            raise
        err.print(f"[yellow]warning[/yellow] {escape(str(exc))}")  # a dry run still says what the render would take
    if dry_run or not settings.cluster:  # a cluster's machines are not this one: no estimate there
        _announce_cost(plan_obj, settings, output, dry_run, None if str(script) == STDIN else script)
    return not dry_run


def _run_render(plan_obj, output: Path, settings, script: Path):
    """Render with a progress bar. A stopped render (Ctrl-C, or any failure the pipeline explained)
    gains notes saying the output folder is untouched and which command resumes it."""
    from daotai.cli.progress import run_with_progress

    try:
        # a script read from stdin has no file: its sound and images are found from here (as read_script checked them)
        source = None if str(script) == STDIN else script
        return run_with_progress(plan_obj, output, settings, source=source, console=err)
    except BaseException as exc:
        interrupted = interrupted_inside(exc)  # a Ctrl-C a library wrapped counts too
        if interrupted and not getattr(exc, "__notes__", None):  # Ctrl-C landed outside the pipeline's frames
            exc.add_note(f"Render stopped; {output} is as it was: a render replaces it only once complete.")
        if getattr(exc, "__notes__", None):  # the render said what it finished: name the command that resumes
            import shlex

            exc.add_note(f"to resume: daotai {shlex.join(sys.argv[1:])}")
        if interrupted:  # typer would turn Ctrl-C into a silent exit 130
            stopped = Cancelled("interrupted (Ctrl-C)")
            for note in exc.__notes__:
                stopped.add_note(note)
            raise stopped from None
        raise


def _report_done(result, open_when_done: bool, strict: bool) -> None:
    """After the render: where the sequence is, --open it, and with --strict fail on failed checks."""
    out.print(f"[green]done[/green] {result.sequence} ({result.summary})")
    if open_when_done:
        problem = open_with_system(Path(result.sequence))
        if problem:
            err.print(f"[yellow]note[/yellow] {escape(problem)}")
    if strict and not result.qc_ok:
        from daotai.errors import QualityError

        raise QualityError(f"quality checks failed: see {result.qc_path}")


def qc(
    folder: Path = typer.Argument(..., help="a render output folder (with plan.json)"),
    strict: bool = typer.Option(False, "--strict", help="exit non-zero when any check fails"),
) -> None:
    """Re-run the quality checks on a render folder and rewrite qc.json."""
    from daotai.run.recheck import check_folder

    report = check_folder(folder, console=err)
    out.print(report.summary_text())
    if strict and not report.ok:
        from daotai.errors import QualityError

        raise QualityError(f"quality checks failed: see {folder / 'qc.json'}")


def _announce_cost(plan_obj, settings, output: Path, dry_run: bool, source: Optional[Path] = None) -> None:
    """Before rendering: with --dry-run the plan and its estimated time (nothing is written); otherwise a
    warning when the render would run longer than LONG_RENDER_S here. Small previz plans are not timed."""
    from daotai.plan.planner import select_shots
    from daotai.render.cost import LONG_RENDER_S, format_duration
    from daotai.run.estimate import estimate_render
    from daotai.run.reuse import reusable_shots

    chosen = select_shots(plan_obj, list(settings.shots)) if settings.shots else plan_obj
    reused = reusable_shots(chosen, settings, source)  # a shot the cache gives back costs only its copy
    estimate = estimate_render(chosen, settings.backend, settings.options, settings.controls, quick=not dry_run,
                               reused=reused)
    if dry_run:
        out.print(f"dry run: {len(chosen.shots)} shot{'s' if len(chosen.shots) != 1 else ''}, {chosen.total_frames} "
                  f"frames ({chosen.total_duration_s:g} s at {chosen.fps:g} fps, {chosen.width}x{chosen.height}) "
                  f"with {settings.backend} → {output}")
        out.print("estimate: " + escape(estimate.describe() if estimate else "not known for this backend"))
        out.print("nothing was written")
    elif estimate is not None and estimate.long:
        err.print(f"[yellow]warning[/yellow] this render would take {escape(estimate.describe())}, over "
                  f"{format_duration(LONG_RENDER_S)}; --preset preview, fewer shots (--shots) or a faster machine "
                  "make it shorter (Ctrl-C stops it; what is finished is kept)")


def _enhance_spec(spec: str) -> str:
    """Validate an --enhance spec before any rendering starts (OptionError, exit 2, names the problem)."""
    from daotai.post.enhance import parse_steps

    parse_steps(spec)
    return spec
