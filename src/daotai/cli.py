"""Command line front end: ``daotai validate | schema | plan | render | boards | qc | doctor`` and more.

Only calls the library. Every DaotaiError becomes a short message and its exit code; no
traceback reaches the user (set DAOTAI_DEBUG=1 to see one).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

from daotai.errors import Cancelled, DaotaiError, ScriptError

app = typer.Typer(
    name="daotai",
    help="导演台 daotai — turn a director's shot list into video on your own machine.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

INTERNAL_ERROR_EXIT = 70  # EX_SOFTWARE (sysexits.h): an exception daotai did not raise on purpose, i.e. a bug


STDIN = "-"  # a script argument of '-' reads the script from standard input


def _load(script_path: Path, preset: Optional[str] = None, resolution: Optional[str] = None):
    from daotai.script.load import check_reference_files, load_script
    from daotai.script.presets import apply_preset, apply_size

    if preset and resolution:
        from daotai.errors import Issue, OptionError

        raise OptionError([Issue("--resolution", resolution, f"and --preset {preset!r} both set the frame size; give one")])
    if str(script_path) == STDIN:  # `-`: the script comes on stdin; files it names are relative to here
        from daotai.script.load import read_script_stream

        script = read_script_stream(sys.stdin.buffer)
        script_path = Path.cwd() / "<stdin>"
    else:
        script = load_script(script_path)
    missing = check_reference_files(script, script_path.resolve().parent)
    if missing:
        raise ScriptError(missing, str(script_path))
    if resolution:
        return apply_size(script, resolution, "--resolution")
    return apply_preset(script, preset) if preset else script


_RESOLUTION_HELP = "frame size for this run: 4K, 2160p, 1080p, 1920x1080 … (overrides the script's size)"


def _speed_mode(value: Optional[str]) -> Optional[str]:
    """Check ``--speed`` before anything loads (OptionError, exit 2); None keeps the backend's default."""
    if value is None:
        return None
    from daotai.render.speed import parse_speed

    return parse_speed(value)


@app.command()
def validate(
    script: Path = typer.Argument(..., help="script file (.json, .yaml), or - to read it from stdin"),
    as_json: bool = typer.Option(False, "--json", help="print problems as JSON"),
    normalised: bool = typer.Option(
        False, "--normalised", "--normalized", help="print the script in its canonical form (every alias and "
        "shorthand written out, defaults filled in) as JSON"
    ),
) -> None:
    """Check a script and plan it; list every problem with its JSON path, value and rule.

    It plans as render does (timing, transitions, staging, cameras), so a script validate
    passes also starts to render. Field problems come first (a script with them cannot be
    planned); once there are none, every shot is planned and all plan problems are listed
    together. Either kind exits 2, as render does."""
    from daotai.errors import PlanError

    try:
        parsed = _load(script)
        from daotai.plan.planner import plan_script

        planned = plan_script(parsed)
    except (ScriptError, PlanError) as exc:
        if as_json:
            issues = [{"path": i.path, "value": repr(i.value), "rule": i.rule} for i in exc.issues]
            if not issues:  # a plan problem without a JSON path
                issues = [{"path": None, "value": None, "rule": str(exc)}]
            stage = "script" if isinstance(exc, ScriptError) else "plan"
            out.print_json(data={"ok": False, "stage": stage, "issues": issues})
            raise typer.Exit(exc.exit_code) from None
        raise
    for note in planned.scene.notices:
        err.print(f"[cyan]note[/cyan] {escape(note)}")
    for shot in planned.shots:
        for warning in shot.warnings:
            err.print(f"[yellow]warning[/yellow] {shot.shot_id}: {escape(warning)}")
    total = sum(s.duration for s in parsed.shots)
    canonical = parsed.model_dump(mode="json") if normalised else None
    if as_json:
        out.print_json(data={"ok": True, "shots": len(parsed.shots), "seconds": total,
                             **({"script": canonical} if normalised else {})})
    elif normalised:
        sys.stdout.write(json.dumps(canonical, indent=2, ensure_ascii=False) + "\n")
    else:
        out.print(
            f"[green]ok[/green] {script}: {len(parsed.shots)} shot{'s' if len(parsed.shots) != 1 else ''}, "
            f"{len(parsed.characters)} character{'s' if len(parsed.characters) != 1 else ''}, {total:g} s"
        )


@app.command()
def schema(
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="write to a file"),
    accepted: bool = typer.Option(
        False, "--accepted", help="every spelling `daotai validate` accepts (aliases, other field names, text "
        "durations, sizes, colours, camera phrases) instead of the canonical form"
    ),
) -> None:
    """Print the script's JSON Schema (for editors and language models)."""
    from daotai.script.jsonschema import script_json_schema

    text = json.dumps(script_json_schema(accepted=accepted), indent=2, ensure_ascii=False) + "\n"
    if output:
        from daotai.files import atomic_write_text

        atomic_write_text(output, text)
        err.print(f"wrote {output}")
    else:
        sys.stdout.write(text)


@app.command()
def plan(
    script: Path = typer.Argument(..., help="script file"),
    output: Path = typer.Option(..., "-o", "--output", help="plan JSON to write"),
    preset: Optional[str] = typer.Option(None, "--preset", help="preview | draft | final: override the size"),
    resolution: Optional[str] = typer.Option(None, "--resolution", help=_RESOLUTION_HELP),
) -> None:
    """Turn a script into an exact plan: frames, cameras per frame, seeds, prompts."""
    from daotai.files import atomic_write_text
    from daotai.plan.planner import plan_script, plan_to_json

    result = plan_script(_load(script, preset, resolution))
    atomic_write_text(output, plan_to_json(result))
    for note in result.scene.notices:
        err.print(f"[cyan]note[/cyan] {escape(note)}")
    for shot in result.shots:
        for warning in shot.warnings:
            err.print(f"[yellow]warning[/yellow] {shot.shot_id}: {escape(warning)}")
    out.print(
        f"[green]planned[/green] {len(result.shots)} shots, {result.total_frames} frames "
        f"({result.total_duration_s:g} s at {result.fps:g} fps, {result.width}x{result.height}) → {output}"
    )


@app.command()
def cameras(
    script: Path = typer.Argument(..., help="script file"),
    output: Path = typer.Option(..., "-o", "--output", help="folder for the camera files"),
    preset: Optional[str] = typer.Option(None, "--preset", help="preview | draft | final: override the size"),
    usd: bool = typer.Option(False, "--usd/--no-usd", help="also USD cameras (needs usd-core: pip install "
                             "'daotai[usd]'); default: pose files and camera-to-world JSON only"),
) -> None:
    """Write every shot's planned camera for other tools: pose files, camera-to-world JSON, USD (--usd); no render."""
    from daotai.deliver.cameras import write_cameras
    from daotai.plan.planner import plan_script

    result = plan_script(_load(script, preset))
    written = write_cameras(result, output, usd)
    out.print(f"[green]cameras[/green] {len(result.shots)} shots, {len(written)} files → {output}")


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


def _cluster_address(value: Optional[str]) -> Optional[str]:
    """The --cluster address, checked before rendering starts (None: render here)."""
    if value is None:
        return None
    from daotai.cluster.runner import check_address

    return check_address(value)


def _cache_folder(folder: Optional[Path], off: bool) -> Optional[str]:
    """The shot cache of a render: --cache, else the default one; none with --no-cache or DAOTAI_NO_CACHE=1."""
    if off or os.environ.get("DAOTAI_NO_CACHE", "") not in ("", "0"):
        return None
    from daotai.shotcache import default_cache_dir

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


@app.command()
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
    resolution: Optional[str] = typer.Option(None, "--resolution", help=_RESOLUTION_HELP),
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
    from daotai.cli_progress import run_with_progress
    from daotai.errors import BackendError
    from daotai.pipeline import PipelineSettings, load_plan_or_script, require_models, resolved_options

    scripts_read: list[Path] = []

    def loader(path: Path, preset_name: Optional[str]):
        scripts_read.append(path)
        return _load(path, preset_name, resolution)

    plan_obj = load_plan_or_script(script, preset=preset, loader=loader)
    if resolution and not scripts_read:  # the file was a plan: its size is fixed
        from daotai.errors import PlanError

        raise PlanError(f"--resolution: {resolution!r} cannot resize an existing plan; plan the script again "
                        "with --resolution")
    from daotai.encode.hardware import check_mode
    from daotai.retakes import TakePolicy, parse_budget

    retakes = TakePolicy(takes, parse_budget(take_budget), tuple(c.strip() for c in retake_on.split(",") if c.strip()),
                         keep_takes)
    if takes > 1 and cluster:
        from daotai.errors import OptionError

        raise OptionError.at("--takes", takes, "retakes run on this machine only; leave out --cluster to use them")
    settings = PipelineSettings(
        backend=backend,
        codec=codec,
        encoder=check_mode(encoder),
        size_preset=preset.strip().lower() if preset else None,
        controls=controls,
        usd_cameras=usd_cameras,
        shots=tuple(s.strip() for s in shots.split(",") if s.strip()) if shots else (),
        strict=strict,
        **({"enhance": _enhance_spec(enhance_spec)} if enhance_spec else {}),
        options=_backend_options(backend_opts, model=model, device=device, steps=steps, speed=_speed_mode(speed),
                                 adaptive=adaptive or None, gpus=gpus, carry_looks=carry_looks or None),
        cluster=_cluster_address(cluster),
        cache=_cache_folder(cache_dir, no_cache),
        cache_bytes=int(cache_gb * 1024**3),
        force=force,
        retakes=retakes,
        boards=_boards_format(boards, "--boards"),
    )
    resolved_options(settings)  # a wrong option is refused before the progress bar starts
    try:  # so is a model that is not downloaded, before the estimate and any warning
        require_models(settings)
    except BackendError as exc:
        if not dry_run:
            raise
        err.print(f"[yellow]warning[/yellow] {escape(str(exc))}")  # a dry run still says what the render would take
    if dry_run or not settings.cluster:  # a cluster's machines are not this one: no estimate there
        _announce_cost(plan_obj, settings, output, dry_run, None if str(script) == STDIN else script)
        if dry_run:
            return
    try:
        # a script read from stdin has no file: its sound and images are found from here (as _load checked them)
        source = None if str(script) == STDIN else script
        result = run_with_progress(plan_obj, output, settings, source=source, console=err)
    except BaseException as exc:
        interrupted = isinstance(exc, KeyboardInterrupt)
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
    out.print(f"[green]done[/green] {result.sequence} ({result.summary})")
    if open_when_done:
        problem = open_with_system(Path(result.sequence))
        if problem:
            err.print(f"[yellow]note[/yellow] {escape(problem)}")
    if strict and not result.qc_ok:
        from daotai.errors import QualityError

        raise QualityError(f"quality checks failed: see {result.qc_path}")


def _boards_format(value: Optional[str], option: str) -> Optional[str]:
    """``pdf`` or ``png`` from an option's value (any case); OptionError (exit 2) names any other."""
    if value is None:
        return None
    from daotai.deliver.boards import FORMATS
    from daotai.errors import OptionError

    chosen = value.strip().lower()
    if chosen not in FORMATS:
        raise OptionError.at(option, value, f"must be one of {', '.join(FORMATS)}")
    return chosen


@app.command()
def boards(
    folder: Path = typer.Argument(..., help="a render output folder (with plan.json and shots/)"),
    fmt: str = typer.Option("pdf", "--format", help="pdf (boards.pdf) | png (boards/page_01.png …)"),
    per_page: int = typer.Option(6, "--per-page", help="shots a page: 4, 6, 8, 9 or 12"),
) -> None:
    """Write storyboard pages of a finished render into its folder: each shot's middle frame with its
    framing, move, duration, action, dialogue and transition, as the web console prints them."""
    from daotai.deliver.boards import PER_PAGE_CHOICES, middle_frames, write_boards
    from daotai.errors import DaotaiError, OptionError
    from daotai.plan.layout import RenderLayout
    from daotai.plan.planner import plan_from_json

    chosen = _boards_format(fmt, "--format")
    if per_page not in PER_PAGE_CHOICES:
        raise OptionError.at("--per-page", per_page, f"must be one of {', '.join(map(str, PER_PAGE_CHOICES))}")
    layout = RenderLayout.find(folder)
    if not layout.plan.is_file():
        raise DaotaiError(f"{folder}: has no plan.json; is it a daotai render folder?")
    plan_obj = plan_from_json(layout.plan.read_text(encoding="utf-8"))
    for path in write_boards(plan_obj, middle_frames(plan_obj, layout), layout, chosen, per_page):
        out.print(f"wrote {path}")


@app.command()
def qc(
    folder: Path = typer.Argument(..., help="a render output folder (with plan.json)"),
    strict: bool = typer.Option(False, "--strict", help="exit non-zero when any check fails"),
) -> None:
    """Re-run the quality checks on a render folder and rewrite qc.json."""
    from daotai.recheck import check_folder

    report = check_folder(folder, console=err)
    out.print(report.summary_text())
    if strict and not report.ok:
        from daotai.errors import QualityError

        raise QualityError(f"quality checks failed: see {folder / 'qc.json'}")


def _announce_cost(plan_obj, settings, output: Path, dry_run: bool, source: Optional[Path] = None) -> None:
    """Before rendering: with --dry-run the plan and its estimated time (nothing is written); otherwise a
    warning when the render would run longer than LONG_RENDER_S here. Small previz plans are not timed."""
    from daotai.estimate import estimate_render
    from daotai.pipeline import reusable_shots
    from daotai.plan.planner import select_shots
    from daotai.render.cost import LONG_RENDER_S, format_duration

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


@app.command()
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


@app.command()
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


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="address to bind; beyond loopback a token is required"),
    port: int = typer.Option(8000, "--port", help="TCP port"),
    data_dir: Path = typer.Option(Path("daotai-data"), "--data-dir", help="job store and outputs"),
    token: Optional[str] = typer.Option(None, "--token", envvar="DAOTAI_TOKEN", help="bearer token every request must carry"),
    concurrency: int = typer.Option(1, "--concurrency", min=1, max=64, help="jobs rendered at once"),
    queue_limit: int = typer.Option(100, "--queue-limit", min=1, help="queued jobs before new ones get 429"),
    cluster: Optional[str] = typer.Option(
        None, "--cluster", help="render jobs on Ray: auto (running cluster) | ray://host:port | local"
    ),
    speed: Optional[str] = typer.Option(
        None, "--speed", help="neural backends, every job: exact (default) | fast (approximate, faster) | off"
    ),
    warm: Optional[list[str]] = typer.Option(
        None, "--warm", help="a backend to load before the first request, written BACKEND, BACKEND:MODEL or "
        "BACKEND:MODEL@WxH (repeatable, one per --concurrency slot): a short render at WxH (default 1280x720) "
        "loads and compiles what jobs use, e.g. "
        "--warm previz or --warm wan:wan2.1-t2v-1.3b@832x480; GET /health says when it is ready"
    ),
    cache_gb: float = typer.Option(20.0, "--cache-size", min=0.0, help="the data folder's shot cache cap in GB "
                                   "(least recently used shots go first; never more than a quarter of its disk)"),
) -> None:
    """Run the local video service (OpenAI Videos API shape + native script jobs).

    A job the data folder's disk has no room for is refused (HTTP 507, code disk_full), as is
    one that fills it while rendering (the job fails as disk_full, nothing half-written)."""
    from daotai.errors import DependencyMissing

    try:
        import uvicorn
    except ImportError:
        raise DependencyMissing("uvicorn", "server", "daotai serve") from None
    from daotai.server.app import create_app
    from daotai.server.worker import parse_warm

    for spec in warm or ():
        parse_warm(spec)  # an unknown backend or a model it cannot take is refused before serving
    api = create_app(data_dir, token, host=host, concurrency=concurrency, queue_limit=queue_limit,
                     cluster=_cluster_address(cluster), speed=_speed_mode(speed), warm=tuple(warm or ()),
                     cache_bytes=int(cache_gb * 1024**3))
    err.print(f"serving on http://{host}:{port} (data in {data_dir})")
    uvicorn.run(api, host=host, port=port, log_level="warning")


@app.command()
def backends(as_json: bool = typer.Option(False, "--json", help="print JSON instead of text")) -> None:
    """Every render backend (built-in and installed), what it needs and the options -O accepts."""
    from daotai.render.registry import specs

    rows = []
    for spec in specs().values():
        fields = spec.options.model_fields
        options = {name: {"type": str(field.annotation).replace("typing.", ""),
                          "default": field.default, "help": field.description or ""}
                   for name, field in sorted(fields.items())}
        rows.append({"name": spec.name, "summary": spec.summary, "family": spec.family, "controls": spec.controls,
                     "sound": spec.sound, "device_class": spec.device_class, "default_model": spec.default_model,
                     "options": options})
    from daotai.plugins import plugins_enabled, skipped

    for problem in skipped():  # on stderr, so --json stays the list it always was
        err.print(escape(f"warning: {problem}"), highlight=False)
    if not plugins_enabled():
        err.print("plugins are off (DAOTAI_NO_PLUGINS): built-in backends only", highlight=False)
    if as_json:
        out.print_json(json.dumps(rows, default=str))
        return
    for row in rows:
        out.print(f"[bold]{row['name']}[/bold]  {row['summary']}")
        facts = [f"device: {row['device_class']}", f"controls: {'yes' if row['controls'] else 'no'}",
                 f"sound: {'yes' if row['sound'] else 'no'}"]
        if row["default_model"]:
            facts.append(f"default model: {row['default_model']}")
        out.print("  " + ", ".join(facts))
        for name, info in row["options"].items():
            out.print(f"  -O {name}=…  {info['help']} (default {info['default']!r})", highlight=False)


@app.command()
def doctor(
    check: bool = typer.Option(
        False, "--check", help="also measure this machine (previz of every example with QC, MLX parity against "
        "torch, timed wan-mlx renders with peak memory, hardware encoder speed and PSNR) into a report to send "
        "back (docs/mlx.md)"
    ),
    quick: bool = typer.Option(False, "--quick", help="with --check: about a minute (one example shot, tiny models)"),
    report: Path = typer.Option(Path("mac-check"), "--report", help="with --check: the report folder"),
    model: Optional[str] = typer.Option(
        None, "--model", help="with --check: a Wan model to time besides the tiny one (default: wan2.1-t2v-1.3b "
        "when it has been pulled)"
    ),
    h3_model: Optional[str] = typer.Option(
        None, "--h3-model", help="with --check: a MiniMax-H3 folder (converted or not) to time with h3-mlx (default: "
        "minimax-h3 when it has been pulled)"
    ),
) -> None:
    """What this machine can do: OS, CPU, memory, GPU, libraries, encoders, what fits."""
    if not check:
        from daotai.errors import Issue, OptionError

        given = [Issue(flag, value, "applies only with --check") for flag, value in
                 (("--quick", quick or None), ("--model", model), ("--h3-model", h3_model)) if value is not None]
        if given:
            raise OptionError(given)
        from daotai.doctor import collect, render_table

        out.print(render_table(collect()))
        return
    from daotai.maccheck import CheckConfig, lines_of, run_check

    found = run_check(CheckConfig(report, quick=quick, model=model, h3_model=h3_model,
                                  say=lambda line: err.print(escape(line))))
    for line in lines_of(found):
        out.print(escape(line))
    out.print(f"report: {report / 'mac-check.md'} (readable) and {report / 'mac-check.json'} (to send back)")


from daotai.draft import commands as draft_commands  # noqa: E402  (light: no network, no httpx at import)

app.command(name="draft")(draft_commands.draft)
app.command(name="prompts")(draft_commands.prompts)


models_app = typer.Typer(help="Video models: list, pull, update, verify, path, rm, convert.", no_args_is_help=True)
app.add_typer(models_app, name="models")


@models_app.command("list")
def models_list() -> None:
    """Known models, their hub repos and whether they are downloaded (size on disk, upstream commit)."""
    from daotai import catalog
    from daotai.runtime.models import pulled_model

    for spec in catalog.models().values():
        pulled = pulled_model(spec)
        state = "not downloaded" if pulled is None else (
            f"[green]downloaded[/green] {pulled.bytes / 1e9:.1f} GB on disk, commit "
            f"{(pulled.commit or 'unknown')[:12]} {pulled.path}")
        out.print(f"{spec.name:28} {spec.family:9} {spec.repo_id}@{spec.revision or 'main'} ~{spec.size_gb:g} GB  "
                  f"{spec.licence}  {state}")


@models_app.command("pull")
def models_pull(
    name: str = typer.Argument(..., help="registry name (see: daotai models list)"),
    workflow: str = typer.Option(None, "--workflow", help="only the components one workflow loads (minimax-h3: "
                                                          "t2va, fl2va or ref2va)"),
    accept_licence: bool = typer.Option(False, "--accept-licence", help="accept the model's licence (shown when "
                                                                        "refused); recorded once"),
) -> None:
    """Download a model (resumable), check every file's sha256 against the hub and record a manifest."""
    from daotai.runtime.models import pull

    out.print(f"[green]pulled[/green] {name} → {pull(name, workflow=workflow, accept_licence=accept_licence)}")


@models_app.command("update")
def models_update(
    name: str = typer.Argument(..., help="registry name of a pulled model"),
    prune: bool = typer.Option(False, "--prune", help="delete the previous snapshot once the new one is verified"),
) -> None:
    """Fetch the newest upstream commit of a pulled model, verify it and use it from now on."""
    from daotai.runtime.models import update

    result = update(name, prune=prune)
    if result.before == result.after:
        out.print(f"[green]up to date[/green] {name} at commit {result.after[:12]}")
        return
    kept = f"; {result.freed / 1e9:.1f} GB of the previous snapshot freed" if result.freed else (
        f"; the previous commit {(result.before or '?')[:12]} stays in the cache (--prune removes it)")
    out.print(f"[green]updated[/green] {name}: commit {(result.before or '?')[:12]} → {result.after[:12]}, "
              f"verified → {result.path}{kept}")


@models_app.command("verify")
def models_verify(
    model: str = typer.Argument(..., help="registry name or diffusers folder"),
    record: bool = typer.Option(False, "--record", help="hash the files now and record them as the manifest"),
) -> None:
    """Check a model's files: formats, safetensors headers and every sha256 against its manifest."""
    from daotai.runtime.models import check_manifest, check_model_folder, resolve_model, write_folder_manifest

    resolved = resolve_model(model)
    if record:
        write_folder_manifest(resolved.path)
    check_model_folder(resolved.path)
    count = check_manifest(resolved.path, full=True)
    out.print(f"[green]ok[/green] {resolved.path}: {count} files match the manifest")


@models_app.command("path")
def models_path(model: str = typer.Argument(..., help="registry name or diffusers folder")) -> None:
    """Print the folder a model loads from."""
    from daotai.runtime.models import resolve_model

    sys.stdout.write(f"{resolve_model(model).path}\n")


@models_app.command("rm")
def models_rm(name: str = typer.Argument(..., help="registry name")) -> None:
    """Delete a downloaded model from the cache."""
    from daotai.runtime.models import remove

    freed = remove(name)
    out.print(f"removed {name} ({freed / 1e9:.1f} GB freed)" if freed else f"{name} was not downloaded")


@models_app.command("convert")
def models_convert(
    model: str = typer.Argument(..., help="registry name or diffusers Wan / MiniMax-H3 folder"),
    to: str = typer.Option("mlx", "--to", help="target runtime (only: mlx)"),
    bits: int = typer.Option(4, "--bits", help="transformer weight bits: 4 | 8"),
    group_size: int = typer.Option(64, "--group-size", help="weights sharing one scale: 32 | 64 | 128"),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="new folder (default: <model>-mlx-<bits>bit-g<group>)"),
) -> None:
    """Convert a Wan or MiniMax-H3 model for wan-mlx / h3-mlx (quantised transformer + manifest of hashes)."""
    from daotai.errors import BackendError

    if to != "mlx":
        raise BackendError(f"--to: {to!r} is not supported; the only target is 'mlx'")
    from daotai.mlx import require_mlx

    require_mlx("daotai models convert --to mlx")
    from daotai.mlx.convert import COPIED, convert
    from daotai.mlx.h3_convert import convert_h3, converted_bytes, is_h3_folder
    from daotai.mlx.quantize import QuantSpec
    from daotai.render.wan_mlx import _resolve
    from daotai.runtime.models import check_free_space, convert_bytes

    source = _resolve(model)
    dest = output or Path(f"{source.name}-mlx-{bits}bit-g{group_size}")
    QuantSpec(bits, group_size)  # a bad --bits / --group-size is named before the space is estimated
    if is_h3_folder(source):  # MiniMax-H3: both transformer partitions, the rest read from the source folder
        check_free_space(dest, converted_bytes(source, bits, group_size), f"models convert {model}")
        out.print(f"[green]converted[/green] {source} → {convert_h3(source, dest, bits, group_size)}")
        return
    check_free_space(dest, convert_bytes(source, bits, group_size, COPIED), f"models convert {model}")
    out.print(f"[green]converted[/green] {source} → {convert(source, dest, bits, group_size)}")


def _print_notes(exc: BaseException) -> None:
    """What a stopped command added to its error: what it finished, where, how to resume."""
    for note in getattr(exc, "__notes__", None) or ():
        err.print(f"  {escape(note)}")


def main() -> None:
    """Entry point: run the app and turn errors into messages and exit codes."""
    try:
        # Without standalone mode click returns an Exit's code instead of raising it.
        code = app(standalone_mode=False)
        if code == 130:  # typer turns Ctrl-C in any command into a silent exit 130
            err.print("[yellow]cancelled[/yellow] interrupted; no partial files were left at output paths")
        if isinstance(code, int) and code:
            sys.exit(code)
    except Cancelled as exc:
        err.print(f"[yellow]cancelled[/yellow] {escape(str(exc))}")
        _print_notes(exc)
        sys.exit(exc.exit_code)
    except DaotaiError as exc:  # every class of the tree carries its exit code (see daotai.errors)
        err.print(f"[red]error[/red] {escape(str(exc))}")
        _print_notes(exc)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        err.print("[yellow]cancelled[/yellow]")
        sys.exit(130)
    except KeyboardInterrupt as exc:
        err.print("[yellow]cancelled[/yellow] interrupted; no partial files were left at output paths")
        _print_notes(exc)
        sys.exit(130)
    except Exception as exc:  # the last line of defence: never a traceback for users
        # Usage errors from the command-line parser (click's ClickException, which typer may
        # vendor under another module) know how to print themselves.
        show, code = getattr(exc, "show", None), getattr(exc, "exit_code", None)
        if callable(show) and isinstance(code, int):
            show()
            sys.exit(code)
        if os.environ.get("DAOTAI_DEBUG"):
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        err.print(
            f"[red]internal error[/red] {type(exc).__name__}: {escape(first)} — this is a bug in daotai; "
            "rerun with DAOTAI_DEBUG=1 for details"
        )
        _print_notes(exc)
        sys.exit(INTERNAL_ERROR_EXIT)
    finally:
        _forget_handled_interrupt()


def _forget_handled_interrupt() -> None:
    """Keep a Ctrl-C that was handled here from killing the process at exit.

    CPython marks a KeyboardInterrupt as unhandled whenever one leaves code run from a string
    (exec/eval: namedtuple and dataclass build their methods that way, so any class made by
    an import during the run), even when a caller catches it; at exit the interpreter then
    kills itself with SIGINT (status -2) instead of exiting with main's code (130 with its
    message). Running a string to completion clears that mark."""
    exec("pass", {})  # noqa: S102 - a constant, run only to reset the interpreter's mark


if __name__ == "__main__":
    main()
