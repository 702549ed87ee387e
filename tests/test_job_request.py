"""Every endpoint that takes a job reads its request alike (daotai.server.job_request).

jobs, render-plan and sweeps: the same Content-Type rule, the same backend check (an unknown
backend is a 422 naming the closest names, not a 400 or a 500), the same options check.
"""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from daotai.errors import OptionError  # noqa: E402
from daotai.render.registry import check_backend, spec_for, unknown_backend  # noqa: E402
from daotai.server.app import create_app  # noqa: E402
from daotai.server.testing import thread_server  # noqa: E402

SCRIPT = {
    "size": "160x96", "fps": 24, "characters": [{"id": "hero"}],
    "shots": [{"shot_id": "a", "duration": 1, "subject": "hero"}],
}
# Each endpoint that takes a job, with the body fields of its own it needs besides the script.
ENDPOINTS = {"/v1/jobs": {}, "/v1/scripts/render-plan": {}, "/v1/sweeps": {"sweep": {"seed": [1, 2]}}}


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    """A live server in a thread whose dispatcher is off: jobs stay queued."""
    app = create_app(tmp_path_factory.mktemp("data"), start_dispatcher=False, queue_limit=50)
    with thread_server(app) as base:
        yield base


def test_unknown_backend_is_an_option_error_naming_the_nearest():
    with pytest.raises(OptionError) as typo:
        check_backend("wan_vace", "backend")
    message = str(typo.value)
    assert message.startswith("backend: 'wan_vace' is not a known backend; did you mean 'wan-vace'")
    assert "choose one of: " in message and "previz" in message
    assert typo.value.exit_code == 2 and typo.value.http_status == 422
    assert [i.path for i in typo.value.issues] == ["backend"]
    far = str(unknown_backend("zzzz"))
    assert far.startswith("--backend: 'zzzz' is not a known backend; choose one of:") and "did you mean" not in far
    with pytest.raises(OptionError, match="--backend: 'previs' .*did you mean 'previz'"):
        spec_for("previs")
    assert check_backend("previz").name == "previz"


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_every_job_endpoint_refuses_an_unknown_backend_with_a_422_naming_the_nearest(url, endpoint):
    reply = httpx.post(f"{url}{endpoint}", params={"backend": "prevз"}, json={**SCRIPT, **ENDPOINTS[endpoint]})
    assert reply.status_code == 422, reply.text
    error = reply.json()
    assert error["error"]["code"] == "invalid_option"
    assert "is not a known backend" in error["error"]["message"] and "'previz'" in error["error"]["message"]
    assert [i["path"] for i in error["issues"]] == ["backend"]


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_every_job_endpoint_takes_its_script_as_json_only(url, endpoint):
    import json

    body = json.dumps({**SCRIPT, **ENDPOINTS[endpoint]})
    refused = httpx.post(f"{url}{endpoint}", content=body.encode(),
                         headers={"content-type": "multipart/form-data; boundary=x"})
    assert refused.status_code == 415, refused.text
    assert "application/json" in refused.json()["error"]["message"]
    accepted = httpx.post(f"{url}{endpoint}", content=body.encode(), headers={"content-type": "application/json"})
    assert accepted.status_code in (200, 202), accepted.text


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_every_job_endpoint_checks_options_by_the_backend(url, endpoint):
    reply = httpx.post(f"{url}{endpoint}", json={**SCRIPT, **ENDPOINTS[endpoint], "options": {"stepz": 3}})
    assert reply.status_code == 422, reply.text
    assert [i["path"] for i in reply.json()["issues"]] == ["options.stepz"]
    wrong_type = httpx.post(f"{url}{endpoint}", json={**SCRIPT, **ENDPOINTS[endpoint], "options": [1]})
    assert wrong_type.status_code == 422 and wrong_type.json()["issues"][0]["path"] == "options"


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_every_job_endpoint_applies_the_same_preset_rule(url, endpoint):
    reply = httpx.post(f"{url}{endpoint}", params={"preset": "huge"}, json={**SCRIPT, **ENDPOINTS[endpoint]})
    assert reply.status_code == 422, reply.text
    assert reply.json()["issues"][0]["path"] == "--preset"
