"""The web console: its HTTP helpers, then real headless Chromium against a live `daotai serve`."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from daotai.server.app import create_app  # noqa: E402
from daotai.server.testing import ServerProcess, thread_server  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
# Flags for a sandboxed, offline machine: nothing phones home, no GPU, no QUIC.
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
QUICK_TOTAL_S = 2.0  # web/examples/quick.json: two 1 s shots at 24 fps
EXAMPLE_OFFICE = json.loads((Path(__file__).parent.parent / "examples" / "office.json").read_text())
# Floor-plan marks (.mark) sit on their canvas by design and may touch each other; they are left out.
CONTROLS = "input:not([type=file]), select, textarea, button:not(.mark), canvas, a, video"


# ------------------------------------------------------------------ HTTP only (fast)


@pytest.fixture()
def idle_url(tmp_path):
    """A server in a thread with its dispatcher off (nothing renders)."""
    with thread_server(create_app(tmp_path / "data", start_dispatcher=False)) as url:
        yield url


def test_console_is_served_from_the_package_with_security_headers(idle_url):
    root = httpx.get(f"{idle_url}/", follow_redirects=False)
    assert root.status_code == 307 and root.headers["location"] == "/console/"
    page = httpx.get(f"{idle_url}/console/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    csp = page.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert page.headers["x-content-type-options"] == "nosniff"
    for asset in ("app.js", "app.css", "examples/quick.json", "examples/office.json"):
        reply = httpx.get(f"{idle_url}/console/{asset}")
        assert reply.status_code == 200, asset
        assert "default-src 'self'" in reply.headers["content-security-policy"]
    # Nothing comes from elsewhere: no absolute URLs to other hosts in the page or its assets.
    for asset in ("", "app.js", "app.css"):
        text = httpx.get(f"{idle_url}/console/{asset}").text
        assert "http://" not in text and "https://" not in text and "//cdn" not in text, asset
    assert httpx.get(f"{idle_url}/health").headers["x-frame-options"] == "DENY"
    # The console's examples are the project's own, unchanged.
    for name in ("office", "street_zh", "all_moves", "minimal"):
        served = httpx.get(f"{idle_url}/console/examples/{name}.json").json()
        assert served == json.loads((Path(__file__).parent.parent / "examples" / f"{name}.json").read_text())


def test_validate_endpoint_reports_issues_by_json_path(idle_url):
    good = json.loads(httpx.get(f"{idle_url}/console/examples/quick.json").text)
    reply = httpx.post(f"{idle_url}/v1/scripts/validate", json=good)
    assert reply.status_code == 200 and reply.json() == {"valid": True, "issues": [], "total_seconds": QUICK_TOTAL_S}
    bad = json.loads(json.dumps(good))
    bad["shots"][1]["camera"]["fov"] = 500
    bad["shots"][0]["subject"] = "nobody"
    body = httpx.post(f"{idle_url}/v1/scripts/validate", json=bad).json()
    assert body["valid"] is False
    assert {i["path"] for i in body["issues"]} == {"shots[1].camera.fov", "shots[0].subject"}
    broken = httpx.post(f"{idle_url}/v1/scripts/validate", content=b"{not json",
                        headers={"content-type": "application/json"}).json()
    assert broken["valid"] is False and broken["issues"]
    # Cross-site writes are refused like every other POST.
    refused = httpx.post(f"{idle_url}/v1/scripts/validate", json=good, headers={"Sec-Fetch-Site": "cross-site"})
    assert refused.status_code == 403


def test_schema_endpoint_lists_vocabulary_presets_and_backends(idle_url):
    body = httpx.get(f"{idle_url}/v1/schema").json()
    assert "close_up" in body["vocabulary"]["framing"] and "dolly" in body["vocabulary"]["camera"]
    assert "birds_eye" in body["vocabulary"]["angle"] and "preview" in body["presets"]
    assert "previz" in body["backends"] and body["schema"]["type"] == "object"


def test_plan_preview_gives_camera_start_end_and_direction(idle_url):
    script = json.loads(httpx.get(f"{idle_url}/console/examples/quick.json").text)
    body = httpx.post(f"{idle_url}/v1/plan", json=script).json()
    assert body["valid"] is True and [s["shot_id"] for s in body["shots"]] == ["s01", "s02"]
    dolly, static = body["shots"]
    subject = next(c for c in dolly["characters"] if c["id"] == "lin")["position"]

    def ground_distance(pose):
        return ((pose["position"][0] - subject[0]) ** 2 + (pose["position"][2] - subject[1]) ** 2) ** 0.5

    # A 0.3 m push-in ends 0.3 m nearer the subject, looking at it.
    assert ground_distance(dolly["start"]) - ground_distance(dolly["end"]) == pytest.approx(0.3, abs=0.02)
    to_subject = [subject[0] - dolly["start"]["position"][0], subject[1] - dolly["start"]["position"][2]]
    norm = (to_subject[0] ** 2 + to_subject[1] ** 2) ** 0.5
    cosine = (to_subject[0] * dolly["start"]["forward"][0] + to_subject[1] * dolly["start"]["forward"][1]) / norm
    assert cosine > 0.95
    assert static["start"]["position"] == static["end"]["position"]
    assert dolly["frames"] == 24 and dolly["start"]["fov"] == pytest.approx(60.0)
    script["shots"][0]["duration"] = -1
    invalid = httpx.post(f"{idle_url}/v1/plan", json=script).json()
    assert invalid["valid"] is False and invalid["issues"][0]["path"] == "shots[0].duration"


# ------------------------------------------------------------------ real Chromium


@pytest.fixture(scope="module")
def browser_context(tmp_path_factory):
    """A fresh headless Chromium profile driven by Playwright (never a downloaded browser)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("Playwright for Python is missing: run scripts/setup.sh (installs the dev extra)")
    if shutil.which(CHROMIUM) is None:
        pytest.fail(f"{CHROMIUM} is missing: run scripts/setup.sh as root (apt-get install chromium)")
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS,
            viewport={"width": 1280, "height": 800}, accept_downloads=True,
        )
        context.set_default_timeout(20_000)
        yield context
        context.close()


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """A real `daotai serve` subprocess rendering with previz."""
    server = ServerProcess(tmp_path_factory.mktemp("serve")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def shots_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("screenshots")


@pytest.fixture()
def page(browser_context, live):
    page = browser_context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.goto(f"{live.url}/")
    page.wait_for_selector("body[data-ready=true]")
    page.evaluate("localStorage.clear()")
    yield page
    page.close()
    assert not errors, errors


def load_quick(page) -> None:
    """Choose the quick example and wait until the server calls it valid."""
    page.select_option("#example-select", "quick")
    page.click("#load-example")
    page.wait_for_selector('[data-path="shots[1].shot_id"]')
    page.wait_for_selector("#validation-status[data-state=ok]")


def overlaps(page) -> list[tuple[str, str]]:
    """Pairs of visible controls whose boxes intersect (by more than a pixel each way).

    Measured scrolled to the top: the problems panel stays in view (sticky) by design, so
    further down the page content passes under it."""
    page.evaluate("window.scrollTo(0, 0)")
    boxes = page.evaluate(
        """(selector) => [...document.querySelectorAll(selector)]
            .filter((n) => n.offsetParent !== null && !n.hidden)
            .map((n) => { const r = n.getBoundingClientRect();
                          return {name: (n.dataset.path || n.id || n.className || n.tagName) + '#' + n.tagName,
                                  x: r.left + scrollX, y: r.top + scrollY, w: r.width, h: r.height}; })
            .filter((b) => b.w > 0 && b.h > 0)""",
        CONTROLS,
    )
    found = []
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            dx = min(a["x"] + a["w"], b["x"] + b["w"]) - max(a["x"], b["x"])
            dy = min(a["y"] + a["h"], b["y"] + b["h"]) - max(a["y"], b["y"])
            if dx > 1 and dy > 1:
                found.append((a["name"], b["name"]))
    return found


def test_director_edits_validates_renders_plays_and_downloads(page, shots_dir, tmp_path):
    page.screenshot(path=str(shots_dir / "01_opened.png"), full_page=True)
    load_quick(page)
    assert page.input_value('[data-path="shots[0].camera.type"]') == "dolly"
    # The camera diagram is drawn from the plan: the canvas is no longer blank.
    page.wait_for_function(
        """() => { const c = document.querySelector('canvas.diagram[data-shot=s01]');
                   const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                   for (let i = 3; i < d.length; i += 4) if (d[i] > 0) return true; return false; }""")
    page.screenshot(path=str(shots_dir / "02_example_loaded.png"), full_page=True)

    duration = page.locator('[data-path="shots[1].duration"]')
    duration.fill("-1")
    issue = page.locator('.issue[data-issue="shots[1].duration"]')
    issue.wait_for()
    assert duration.get_attribute("aria-invalid") == "true"
    assert "between 0 and 120" in issue.inner_text()
    # The message sits with its own field, inside the second shot's card.
    assert page.locator(".card.shot").nth(1).locator(".issue").count() == 1
    assert page.locator(".card.shot").nth(0).locator(".issue").count() == 0
    page.screenshot(path=str(shots_dir / "03_invalid_edit.png"), full_page=True)

    duration.fill("1")
    page.wait_for_selector("#validation-status[data-state=ok]")
    assert page.locator(".issue").count() == 0 and duration.get_attribute("aria-invalid") is None

    page.select_option("#backend-select", "previz")
    page.select_option("#preset-select", "")  # the script's own tiny size keeps the render short
    page.click("#submit-btn")
    job = page.locator(".job").first
    seen: set[str] = set()
    for _ in range(600):  # bounded: at most about 120 s
        status = job.locator(".job-status").get_attribute("data-status")
        seen.add(job.locator(".job-progress").get_attribute("data-progress") or "")
        if status in ("completed", "failed", "cancelled"):
            break
        page.wait_for_timeout(200)
    page.screenshot(path=str(shots_dir / "04_run_finished.png"), full_page=True)
    assert status == "completed", job.inner_text()
    assert job.locator(".job-progress").get_attribute("data-progress") == "100"
    assert job.locator(".shot-progress .percent").all_inner_texts() == ["100%", "100%"]

    player = job.locator("video.sequence-player")
    page.wait_for_function("(v) => v.readyState >= 1 && isFinite(v.duration)", arg=player.element_handle())
    assert player.evaluate("v => v.duration") == pytest.approx(QUICK_TOTAL_S, abs=1 / 24 + 1e-3)
    player.evaluate("v => { v.muted = true; return v.play(); }")
    page.wait_for_function("(v) => v.currentTime > 0", arg=player.element_handle())
    assert job.locator(".clips video").count() == 2
    assert job.locator(".contact img").evaluate("img => img.complete && img.naturalWidth > 0") or \
        page.wait_for_function("(img) => img.complete && img.naturalWidth > 0",
                               arg=job.locator(".contact img").element_handle())
    qc_items = job.locator(".qc-list li")
    assert qc_items.count() == 2 and "camera" in qc_items.first.inner_text()
    # Camera adherence was checked per shot and is said plainly (previz follows its own plan).
    assert qc_items.evaluate_all("items => items.map(li => li.dataset.camera)") == ["true", "true"]
    assert "as planned" in qc_items.first.inner_text()
    # each character's look across the shots (here each is seen in one shot only: nothing to compare)
    looks = job.locator(".qc-identity")
    assert looks.get_attribute("data-verdict") == "ok" and "lin in one shot" in looks.inner_text()
    page.screenshot(path=str(shots_dir / "05_results.png"), full_page=True)

    with page.expect_download() as info:
        job.locator('a[data-output="timeline"]').click()
    saved = tmp_path / "timeline.otio"
    info.value.save_as(saved)
    timeline = json.loads(saved.read_text())
    assert timeline["OTIO_SCHEMA"].startswith("Timeline")
    names = set(job.locator(".downloads-box a").evaluate_all("links => links.map(a => a.dataset.output)"))
    assert {"video", "timeline", "qc", "manifest", "contact_sheet", "plan", "shot.s01", "shot.s02"} <= names


def test_language_switch_is_chinese_and_remembered(page, shots_dir):
    load_quick(page)
    assert page.inner_text("#shots-panel h2") == "Shots"
    page.click("#lang-btn")
    assert page.inner_text("#shots-panel h2") == "镜头"
    assert page.inner_text("#submit-btn") == "开始渲染"
    framing = page.locator('[data-path="shots[1].framing"] option[value=close_up]').inner_text()
    assert "特写" in framing
    assert "推拉" in page.locator('[data-path="shots[0].camera.type"] option[value=dolly]').inner_text()
    page.screenshot(path=str(shots_dir / "06_chinese.png"), full_page=True)
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    assert page.inner_text("#characters-panel h2") == "角色"
    assert page.evaluate("document.documentElement.lang") == "zh-CN"
    page.click("#lang-btn")
    assert page.inner_text("#characters-panel h2") == "Characters"


def test_shot_table_add_duplicate_reorder_delete_and_undo(page, tmp_path):
    load_quick(page)
    ids = lambda: page.locator('[data-path$="].shot_id"]').evaluate_all("ns => ns.map(n => n.value)")  # noqa: E731
    page.locator(".duplicate-shot").first.click()
    assert ids() == ["s01", "s01_2", "s02"]
    page.set_viewport_size({"width": 1280, "height": 2400})  # both cards in view while the mouse drags
    page.locator(".card.shot").nth(2).locator(".handle").drag_to(page.locator(".card.shot").nth(0))
    page.set_viewport_size({"width": 1280, "height": 800})
    assert ids() == ["s02", "s01", "s01_2"]
    page.locator(".delete-shot").nth(2).click()
    assert ids() == ["s02", "s01"]
    page.click("#undo-btn")
    assert ids() == ["s02", "s01", "s01_2"]
    page.click("#undo-btn")
    page.click("#undo-btn")
    assert ids() == ["s01", "s02"]
    page.click("#redo-btn")
    assert ids() == ["s01", "s01_2", "s02"]
    page.click("#add-shot")
    assert len(ids()) == 4
    title = page.locator('[data-path="title"]')
    title.fill("New title")
    page.click("#undo-btn")
    assert title.input_value() == "Quick test"
    page.click("#add-character")
    page.locator('[data-path="characters[2].colour"]').fill("#22aa44")
    page.locator('[data-path="characters[2].appearance"]').fill("green scarf")
    page.wait_for_selector("#validation-status[data-state=ok]")
    # Export gives back the edited script as JSON.
    with page.expect_download() as info:
        page.click("#export-btn")
    exported = json.loads(Path(info.value.path()).read_text())
    assert [s["shot_id"] for s in exported["shots"]][:3] == ["s01", "s01_2", "s02"]
    assert exported["characters"][2] == {"id": "char_3", "colour": "#22aa44", "appearance": "green scarf"}
    # Importing a file replaces the script (and is one undo step).
    office = tmp_path / "office.json"
    office.write_text(json.dumps(EXAMPLE_OFFICE))
    page.set_input_files("#import-file", str(office))
    page.wait_for_function("n => document.querySelectorAll('.card.shot').length === n",
                           arg=len(EXAMPLE_OFFICE["shots"]))
    page.wait_for_selector("#validation-status[data-state=ok]")
    page.click("#undo-btn")
    assert ids()[:3] == ["s01", "s01_2", "s02"]


def test_quick_preview_renders_one_shot_at_the_preview_preset(page, shots_dir):
    load_quick(page)
    page.locator(".card.shot").nth(1).locator(".preview-shot").click()
    video = page.locator('.preview[data-shot=s02] video')
    video.wait_for(timeout=90_000)
    page.wait_for_function("(v) => v.readyState >= 1 && isFinite(v.duration)", arg=video.element_handle())
    assert video.evaluate("v => v.duration") == pytest.approx(1.0, abs=1 / 24 + 1e-3)
    # The quick example is 160x96 (5:3): the preview preset (640x360) keeps the script's shape,
    # so the frame is the largest 5:3 frame inside 640x360.
    assert video.evaluate("v => new Promise(ok => { const size = () => ok([v.videoWidth, v.videoHeight]); "
                          "v.readyState >= 2 ? size() : v.addEventListener('loadeddata', size); })") == [600, 360]
    page.screenshot(path=str(shots_dir / "08_quick_preview.png"), full_page=True)


def test_a_running_job_shows_the_frame_being_rendered_and_each_clip_once_encoded(page, shots_dir):
    load_quick(page)
    page.select_option("#backend-select", "previz")
    page.select_option("#preset-select", "preview")  # 640x360: the glimpse comes at most 320 wide
    page.click("#submit-btn")
    job = page.locator(".job").first
    picture = job.locator(".live img.live-preview")
    picture.wait_for(timeout=60_000)
    # Read the size in the same poll that sees the picture loaded: the console swaps in each new glimpse,
    # so a picture loaded one moment can be the next, still loading (0 x 0), the moment after.
    size = page.wait_for_function(
        "() => { const img = document.querySelector('.job .live img.live-preview'); "
        "return img && img.complete && img.naturalWidth > 0 ? [img.naturalWidth, img.naturalHeight] : null; }"
    ).json_value()
    assert size == [320, 192]  # 5:3, as the frame
    assert re.fullmatch(r"rendering s0[12], frame \d+", job.locator(".live-frame figcaption").inner_text())
    clip = job.locator(".live-clips figure[data-shot=s01] video")
    clip.wait_for(timeout=60_000)  # s01 is encoded while s02 still renders
    assert clip.get_attribute("src").endswith("/live/shot.s01")
    page.screenshot(path=str(shots_dir / "09_live_view.png"), full_page=True)
    job.locator(".job-status[data-status=completed]").wait_for(timeout=90_000)
    job.locator(".results").wait_for()
    assert job.locator(".live").count() == 0  # the deliverables take over


@pytest.mark.parametrize("width,height", [(1280, 800), (800, 900)])
def test_layout_has_no_overlapping_controls(page, shots_dir, width, height):
    page.set_viewport_size({"width": width, "height": height})
    load_quick(page)
    page.locator('[data-path="shots[1].duration"]').fill("-1")  # issues add text under fields
    page.locator('.issue[data-issue="shots[1].duration"]').wait_for()
    page.screenshot(path=str(shots_dir / f"07_layout_{width}.png"), full_page=True)
    assert overlaps(page) == []
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.click("#lang-btn")
    assert overlaps(page) == []
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.click("#lang-btn")


def test_reference_image_upload_shows_thumbnails_and_renders_with_the_job(page, live, shots_dir, tmp_path):
    import hashlib
    import io

    from PIL import Image

    load_quick(page)
    lin = tmp_path / "lin.png"
    Image.new("RGB", (64, 80), (20, 90, 200)).save(lin)
    lin_ref = "upload:img_" + hashlib.sha256(lin.read_bytes()).hexdigest()[:32]
    first = page.locator('.card[data-kind=character][data-index="0"]')
    page.set_input_files('.card[data-kind=character][data-index="0"] input.ref-file', str(lin))
    thumb = first.locator(f'.ref-thumb[data-ref="{lin_ref}"] img')
    thumb.wait_for()
    page.wait_for_function("(img) => img.complete && img.naturalWidth > 0", arg=thumb.element_handle())
    assert thumb.evaluate("img => [img.naturalWidth, img.naturalHeight]") == [64, 80]  # served back from the store
    page.wait_for_selector("#validation-status[data-state=ok]")

    # Dropping a file on the second character's zone uploads it too; its remove button takes it out again.
    buffer = io.BytesIO()
    Image.new("RGB", (32, 32), (200, 30, 30)).save(buffer, format="PNG")
    page.locator('.card[data-kind=character][data-index="1"] .dropzone').evaluate(
        """(zone, bytes) => { const dt = new DataTransfer();
             dt.items.add(new File([new Uint8Array(bytes)], 'mei.png', {type: 'image/png'}));
             zone.dispatchEvent(new DragEvent('drop', {dataTransfer: dt, bubbles: true, cancelable: true})); }""",
        list(buffer.getvalue()))
    second = page.locator('.card[data-kind=character][data-index="1"]')
    second.locator(".ref-thumb img").wait_for()
    assert second.locator(".ref-thumb").count() == 1
    page.screenshot(path=str(shots_dir / "09_reference_uploaded.png"), full_page=True)
    for width, height in ((1280, 800), (800, 900)):
        page.set_viewport_size({"width": width, "height": height})
        assert overlaps(page) == [], width
        assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.click("#lang-btn")
    assert first.locator(".upload-ref").inner_text() == "上传图片"
    assert first.locator(".remove-ref").inner_text() == "移除"
    assert overlaps(page) == []
    page.click("#lang-btn")
    page.set_viewport_size({"width": 1280, "height": 800})
    second.locator(".remove-ref").click()
    assert second.locator(".ref-thumb").count() == 0
    page.click("#undo-btn")
    assert second.locator(".ref-thumb").count() == 1
    page.click("#redo-btn")
    assert second.locator(".ref-thumb").count() == 0
    page.wait_for_selector("#validation-status[data-state=ok]")

    page.select_option("#backend-select", "previz")
    page.select_option("#preset-select", "")
    page.click("#submit-btn")
    job = page.locator(".job").first
    for _ in range(600):  # bounded: at most about 120 s
        status = job.locator(".job-status").get_attribute("data-status")
        if status in ("completed", "failed", "cancelled"):
            break
        page.wait_for_timeout(200)
    page.screenshot(path=str(shots_dir / "10_reference_run_finished.png"), full_page=True)
    assert status == "completed", job.inner_text()
    job_id = job.get_attribute("data-job")
    manifest = httpx.get(f"{live.url}/v1/jobs/{job_id}/files/manifest").json()
    sha = hashlib.sha256(lin.read_bytes()).hexdigest()
    assert [(r["character"], r["reference"], r["sha256"]) for r in manifest["references"]] == [("lin", lin_ref, sha)]
