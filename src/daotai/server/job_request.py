"""What every endpoint that takes a job reads from its request, read in one place.

``POST /v1/jobs``, ``POST /v1/scripts/render-plan`` and ``POST /v1/sweeps`` take the same
request: a JSON body holding a director's script, an optional ``options`` object for the
backend (and, for a sweep, its ``sweep`` object), with ``backend`` and ``preset`` in the query.
:func:`read_job_request` checks the Content-Type, the backend (an unknown name is an
OptionError, HTTP 422, naming the nearest backends), and the options against the backend's
Options type; :meth:`JobRequest.script` validates the script and its upload references and
applies the preset. The endpoints differ only in what they do with the result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request

from daotai.errors import OptionError, ScriptError
from daotai.server.references import reference_issues
from daotai.server.store import JobStore

JSON_TYPE = "application/json"


@dataclass(frozen=True)
class JobRequest:
    """A job's request with its backend and options checked; the script not yet validated."""

    backend: str
    preset: str | None
    options: dict[str, Any]  # validated by the backend's Options type, only the fields given
    body: dict[str, Any] | Any  # the script as sent, without ``options`` and the endpoint's own fields
    extra: dict[str, Any] = field(default_factory=dict)  # the endpoint's own fields (``sweep``), None if absent

    def validated(self, store: JobStore) -> Any:
        """The script, validated, its upload references checked (ScriptError with every issue)."""
        from daotai.script.load import validate_script

        script = validate_script(self.body, source="body")
        refs = reference_issues(script, store)
        if refs:
            raise ScriptError(refs, "body")
        return script

    def with_preset(self, script: Any) -> Any:
        """``script`` at the request's size preset (ScriptError naming ``--preset`` for an unknown one)."""
        from daotai.script.presets import apply_preset

        return script if self.preset is None else apply_preset(script, self.preset)

    async def script(self, store: JobStore) -> Any:
        """:meth:`validated` (off the event loop, references are read from disk), then :meth:`with_preset`."""
        return self.with_preset(await run_in_threadpool(self.validated, store))


async def read_job_request(request: Request, backend: str, preset: str | None,
                           extra: tuple[str, ...] = ()) -> JobRequest:
    """The checked request of an endpoint that takes a job; ``extra``: body fields of its own to set aside.

    415 for a body that is not JSON; OptionError (422) for an unknown backend (naming the closest
    names) or options the backend refuses; ScriptError (422) for a body that is not JSON at all."""
    from daotai.render.registry import check_backend
    from daotai.script.load import parse_document

    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != JSON_TYPE:
        raise HTTPException(415, f"Content-Type: {kind or 'none'!r}; a job's script is sent as {JSON_TYPE}")
    spec = check_backend(backend, "backend")
    data = parse_document(await request.body(), "json", source="body")
    fields = data if isinstance(data, dict) else {}
    raw_options = fields.pop("options", None)
    if raw_options is not None and not isinstance(raw_options, dict):
        raise OptionError.at("options", raw_options, "must be an object of backend options")
    own = {name: fields.pop(name, None) for name in extra}
    options = spec.validate_options(raw_options or {}).model_dump(exclude_unset=True)
    return JobRequest(backend, preset, options, data, own)


__all__ = ["JobRequest", "read_job_request"]
