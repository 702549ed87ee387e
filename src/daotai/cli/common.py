"""What the command groups share: the two consoles, reading the script argument, and the option
checks that run before any work starts (each bad value an OptionError, exit 2)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

from rich.console import Console

from daotai.errors import ScriptError

# Results go to stdout (so they can be piped); progress, notes and warnings to stderr.
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

STDIN = "-"  # a script argument of '-' reads the script from standard input


def read_script(script_path: Path, preset: Optional[str] = None, resolution: Optional[str] = None):
    """The script a command was given (a file, or stdin for ``-``), its reference files checked and
    ``--preset`` or ``--resolution`` applied (OptionError when both are given)."""
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


RESOLUTION_HELP = "frame size for this run: 4K, 2160p, 1080p, 1920x1080 … (overrides the script's size)"


def speed_mode(value: Optional[str]) -> Optional[str]:
    """Check ``--speed`` before anything loads (OptionError, exit 2); None keeps the backend's default."""
    if value is None:
        return None
    from daotai.render.speed import parse_speed

    return parse_speed(value)


def cluster_address(value: Optional[str]) -> Optional[str]:
    """The --cluster address, checked before rendering starts (None: render here)."""
    if value is None:
        return None
    from daotai.cluster.runner import check_address

    return check_address(value)


def boards_format(value: Optional[str], option: str) -> Optional[str]:
    """``pdf`` or ``png`` from an option's value (any case); OptionError (exit 2) names any other."""
    if value is None:
        return None
    from daotai.deliver.boards import FORMATS
    from daotai.errors import OptionError

    chosen = value.strip().lower()
    if chosen not in FORMATS:
        raise OptionError.at(option, value, f"must be one of {', '.join(FORMATS)}")
    return chosen
