"""Licences that must be accepted before a model is pulled or run, and where acceptances are kept.

Models whose licence must be accepted (``ModelRow.licence_gated``) are pulled and run only
after an explicit acceptance, recorded in ``licences.json`` under the user's config folder.
That folder (:func:`config_dir`) is defined here, the lowest of the model modules that writes
into it; the record of pulled models (:mod:`daotai.runtime.model_lookup`) is kept there too.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from daotai.catalog import ModelRow
from daotai.errors import BackendError, Issue, OptionError
from daotai.files import atomic_write_text

LICENCES_NAME = "licences.json"


def config_dir() -> Path:
    """daotai's folder for the user's settings: $DAOTAI_CONFIG_DIR, else $XDG_CONFIG_HOME/daotai, else ~/.config/daotai."""
    explicit = os.environ.get("DAOTAI_CONFIG_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "daotai"


def licence_record_path() -> Path:
    """Where accepted licences are recorded."""
    return config_dir() / LICENCES_NAME


def _read_records() -> dict[str, Any]:
    path = licence_record_path()
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        raise BackendError(f"{path}: unreadable; delete it and accept the licences again") from None
    return data if isinstance(data, dict) else {}


def licence_acceptance(row: ModelRow) -> dict[str, Any] | None:
    """The recorded acceptance of ``row``'s licence (for this licence name), or None."""
    record = _read_records().get(row.name)
    if isinstance(record, dict) and record.get("licence") == row.licence:
        return record
    return None


def record_licence_acceptance(row: ModelRow, how: str) -> dict[str, Any]:
    """Record that the user accepted ``row``'s licence (``how``: the option or flag that said so)."""
    from datetime import datetime, timezone

    records = _read_records()
    record = {"licence": row.licence, "url": row.licence_url, "summary": list(row.licence_summary), "how": how,
              "accepted_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    records[row.name] = record
    path = licence_record_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(records, indent=1, sort_keys=True) + "\n")
    return record


def licence_files(folder: Path | None) -> list[Path]:
    """The licence files a model folder carries (LICENSE*, LICENCE*), if any."""
    if folder is None or not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_file() and p.name.upper().startswith(("LICENSE", "LICENCE")))


def licence_text(row: ModelRow, folder: Path | None = None) -> str:
    """One line a user can act on: the licence, its points, where the full text is."""
    where = ", ".join(str(p) for p in licence_files(folder)) or f"the licence file of {row.licence_url or row.repo_id}"
    return (f"{row.name} is under the {row.licence}: " + "; ".join(row.licence_summary)
            + f" (a summary, not legal advice: the full text in {where} governs)")


def require_licence(row: ModelRow, accepted: bool, *, option: str, how: str, folder: Path | None = None
                    ) -> tuple[dict[str, Any], bool] | None:
    """Check that ``row``'s licence was accepted (now through ``option``, or recorded before).

    Returns None when the model needs no acceptance, else (record, recorded_now). Refuses with an
    OptionError at ``option`` that shows the licence summary and how to accept it.
    """
    if not row.licence_gated:
        return None
    record = licence_acceptance(row)
    if record is not None:
        return record, False
    if accepted:
        return record_licence_acceptance(row, how), True
    raise OptionError([Issue(option, False, f"must be true to use {licence_text(row, folder)}; accept it with {how} "
                                            f"(recorded in {licence_record_path()})")])
