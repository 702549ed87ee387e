"""Print a pip constraints file that pins every dependency of daotai at its floor in pyproject.toml.

``python scripts/floors.py [EXTRA ...]`` pins the base dependencies and those of the named
extras, each ``name>=X`` becoming ``name==X``; what those depend on in turn is left to pip
(the newest it allows), as a user adding daotai to an older environment would get. A floor
that this install cannot honour is a floor that is not true: raise it.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

# name, optional [extras], the >= floor; markers after ';' are kept
_FLOOR = re.compile(r"^\s*([A-Za-z0-9_.-]+)(\[[^\]]*\])?\s*>=\s*([0-9][0-9A-Za-z.]*)\s*(?:,[^;]*)?(;.*)?$")


def floor_pins(requirements: list[str]) -> list[str]:
    """``name==floor`` (with its environment marker) for each requirement that states a ``>=`` floor."""
    pins = []
    for requirement in requirements:
        match = _FLOOR.match(requirement)
        if match:
            name, _extras, version, marker = match.groups()
            pins.append(f"{name}=={version}{(' ' + marker) if marker else ''}")
    return pins


def main(argv: list[str]) -> int:
    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    extras = project.get("optional-dependencies", {})
    for extra in argv:
        if extra not in extras:
            print(f"floors: no extra {extra!r} in pyproject.toml (extras: {', '.join(sorted(extras))})",
                  file=sys.stderr)
            return 2
        requirements += extras[extra]
    seen: set[str] = set()
    for pin in floor_pins(requirements):
        name = pin.split("==")[0].lower()
        if name not in seen:  # an extra may repeat a base requirement (httpx, torch)
            seen.add(name)
            print(pin)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
