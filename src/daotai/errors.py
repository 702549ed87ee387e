"""The one exception tree of daotai. Front ends translate it into exit codes / HTTP codes.

::

    DaotaiError                      exit 1   anything daotai raises on purpose
    ├── ScriptError                  exit 2   the script breaks a rule (carries every Issue)
    ├── PlanError                    exit 3   a valid script that cannot be planned as asked
    ├── BackendError                 exit 4   a render backend failed or is unknown
    │   └── DependencyMissing        exit 5   an optional package is absent (names the pip command)
    ├── EncodeError                  exit 6   encoding / decoding / probing a video failed
    ├── QualityError                 exit 7   qc --strict found failures
    └── Cancelled                    exit 130 the user or a caller stopped the work

Every message is one line a user can act on: field, value and the rule.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Issue:
    """One broken rule: where (JSON path), what (the value) and which rule."""

    path: str
    value: object
    rule: str

    def __str__(self) -> str:
        where = self.path or "(script)"
        if self.value is _NO_VALUE:
            return f"{where}: {self.rule}"
        return f"{where}: {_short_repr(self.value)} {self.rule}"


class _NoValue:
    def __repr__(self) -> str:
        return "<no value>"


_NO_VALUE = _NoValue()
NO_VALUE: object = _NO_VALUE


def _short_repr(value: object, limit: int = 60) -> str:
    text = value if isinstance(value, str) and value == "" else None
    if text is not None:
        return '""'
    if isinstance(value, str):
        shown = value if len(value) <= limit else value[: limit - 1] + "…"
        return repr(shown)
    shown = repr(value)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


class DaotaiError(Exception):
    """Base of every error daotai raises on purpose."""

    exit_code = 1


class ScriptError(DaotaiError):
    """The script breaks one or more rules; ``issues`` lists all of them."""

    exit_code = 2

    def __init__(self, issues: list[Issue] | tuple[Issue, ...], source: str | None = None):
        self.issues = tuple(issues)
        self.source = source
        head = f"{source}: " if source else ""
        count = len(self.issues)
        summary = f"{head}{count} problem{'s' if count != 1 else ''} in the script"
        super().__init__(summary + "".join(f"\n  {issue}" for issue in self.issues))


class PlanError(DaotaiError):
    """A valid script that cannot be planned as asked."""

    exit_code = 3


class BackendError(DaotaiError):
    """A render backend failed, is unknown or cannot run here."""

    exit_code = 4


class DependencyMissing(BackendError):
    """An optional dependency is not installed; the message names the install command."""

    exit_code = 5

    def __init__(self, package: str, extra: str, purpose: str):
        self.package = package
        self.extra = extra
        super().__init__(
            f"{purpose} needs the '{package}' package, which is not installed; "
            f"install it with: pip install 'daotai[{extra}]'"
        )


class EncodeError(DaotaiError):
    """Encoding, decoding or probing a video failed."""

    exit_code = 6


class QualityError(DaotaiError):
    """Quality checks found failures (raised only in strict mode)."""

    exit_code = 7


class Cancelled(DaotaiError):
    """The work was stopped by the user or a caller before it finished."""

    exit_code = 130
