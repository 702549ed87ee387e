"""Property-based fuzzing of the service's own OpenAPI schema: no 5xx, no reply that breaks it."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from schemathesis.specs.openapi.checks import positive_data_acceptance  # noqa: E402

from daotai.server.app import create_app  # noqa: E402
from daotai.server.testing import thread_server  # noqa: E402

MAX_EXAMPLES = 40  # per operation: bounded so the whole file stays within seconds


@pytest.mark.slow
def test_every_operation_conforms_to_the_schema(tmp_path):
    # Dispatcher off: fuzzed submissions stay queued instead of rendering.
    app = create_app(tmp_path, start_dispatcher=False, queue_limit=100_000)
    with thread_server(app) as url:
        schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
        labels, calls = [], []
        for result in schema.get_all_operations():
            operation = result.ok()
            labels.append(operation.label)

            @given(case=operation.as_strategy())
            @settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None,
                      suppress_health_check=list(HealthCheck))
            def fuzz(case):
                # A JSON Schema cannot say "a decodable image" or "subject names a character of
                # this script": random uploads and scripts that break cross-reference rules are
                # rightly refused (400/422), so positive-acceptance is skipped for those bodies (a
                # plan refuses, with a 422 its schema lists, a script that cannot be planned: a
                # look_at with no subject to look, a crossfade into the first shot; a render plan
                # and a sweep take what a job takes; a preset's options, like a job's, are valid or
                # not by the backend named beside them).
                unknowable = (case.media_type == "multipart/form-data"
                              or case.operation.path in ("/v1/jobs", "/v1/plan", "/v1/scripts/render-plan",
                                                         "/v1/sweeps", "/v1/presets/{name}"))
                response = case.call_and_validate(
                    base_url=url, excluded_checks=[positive_data_acceptance] if unknowable else None
                )
                calls.append(response.status_code)

            fuzz()
        assert len(labels) >= 9, labels
        assert len(calls) >= 5 * len(labels) and all(code < 500 for code in calls)
        import httpx

        assert httpx.get(f"{url}/health").status_code == 200
