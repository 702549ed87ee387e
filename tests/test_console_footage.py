"""The console's reference-footage field in headless Chromium against a real `daotai serve`: a clip uploaded from
a shot's "Reference footage" fold becomes its reference_video, plays back from the store and reaches the job."""

from __future__ import annotations

import hashlib
import shutil

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from builders import pan_frames, write_clip  # noqa: E402
from daotai.server.testing import ServerProcess  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    server = ServerProcess(tmp_path_factory.mktemp("serve")).start()
    yield server
    server.stop()


@pytest.fixture()
def page(tmp_path_factory, live):
    """A fresh headless Chromium profile driven by Playwright (never a downloaded browser)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("Playwright for Python is missing: run scripts/setup.sh (installs the dev extra)")
    if shutil.which(CHROMIUM) is None:
        pytest.fail(f"{CHROMIUM} is missing: run scripts/setup.sh as root (apt-get install chromium)")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM, headless=True,
            args=CHROMIUM_FLAGS, viewport={"width": 1280, "height": 800})
        context.set_default_timeout(20_000)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        page.goto(f"{live.url}/")
        page.wait_for_selector("body[data-ready=true]")
        page.evaluate("localStorage.clear()")
        yield page
        context.close()
        assert not errors, errors


def test_footage_uploaded_in_the_console_is_the_shots_reference_video(page, live, tmp_path):
    clip = write_clip(tmp_path / "rehearsal.mp4", pan_frames(48, 96, 64), 24)
    reference = "upload:vid_" + hashlib.sha256(clip.read_bytes()).hexdigest()[:32]
    page.select_option("#example-select", "quick")
    page.click("#load-example")
    page.wait_for_selector('[data-path="shots[1].shot_id"]')
    page.wait_for_selector("#validation-status[data-state=ok]")
    fold = page.locator('details.fold-footage[data-path="shots[0].reference_video"]')
    assert fold.count() == 1
    fold.locator("summary").click()
    page.set_input_files('details.fold-footage[data-path="shots[0].reference_video"] input.video-file', str(clip))
    page.wait_for_function("(ref) => document.querySelector('[data-path=\"shots[0].reference_video.path\"]')"
                           " && document.querySelector('[data-path=\"shots[0].reference_video.path\"]').value === ref",
                           arg=reference)
    preview = page.locator("video.footage-preview")
    preview.wait_for()
    page.wait_for_function("(v) => v.readyState >= 1 && v.videoWidth === 96", arg=preview.element_handle())
    page.fill('[data-path="shots[0].reference_video.start"]', "0.5")
    page.wait_for_selector("#validation-status[data-state=ok]")
    page.select_option("#backend-select", "previz")
    page.select_option("#preset-select", "")
    page.click("#submit-btn")
    job = page.locator(".job").first
    status = None
    for _ in range(600):  # bounded: at most about 120 s
        status = job.locator(".job-status").get_attribute("data-status")
        if status in ("completed", "failed", "cancelled"):
            break
        page.wait_for_timeout(200)
    assert status == "completed", job.inner_text()
    job_id = job.get_attribute("data-job")
    plan = httpx.get(f"{live.url}/v1/jobs/{job_id}/files/plan").json()
    sha = hashlib.sha256(clip.read_bytes()).hexdigest()
    assert plan["shots"][0]["reference_video"] == {"path": f"references/{sha}.mp4", "start_s": 0.5, "end_s": 1.5}
    manifest = httpx.get(f"{live.url}/v1/jobs/{job_id}/files/manifest").json()
    assert [(r["shot"], r["reference"], r["sha256"]) for r in manifest["references"]] == [
        (plan["shots"][0]["shot_id"], reference, sha)]
