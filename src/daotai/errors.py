"""The one exception tree of daotai. Front ends translate it into exit codes / HTTP codes.

::

    DaotaiError                exit 1    HTTP 500  anything daotai raises on purpose
    ├── ScriptError            exit 2    HTTP 422  the script breaks a rule (carries every Issue)
    ├── OptionError            exit 2    HTTP 422  a backend or command option is unknown, ill-typed
    │                                              or out of range, or a backend name is unknown
    │                                              (carries every Issue)
    ├── PlanError              exit 2    HTTP 422  a valid script that cannot be planned as asked
    │                                              (carries every Issue of every shot that has a JSON path)
    ├── BackendError           exit 4    HTTP 500  a render backend failed
    │   └── DependencyMissing  exit 5    HTTP 501  an optional package is absent (names the pip command)
    ├── EncodeError            exit 6    HTTP 500  encoding / decoding / probing a video failed
    ├── QualityError           exit 7    HTTP 500  qc --strict found failures
    ├── DiskFull               exit 8    HTTP 507  not enough free disk space for the work (says where,
    │                                              how much is free and how much the work needs)
    └── Cancelled              exit 130  HTTP 409  the user or a caller stopped the work

    anything else              exit 70   HTTP 500  a bug: the CLI prints one line and "this is a bug"

Each class carries its ``exit_code``, ``http_status`` and ``code`` (the machine-readable
name the server puts in ``error.code``); the CLI's ``main`` and the server's one exception
handler read those attributes (this drawing mirrors them; a test keeps the two in step).
Usage errors of the command-line parser itself (a missing argument, an option that is not
an int) also exit 2. Errors that carry ``issues`` (script,
option, plan) are answered with every issue's JSON path: the CLI prints one per line, the
server sends them as ``issues: [{path, value, rule}]``. The server's own request checks
(unknown ids 404, queue full 429, …) live in ``daotai.server.store``.

A programming error inside daotai (a broken invariant, a wrong argument type passed by our
own code) is a ``ValueError``/``TypeError``, not a DaotaiError: it is a bug, not something
the user can act on.

Every message is one line a user can act on: field, value and the rule.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from typing import Any, Callable


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
    http_status = 500
    code = "daotai_error"


def _problems(issues: tuple[Issue, ...], what: str, head: str = "") -> str:
    """'<head>N problems in <what>' followed by one indented line per issue."""
    count = len(issues)
    summary = f"{head}{count} problem{'s' if count != 1 else ''} in {what}"
    return summary + "".join(f"\n  {issue}" for issue in issues)


class ScriptError(DaotaiError):
    """The script breaks one or more rules; ``issues`` lists all of them."""

    exit_code = 2
    http_status = 422
    code = "invalid_script"

    def __init__(self, issues: list[Issue] | tuple[Issue, ...], source: str | None = None):
        self.issues = tuple(issues)
        self.source = source
        super().__init__(_problems(self.issues, "the script", f"{source}: " if source else ""))


class OptionError(DaotaiError):
    """A backend or command option is unknown, ill-typed or out of range; ``issues`` lists all of them.

    An issue's path names the option as the user wrote it: ``options.steps`` for a field of
    an options object, ``--enhance`` or ``upscale`` for a command-line flag. ``valid`` lists
    the option names that would have been accepted (shown in the message when given).
    """

    exit_code = 2
    http_status = 422
    code = "invalid_option"

    def __init__(self, issues: list[Issue] | tuple[Issue, ...] | Issue, valid: tuple[str, ...] | list[str] = ()):
        self.issues = (issues,) if isinstance(issues, Issue) else tuple(issues)
        self.valid = tuple(valid)
        if len(self.issues) == 1:
            message = str(self.issues[0])
            tail = f"; valid options: {', '.join(self.valid)}" if self.valid else ""
        else:
            message = _problems(self.issues, "the options")
            tail = f"\n  valid options: {', '.join(self.valid)}" if self.valid else ""
        super().__init__(message + tail)

    @classmethod
    def at(cls, path: str, value: object, rule: str, valid: tuple[str, ...] | list[str] = ()) -> "OptionError":
        """One broken rule of one option (``value`` may be ``NO_VALUE`` when the rule says it all)."""
        return cls((Issue(path, value, rule),), valid)

    @classmethod
    def from_pydantic(cls, exc: Any, prefix: str, valid: tuple[str, ...] | list[str] = (),
                      unknown_rule: str | Callable[[str], str] = "is not a known option") -> "OptionError":
        """Every error of a ``pydantic.ValidationError`` as an Issue at ``prefix.field``.

        ``prefix`` names the options object as the user sees it (``options``, ``--enhance``);
        an unknown field (``extra="forbid"``) reads "is not a known option", or what
        ``unknown_rule`` answers for the unknown field's name (to name the nearest valid ones).
        """
        from pydantic import ValidationError  # only when options are validated: errors.py stays light

        if not isinstance(exc, ValidationError):
            raise TypeError(f"from_pydantic needs a pydantic.ValidationError, not {type(exc).__name__}")
        issues = []
        for error in exc.errors(include_url=False):
            where = _json_path(error.get("loc", ()))
            path = f"{prefix}.{where}" if prefix and where and not where.startswith("[") else f"{prefix}{where}"
            value = error.get("input", NO_VALUE)
            if error.get("type") == "extra_forbidden":
                rule = unknown_rule(where) if callable(unknown_rule) else unknown_rule
            elif error.get("type") == "missing":
                rule, value = "is required", NO_VALUE
            else:
                rule = _rule(str(error.get("msg", "is not valid")))
            issues.append(Issue(path or prefix, value, rule))
        return cls(issues, valid)


def _rule(message: str) -> str:
    """A pydantic message as the rule half of an Issue: 'Input should be > 0' → 'must be > 0'."""
    for prefix in ("Value error, ", "Assertion failed, "):
        if message.startswith(prefix):
            message = message[len(prefix):]
    if message.startswith("Input should be "):
        return "must be " + message[len("Input should be "):]
    return message[:1].lower() + message[1:]


def _json_path(loc: Any) -> str:
    """A pydantic error location as a JSON path: ('steps',) → 'steps', ('a', 0, 'b') → 'a[0].b'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


class PlanError(DaotaiError):
    """A valid script that cannot be planned as asked.

    ``issues`` holds the broken rules with their JSON paths when known (see ``at`` and ``of``):
    the planner tries every shot and reports all of them at once. ``path`` is the first issue's
    path, or None. Its exit code is the script's (2): either way the user edits the script, and
    ``daotai validate`` answers both kinds with the same code.
    """

    exit_code = 2
    http_status = 422
    code = "unplannable_script"

    def __init__(self, message: str, issues: list[Issue] | tuple[Issue, ...] = ()):
        self.issues = tuple(issues)
        super().__init__(message)

    @property
    def path(self) -> str | None:
        return self.issues[0].path if self.issues else None

    @classmethod
    def at(cls, path: str, value: object, rule: str) -> "PlanError":
        """A plan error at one JSON path of the script: message ``path: value rule``."""
        issue = Issue(path, value, rule)
        return cls(str(issue), (issue,))

    @classmethod
    def of(cls, issues: list[Issue] | tuple[Issue, ...]) -> "PlanError":
        """Every plan problem at once: one issue reads as ``at`` does, several as a count and one line each."""
        issues = tuple(issues)
        if not issues:
            raise ValueError("PlanError.of needs at least one issue")
        if len(issues) == 1:
            return cls(str(issues[0]), issues)
        return cls(_problems(issues, "the script (found while planning it)"), issues)


class BackendError(DaotaiError):
    """A render backend failed, is unknown or cannot run here."""

    exit_code = 4
    code = "backend_error"


class DependencyMissing(BackendError):
    """An optional dependency is not installed; the message names the install command."""

    exit_code = 5
    http_status = 501
    code = "dependency_missing"

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
    code = "encode_error"


class QualityError(DaotaiError):
    """Quality checks found failures (raised only in strict mode)."""

    exit_code = 7
    code = "quality_failed"


class Cancelled(DaotaiError):
    """The work was stopped by the user or a caller before it finished."""

    exit_code = 130
    http_status = 409
    code = "cancelled"


DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)  # no space left; the user's disk quota is spent


def size_text(count: int) -> str:
    """Bytes as people read them in ``df -h``: '812 KiB', '37.5 MiB', '1.2 GiB'."""
    value = float(count)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} {unit}" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


class DiskFull(DaotaiError):
    """Not enough free disk space for the work: refused before it starts (``needed`` is known and
    over ``free``), or the disk filled up while writing (``writing`` names the file).

    ``folder`` is where the space is missing, ``free`` the bytes free there when the error was
    raised, ``needed`` what the work needs there in all (an estimate; None when unknown) and
    ``what`` the work in words ("this render (3 shots, 288 frames at 1280x720 with controls)").
    """

    exit_code = 8
    http_status = 507
    code = "disk_full"

    def __init__(self, folder: str | os.PathLike[str], free: int, needed: int | None = None, what: str = "the work",
                 writing: str | None = None):
        self.folder = os.fspath(folder)
        self.free = int(free)
        self.needed = None if needed is None else int(needed)
        self.what = what
        self.writing = writing
        need = f"; {what} needs about {size_text(self.needed)}" if self.needed is not None else ""
        if writing is not None:
            head = (f"disk full: {self.folder} ran out of space while writing {writing} ({size_text(self.free)} "
                    f"free now{need}); nothing was left half-written")
        else:
            head = f"not enough disk space in {self.folder}: {size_text(self.free)} free{need}"
        super().__init__(f"{head}; free some space there (or choose a folder on another disk) and try again")


def disk_full_cause(exc: BaseException | None) -> OSError | None:
    """The OSError that says the disk (or the user's quota) is full somewhere in ``exc``'s chain
    (``exc`` itself, its cause or context); None when the error is something else."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS:
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def interrupted_inside(exc: BaseException) -> bool:
    """Whether ``exc`` stands for a Ctrl-C that landed inside a library which wrapped it: pydantic-core
    turns a KeyboardInterrupt raised in a serializer it calls into a PydanticSerializationError whose
    text names it, and keeps no link to it."""
    visited: set[int] = set()
    seen: BaseException | None = exc
    while seen is not None and id(seen) not in visited:  # a chain can loop back on itself
        visited.add(id(seen))
        if isinstance(seen, KeyboardInterrupt):
            return True
        if type(seen).__name__ == "PydanticSerializationError" and "KeyboardInterrupt" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
