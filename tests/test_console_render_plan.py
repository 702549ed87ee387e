"""Before Render, the service says which shots will render and which it will reuse from its shot
cache: over HTTP (the prediction is what the worker then does) and in the console, in headless
Chromium against a real `daotai serve`."""

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
SCRIPT = {
    "fps": 24, "size": "160x96", "seed": 5,
    "characters": [{"id": "ana", "colour": "#3366cc"}],
    "shots": [{"shot_id": f"s{i}", "duration": 0.5, "subject": "ana", "camera": move}
              for i, move in enumerate(["static", "pan_left", "push_in"])],
}


def changed() -> dict:
    script = json.loads(json.dumps(SCRIPT))
    script["shots"][1]["camera"] = "tilt_up"
    return script


def test_the_render_plan_predicts_what_the_worker_renders(tmp_path, monkeypatch):
    from daotai.server.worker import run_job

    monkeypatch.delenv("DAOTAI_NO_CACHE", raising=False)
    monkeypatch.chdir(tmp_path)  # run_job changes the current folder: restored after
    app = create_app(tmp_path / "data", start_dispatcher=False)
    store = app.state.store

    def plan(script: dict, **query) -> dict:
        with thread_server(app) as url:
            reply = httpx.post(f"{url}/v1/scripts/render-plan", json=script, params=query)
        assert reply.status_code == 200, reply.text
        return reply.json()

    def render(script: dict) -> list[str]:
        with thread_server(app) as url:
            assert httpx.post(f"{url}/v1/jobs", json=script).status_code == 202
        job = store.claim_next()
        assert run_job(store.data_dir, job.id, job.attempts) == 0
        manifest = json.loads((store.job_dir(job.id) / "out" / "manifest.json").read_text())
        return [s["shot_id"] for s in manifest["shots"] if s["render"] == "rendered"]

    first = plan(SCRIPT)
    assert first["valid"] and first["cache"] and first["rendered"] == ["s0", "s1", "s2"] and first["reused"] == []
    assert render(SCRIPT) == first["rendered"]
    assert plan(SCRIPT)["rendered"] == []  # nothing changed: every shot reused
    again = plan(changed())
    assert again["rendered"] == ["s1"] and again["reused"] == ["s0", "s2"]
    assert [s["render"] for s in again["shots"]] == ["reused", "rendered", "reused"]
    assert render(changed()) == again["rendered"]
    # What the key holds beyond the script: an option, the size a preset sets.
    assert plan({**changed(), "options": {"labels": False}})["rendered"] == ["s0", "s1", "s2"]
    assert plan(changed(), preset="preview")["rendered"] == ["s0", "s1", "s2"]
    # Refusals as POST /v1/jobs refuses them; queues nothing.
    with thread_server(app) as url:
        wrong = httpx.post(f"{url}/v1/scripts/render-plan", json={**SCRIPT, "options": {"stepz": 3}})
        assert wrong.status_code == 422 and "options.stepz" in wrong.text
        bad = {**SCRIPT, "shots": [{**SCRIPT["shots"][0], "duration": -1}]}
        invalid = httpx.post(f"{url}/v1/scripts/render-plan", json=bad).json()
        assert invalid["valid"] is False and invalid["issues"][0]["path"] == "shots[0].duration"
        assert httpx.post(f"{url}/v1/scripts/render-plan", json=SCRIPT, params={"backend": "nope"}).status_code == 422
    assert store.claim_next() is None
    assert not list(store.data_dir.glob(".render-plan-*"))  # its scratch folders are gone


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """A real `daotai serve` with its shot cache on (the test suite turns caches off by default)."""
    import os

    off = os.environ.pop("DAOTAI_NO_CACHE", None)
    try:
        server = ServerProcess(tmp_path_factory.mktemp("serve")).start()
    finally:
        if off is not None:
            os.environ["DAOTAI_NO_CACHE"] = off
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
        page.goto(f"{live.url}/")
        page.wait_for_selector("body[data-ready=true]")
        yield page
        context.close()
    assert not errors, errors


def test_the_console_shows_which_shots_will_render_before_render(page, tmp_path):
    page.select_option("#example-select", "quick")
    page.click("#load-example")
    page.wait_for_selector("#validation-status[data-state=ok]")
    page.select_option("#preset-select", "")
    page.wait_for_selector('#render-plan[data-rendered="s01,s02"]')
    assert "All 2 shots will render" in page.inner_text("#render-plan")
    page.click("#submit-btn")
    job = page.locator(".job").first
    page.wait_for_function("(j) => ['completed', 'failed'].includes(j.querySelector('.job-status').dataset.status)",
                           arg=job.element_handle(), timeout=120_000)
    assert job.locator(".job-status").get_attribute("data-status") == "completed"
    # Rendered once: the same script now renders nothing.
    page.wait_for_selector('#render-plan[data-rendered=""]')
    assert "Nothing changed" in page.inner_text("#render-plan")
    # One shot edited: that shot alone will render, and the list says so per shot.
    page.fill('[data-path="shots[1].duration"]', "1.5")
    page.wait_for_selector('#render-plan[data-rendered="s02"]')
    marks = page.locator("#render-plan .plan-shot").evaluate_all("items => items.map(li => li.dataset.render)")
    assert marks == ["reused", "rendered"]
    assert "1 of 2 shots will render" in page.inner_text("#render-plan")
    page.click("#lang-btn")  # and in Chinese
    page.wait_for_function("() => document.querySelector('#render-plan').innerText.includes('将渲染')")
