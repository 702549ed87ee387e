"""The machine and its services: ``daotai serve`` (the local video service), ``daotai backends`` and
``daotai doctor``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from daotai.cli.common import cluster_address, err, out, speed_mode


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
                     cluster=cluster_address(cluster), speed=speed_mode(speed), warm=tuple(warm or ()),
                     cache_bytes=int(cache_gb * 1024**3))
    err.print(f"serving on http://{host}:{port} (data in {data_dir})")
    uvicorn.run(api, host=host, port=port, log_level="warning")


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
