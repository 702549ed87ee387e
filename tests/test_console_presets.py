"""Named presets saved on the server (backend, options, size) and offered by the console: the
HTTP routes, then headless Chromium against a real `daotai serve`."""

from __future__ import annotations

import json
import shutil

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from daotai.server.app import create_app  # noqa: E402
from daotai.server.testing import ServerProcess, thread_server  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def test_presets_are_saved_checked_listed_and_removed(tmp_path):
    with thread_server(create_app(tmp_path / "data", start_dispatcher=False)) as url:
        saved = httpx.put(f"{url}/v1/presets/wan-draft", json={
            "backend": "wan", "options": {"steps": 20, "speed": "fast"}, "size": "preview",
            "description": "quick looks"})
        assert saved.status_code == 200, saved.text
        assert saved.json()["options"] == {"steps": 20, "speed": "fast"}
        httpx.put(f"{url}/v1/presets/flat", json={"backend": "previz", "options": {"labels": False}})
        listed = httpx.get(f"{url}/v1/presets").json()["data"]
        assert [p["name"] for p in listed] == ["flat", "wan-draft"]
        assert httpx.get(f"{url}/v1/presets/flat").json()["backend"] == "previz"
        # checked as a job's backend and options are: 422 naming the field
        wrong = httpx.put(f"{url}/v1/presets/bad", json={"backend": "previz", "options": {"steps": 20}})
        assert wrong.status_code == 422 and "steps" in wrong.text
        assert httpx.put(f"{url}/v1/presets/bad", json={"size": "huge"}).status_code == 422
        assert httpx.put(f"{url}/v1/presets/bad", json={"colour": 1}).status_code == 422
        assert httpx.put(f"{url}/v1/presets/Bad Name", json={}).status_code == 422
        assert httpx.delete(f"{url}/v1/presets/flat").json()["deleted"] is True
        assert httpx.get(f"{url}/v1/presets/flat").status_code == 404
        assert [p["name"] for p in httpx.get(f"{url}/v1/presets").json()["data"]] == ["wan-draft"]


@pytest.fixture()
def live(tmp_path):
    server = ServerProcess(tmp_path / "serve").start()
    yield server
    server.stop()


@pytest.fixture()
def page(tmp_path, live):
    from playwright.sync_api import sync_playwright

    if shutil.which(CHROMIUM) is None:
        pytest.fail(f"{CHROMIUM} is missing: run scripts/setup.sh as root (apt-get install chromium)")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS,
            viewport={"width": 1280, "height": 800})
        context.set_default_timeout(20_000)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        yield page
        context.close()
    assert not errors, errors


def test_the_console_offers_saved_presets_and_renders_with_their_options(page, live):
    httpx.put(f"{live.url}/v1/presets/no-labels", json={"backend": "previz", "options": {"labels": False},
                                                         "description": "figures without name labels"})
    page.goto(f"{live.url}/")
    page.wait_for_selector("body[data-ready=true]")
    page.select_option("#example-select", "quick")
    page.click("#load-example")
    page.wait_for_selector("#validation-status[data-state=ok]")
    page.select_option("#preset-select", "preview")
    page.select_option("#saved-select", "no-labels")
    assert page.input_value("#backend-select") == "previz" and page.input_value("#preset-select") == ""
    page.wait_for_selector("#render-plan .plan-shot")
    page.click("#submit-btn")
    job = page.locator(".job").first
    page.wait_for_function("(j) => ['completed', 'failed'].includes(j.querySelector('.job-status').dataset.status)",
                           arg=job.element_handle(), timeout=120_000)
    job_id = job.get_attribute("data-job")
    manifest = httpx.get(f"{live.url}/v1/jobs/{job_id}/files/manifest").json()
    assert manifest["settings"]["options"]["labels"] is False  # the saved options went with the job
    # The current settings saved under a new name from the console.
    page.fill("#saved-name", "quick-look")
    page.click("#save-preset-btn")
    page.wait_for_function("() => document.querySelector('#saved-select').value === 'quick-look'")
    saved = httpx.get(f"{live.url}/v1/presets/quick-look").json()
    assert saved["backend"] == "previz" and saved["options"] == {"labels": False}
    page.fill("#saved-name", "No Spaces")
    page.click("#save-preset-btn")
    assert "lower-case" in page.inner_text("#submit-error")
    assert json.loads(json.dumps(httpx.get(f"{live.url}/v1/presets").json()))["data"][0]["name"] == "no-labels"
