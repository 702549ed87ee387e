"""The console as a director's desk, in real headless Chromium against a live `daotai serve`:
aliases shown as their canonical values, every field editable and exported unchanged, problems
listed with links to their fields, the floor plan as a staging editor, and the results panel
(every deliverable, the contact sheet full size, plain-words QC, printable storyboard pages).

One server and one browser serve the whole module; the checks are grouped into a few tests
because each page load and each render costs seconds.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from daotai.script import vocab  # noqa: E402
from daotai.server.testing import ServerProcess  # noqa: E402
from test_web_console import overlaps  # noqa: E402  (the layout check both console test files use)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ROOT = Path(__file__).parent.parent
WEB_EXAMPLES = ROOT / "src" / "daotai" / "server" / "web" / "examples"
EXAMPLES = ["quick", "office", "street_zh", "all_moves", "minimal"]
SHORTHAND = {"camera": "type", "transition": "type", "scene": "name", "soundtrack": "path"}
KEY_ALIASES = {alias: field for field, aliases in vocab.KEY_ALIASES.items() for alias in aliases}  # 对白 → dialogue
# Enum fields by the last key of their path, with the table that reads their aliases.
ENUM_TABLES = {"framing": vocab.FRAMING_ALIASES, "angle": vocab.ANGLE_ALIASES, "time_of_day": vocab.TIME_OF_DAY_ALIASES,
               "easing": vocab.EASING_ALIASES, "direction": vocab.DIRECTION_ALIASES}
PX_TOLERANCE_M = 0.011  # positions are written to the centimetre


# ------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    server = ServerProcess(tmp_path_factory.mktemp("serve")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("Playwright for Python is missing: run scripts/setup.sh (installs the dev extra)")
    if shutil.which(CHROMIUM) is None:
        pytest.fail(f"{CHROMIUM} is missing: run scripts/setup.sh as root (apt-get install chromium)")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("profile")), executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS,
            viewport={"width": 1280, "height": 800}, accept_downloads=True)
        context.set_default_timeout(20_000)
        yield context
        context.close()


@pytest.fixture(scope="module")
def shots_dir(tmp_path_factory) -> list[Path]:
    """Where screenshots go: a temporary folder, and DAOTAI_CONSOLE_SHOTS when it is set."""
    folders = [tmp_path_factory.mktemp("desk-shots")]
    if os.environ.get("DAOTAI_CONSOLE_SHOTS"):
        folders.append(Path(os.environ["DAOTAI_CONSOLE_SHOTS"]))
        folders[-1].mkdir(parents=True, exist_ok=True)
    return folders


@pytest.fixture()
def page(browser, live):
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    # A 422 from POST /v1/plan is an answer (the planner's problem), which Chromium still logs.
    page.on("console", lambda msg: errors.append(msg.text)
            if msg.type == "error" and "status of 422" not in msg.text else None)
    page.goto(f"{live.url}/")
    page.wait_for_selector("body[data-ready=true]")
    page.evaluate("localStorage.clear()")  # the profile is shared: start each test in English, no draft
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    yield page
    page.close()
    assert not errors, errors


def snap(page, folders: list[Path], name: str, selector: str | None = None) -> None:
    for folder in folders:
        target = page.locator(selector).first if selector else page
        if selector:
            target.screenshot(path=str(folder / name))
        else:
            page.screenshot(path=str(folder / name), full_page=True)


def load(page, name: str, state: str = "ok") -> None:
    """Load a bundled example and wait until the server has checked it (not the script before it)."""
    loads = int(page.evaluate("document.body.dataset.scriptLoads || '0'"))
    page.select_option("#example-select", name)
    page.click("#load-example")
    page.wait_for_function("n => Number(document.body.dataset.scriptLoads || 0) > n", arg=loads)
    page.wait_for_selector(f"#validation-status[data-state={state}]")


def set_language(page, lang: str) -> None:
    if page.evaluate("document.documentElement.lang") != ("zh-CN" if lang == "zh" else "en"):
        page.click("#lang-btn")
    page.wait_for_selector("#validation-status[data-state=ok]")


def export(page) -> dict:
    with page.expect_download() as info:
        page.click("#export-btn")
    return json.loads(Path(info.value.path()).read_text())


def wait_checked(page, state: str = "ok") -> None:
    """Wait for a fresh answer: the check starts on an edit and ends in `state`."""
    page.wait_for_selector(f"#validation-status[data-state={state}]")


# ------------------------------------------------------------------ helpers about scripts


def leaves(value, path: str = ""):
    """(JSON path, value) of every scalar the script sets, written as the editor names it."""
    if isinstance(value, dict):
        for key, child in value.items():
            key = KEY_ALIASES.get(key, key)
            yield from leaves(child, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from leaves(child, f"{path}[{index}]")
    else:
        last = path.rsplit(".", 1)[-1]
        if isinstance(value, str) and last in SHORTHAND:
            yield f"{path}.{SHORTHAND[last]}", value
        else:
            yield path, value


def canonical_of(path: str, word: str) -> str | None:
    """The canonical value the server reads an enum word as (None: not an enum field)."""
    if re.search(r"camera\.type$", path):
        return vocab.CAMERA_ALIASES[vocab.normalise_word(word)][0]
    if re.search(r"transition\.type$", path):
        return vocab.lookup(vocab.TRANSITION_ALIASES, word)
    table = ENUM_TABLES.get(path.rsplit(".", 1)[-1])
    return vocab.lookup(table, word) if table else None


def controls(page) -> dict[str, dict]:
    return page.evaluate("""() => Object.fromEntries([...document.querySelectorAll('input[data-path], select[data-path], textarea[data-path], [data-path]')]
        .map((n) => [n.dataset.path, {tag: n.tagName, type: n.type || '', value: 'value' in n ? n.value : null,
                                      refs: [...n.querySelectorAll('.ref-thumb')].map((f) => f.dataset.ref)}]))""")


def assert_every_set_field_shown(page, script: dict, where: str) -> None:
    shown = controls(page)
    for path, raw in leaves(script):
        # The field's own control, else the control of the whole vector, colour or image list.
        candidates = [path, re.sub(r"\[\d+\]$", "", path)]
        found = next((shown[c] for c in candidates if c in shown), None)
        assert found is not None, f"{where}: no control for {path} = {raw!r}"
        if found["tag"] in ("INPUT", "SELECT", "TEXTAREA") and found["type"] != "checkbox":
            assert found["value"] not in ("", None), f"{where}: the control of {path} = {raw!r} is empty"
        elif found["refs"] is not None and path.startswith("characters") and "reference_images" in path:
            assert raw in found["refs"], f"{where}: reference {raw!r} not shown"
        expected = canonical_of(path, raw) if isinstance(raw, str) else None
        if expected is not None:
            assert found["value"] == expected, f"{where}: {path} = {raw!r} shows {found['value']!r}, not {expected!r}"


def cli_validate(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from daotai.cli import main; main()", "validate", str(path)],
                          capture_output=True, text=True, timeout=60)


def mark(page, shot: str, handle: str):
    return page.locator(f'.stage[data-shot="{shot}"] .mark[data-handle="{handle}"]')


def drag_mark(page, shot: str, handle: str, dx: float, dy: float) -> tuple[float, float, float]:
    """Drag a floor-plan mark by (dx, dy) CSS pixels; returns (x, z) before and the plan's px per metre."""
    target = mark(page, shot, handle)
    target.scroll_into_view_if_needed()
    scale = float(page.locator(f'.stage[data-shot="{shot}"]').get_attribute("data-scale"))
    x0, z0 = (float(target.get_attribute(f"data-{k}") or "nan") for k in "xz")  # a pan's aim mark has no place
    box = target.bounding_box()
    cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(cx, cy)
    page.mouse.down()
    page.mouse.move(cx + dx / 2, cy + dy / 2, steps=3)
    page.mouse.move(cx + dx, cy + dy, steps=3)
    page.mouse.up()
    return x0, z0, scale


# ------------------------------------------------------------------ the tests


def test_schema_endpoint_gives_every_alias_and_key_alias(live):
    body = httpx.get(f"{live.url}/v1/schema").json()
    assert body["aliases"]["Framing"]["中景"] == "medium" and body["aliases"]["Framing"]["ms"] == "medium"
    assert body["aliases"]["CameraType"]["push_in"] == "dolly" and body["alias_presets"]["CameraType"]["推"] == {"direction": "in"}
    assert body["aliases"]["TransitionKind"]["叠化"] == "crossfade" and body["aliases"]["TimeOfDay"]["清晨"] == "morning"
    assert body["key_aliases"]["Shot"]["dialogue"] == ["对白", "台词"] and body["key_aliases"]["Character"]["colour"] == ["color"]
    # Each aliased enum of the schema has its table, and every table names only canonical values.
    for name, table in body["aliases"].items():
        assert set(table.values()) <= set(body["schema"]["$defs"][name]["enum"]), name


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_example_shows_every_field_it_sets(page, lang):
    """No empty control for a field the script sets; aliases show their canonical value."""
    set_language(page, lang)
    for name in EXAMPLES:
        load(page, name)
        script = json.loads((WEB_EXAMPLES / f"{name}.json").read_text())
        assert_every_set_field_shown(page, script, f"{name} ({lang})")
    # The built-in Chinese example: 推 is a dolly *in*, and the direction shows it.
    load(page, "street_zh")
    assert page.input_value('[data-path="shots[1].camera.type"]') == "dolly"
    assert page.input_value('[data-path="shots[1].camera.direction"]') == "in"
    assert page.input_value('[data-path="shots[0].camera.direction"]') == "up"  # 升
    # Untouched words are exported as written; an edited field exports its canonical value.
    page.locator('[data-path="title"]').fill("清晨的街道 2")
    wait_checked(page)
    written = json.loads((WEB_EXAMPLES / "street_zh.json").read_text())
    exported = export(page)
    assert exported["shots"] == written["shots"] and exported["scene"] == written["scene"]
    page.select_option('[data-path="shots[2].framing"]', "wide")
    wait_checked(page)
    exported = export(page)
    assert exported["shots"][2]["framing"] == "wide" and exported["shots"][3]["framing"] == "特写"


def test_every_field_kind_round_trips_through_export_and_validate(page, tmp_path):
    load(page, "quick")
    # an enum and a number inside a fold (transition), on the second shot
    page.locator('.card.shot').nth(1).locator('details.fold-transition > summary').click()
    page.select_option('[data-path="shots[1].transition.type"]', "crossfade")
    page.locator('[data-path="shots[1].transition.duration"]').fill("0.25")
    # camera: type, direction, easing, fov, fov_end, vectors, orbit, shake
    page.select_option('[data-path="shots[1].camera.type"]', "zoom")
    page.select_option('[data-path="shots[1].camera.direction"]', "in")
    page.select_option('[data-path="shots[1].camera.easing"]', "linear")
    page.locator('[data-path="shots[1].camera.fov"]').fill("50")
    page.locator('[data-path="shots[1].camera.fov_end"]').fill("35")
    page.locator('[data-path="shots[0].camera.motion[0]"]').fill("0.2")
    page.locator('[data-path="shots[0].camera.rotate[0]"]').fill("3")
    # characters: position (vector), facing, height, colour, appearance
    page.locator('[data-path="characters[1].position[0]"]').fill("1.5")
    page.locator('[data-path="characters[1].position[1]"]').fill("-0.5")
    page.locator('[data-path="characters[1].facing"]').fill("-45")
    page.locator('[data-path="characters[1].height"]').fill("1.6")
    page.locator('[data-path="characters[0].colour"]').fill("#123456")
    # blocking: a list of objects with a character reference, a vector and numbers
    first = page.locator('.card.shot').nth(0)
    first.locator('details.fold-blocking > summary').click()
    first.locator('.add-item[data-list="shots[0].blocking"]').click()
    page.locator('[data-path="shots[0].blocking[0].to[0]"]').fill("-1")
    page.locator('[data-path="shots[0].blocking[0].to[1]"]').fill("0.5")
    page.locator('[data-path="shots[0].blocking[0].start"]').fill("0.2")
    page.select_option('[data-path="shots[0].blocking[0].character"]', "mei")
    # sound: dialogue (list), sound words (text), audio (object with a checkbox and a number)
    first.locator('details.fold-sound > summary').click()
    first.locator('.add-item[data-list="shots[0].dialogue"]').click()
    page.locator('[data-path="shots[0].dialogue[0].line"]').fill("Good morning")
    page.locator('[data-path="shots[0].sound"]').fill("keyboard clicks")
    page.locator('[data-path="shots[0].audio.mute"]').check()
    page.locator('[data-path="shots[0].audio.gain_db"]').fill("-6")
    # more: which characters are in the shot (ticks), seed, negative prompt
    first.locator('details.fold-more > summary').click()
    second = page.locator('.card.shot').nth(1)
    second.locator('details.fold-more > summary').click()
    second.locator('.ids input[value="lin"]').uncheck()
    page.locator('[data-path="shots[0].seed"]').fill("42")
    page.locator('[data-path="shots[0].negative_prompt"]').fill("blur")
    # scene: time of day; script: size
    page.select_option('[data-path="scene.time_of_day"]', "dusk")
    page.locator('[data-path="size"]').fill("320x180")
    wait_checked(page)
    # With every fold of the first shot open, nothing overlaps at 1280 or 800 px.
    for width in (1280, 800):
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(200)
        assert overlaps(page) == [], width
        assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.set_viewport_size({"width": 1280, "height": 800})
    exported = export(page)
    shot0, shot1 = exported["shots"]
    assert shot1["transition"] == {"type": "crossfade", "duration": 0.25}
    assert shot1["camera"] == {"type": "zoom", "direction": "in", "easing": "linear", "fov": 50, "fov_end": 35}
    assert shot0["camera"] == {"type": "dolly", "motion": [0.2, 0, -0.3], "rotate": [3, 0, 0]}
    assert exported["characters"][1] == {"id": "mei", "name": "Mei", "appearance": "red coat", "colour": "#cc3333",
                                              "position": [1.5, -0.5], "facing": -45, "height": 1.6}
    assert exported["characters"][0]["colour"] == "#123456"
    assert shot0["blocking"] == [{"character": "mei", "to": [-1, 0.5], "start": 0.2}]
    assert shot0["dialogue"] == [{"character": "lin", "line": "Good morning"}]
    assert shot0["sound"] == "keyboard clicks" and shot0["audio"] == {"mute": True, "gain_db": -6}
    assert shot1["characters"] == ["mei"] and shot0["seed"] == 42 and shot0["negative_prompt"] == "blur"
    assert exported["scene"]["time_of_day"] == "dusk" and exported["size"] == "320x180"
    # The CLI accepts the export, and importing it shows the same script (exported again unchanged).
    saved = tmp_path / "edited.json"
    saved.write_text(json.dumps(exported, ensure_ascii=False))
    checked = cli_validate(saved)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    load(page, "office")
    page.set_input_files("#import-file", str(saved))
    page.wait_for_selector('[data-path="shots[0].dialogue[0].line"]')
    wait_checked(page)
    assert page.input_value('[data-path="shots[0].dialogue[0].line"]') == "Good morning"
    assert export(page) == exported
    # Clearing a field removes it (its default applies) and never leaves an empty object behind.
    page.locator('[data-path="shots[0].audio.gain_db"]').fill("")
    page.locator('[data-path="shots[0].audio.mute"]').uncheck()
    wait_checked(page)
    assert export(page)["shots"][0]["audio"] == {"mute": False}


def test_key_aliases_shorthand_and_soundtrack_upload(page, tmp_path):
    """Fields written under another name (对白, 配乐) and shorthand show and export as written."""
    import wave

    script = json.loads((WEB_EXAMPLES / "quick.json").read_text())
    script["shots"][0]["对白"] = [{"character": "lin", "line": "早上好"}]
    script["shots"][1]["音效"] = "键盘声"
    script["shots"][1]["transition"] = "叠化"
    saved = tmp_path / "aliases.json"
    saved.write_text(json.dumps(script, ensure_ascii=False))
    page.set_input_files("#import-file", str(saved))
    page.wait_for_selector('[data-path="shots[0].dialogue[0].line"]')
    wait_checked(page)
    assert_every_set_field_shown(page, script, "key aliases")
    assert page.input_value('[data-path="shots[1].sound"]') == "键盘声"
    assert page.input_value('[data-path="shots[1].transition.type"]') == "crossfade"
    page.locator('[data-path="shots[0].dialogue[0].line"]').fill("早上好！")
    wait_checked(page)
    exported = export(page)
    assert exported["shots"][0]["对白"] == [{"character": "lin", "line": "早上好！"}] and "dialogue" not in exported["shots"][0]
    assert exported["shots"][1]["transition"] == "叠化" and exported["shots"][1]["音效"] == "键盘声"
    # A soundtrack is uploaded to the service and named as upload:snd_<id>.
    sound = tmp_path / "music.wav"
    with wave.open(str(sound), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(48000)
        out.writeframes(b"\x00\x10" * 48000)
    page.locator('details.fold-sound > summary').first.click()
    page.set_input_files("input.sound-file", str(sound))
    page.wait_for_function("() => (document.querySelector('[data-path=\"soundtrack.path\"]') || {}).value?.startsWith('upload:snd_')")
    wait_checked(page)
    assert export(page)["soundtrack"]["path"].startswith("upload:snd_")
    assert page.locator('#script-panel audio').count() == 1


def test_first_shot_crossfade_shows_the_planners_problem_and_blocks_render(page, shots_dir):
    load(page, "quick")
    assert page.is_enabled("#submit-btn") and page.is_hidden("#submit-reason")
    page.locator('.card.shot').nth(0).locator('details.fold-transition > summary').click()
    page.select_option('[data-path="shots[0].transition.type"]', "crossfade")
    wait_checked(page, "bad")
    status = page.inner_text("#validation-status")
    assert "valid" not in status.lower() and "1 problem" in status
    link = page.locator('#problem-list a.problem-link')
    assert link.count() == 1 and link.get_attribute("data-issue-path") == "shots[0].transition.type"
    assert page.locator("#problem-list li").get_attribute("data-source") == "plan"
    assert "previous shot" in page.inner_text("#problem-list")
    assert page.is_disabled("#submit-btn")
    assert "problems" in page.inner_text("#submit-reason") and page.is_visible("#submit-reason")
    # The link takes the director to the field, folded or not, and marks it.
    page.locator('.card.shot').nth(0).locator('details.fold-transition > summary').click()  # fold it again
    page.mouse.wheel(0, 2000)
    link.click()
    field = page.locator('[data-path="shots[0].transition.type"]')
    assert page.evaluate("document.activeElement.dataset.path") == "shots[0].transition.type"
    assert field.is_visible() and field.get_attribute("aria-invalid") == "true"
    assert "flash" in field.get_attribute("class")
    snap(page, shots_dir, "problem_linked.png")
    # A fade is plannable: the problem goes and Render comes back.
    page.select_option('[data-path="shots[0].transition.type"]', "fade")
    wait_checked(page)
    assert page.locator("#problem-list li").count() == 0 and page.is_enabled("#submit-btn")


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_floor_plan_drags_and_keys_edit_the_staging(page, shots_dir, lang):
    set_language(page, lang)
    load(page, "office")
    # A character dragged in the first shot moves its position by the dragged amount.
    x0, z0, k = drag_mark(page, "s01", "char:mei", 40, 30)
    wait_checked(page)
    exported = export(page)
    assert exported["characters"][1]["position"] == pytest.approx([x0 + 40 / k, z0 + 30 / k], abs=PX_TOLERANCE_M)
    # One drag is one undo step.
    page.click("#undo-btn")
    wait_checked(page)
    assert export(page)["characters"][1]["position"] == [1.6, -1.0]
    page.click("#redo-btn")
    wait_checked(page)
    # In the second shot, lin stands where the first shot's walk took him: dragging him moves that waypoint.
    x0, z0, k = drag_mark(page, "s02", "char:lin", -30, 20)
    wait_checked(page)
    exported = export(page)
    assert exported["shots"][0]["blocking"][0]["to"] == pytest.approx([x0 - 30 / k, z0 + 20 / k], abs=PX_TOLERANCE_M)
    assert exported["characters"][0]["position"] == [0.0, 0.0]
    # The waypoint itself is a mark on the first shot's plan.
    x0, z0, k = drag_mark(page, "s01", "way:0", 25, 0)
    wait_checked(page)
    assert export(page)["shots"][0]["blocking"][0]["to"] == pytest.approx([x0 + 25 / k, z0], abs=PX_TOLERANCE_M)
    # Facing: drag the tick to straight right of mei (facing 90°: toward +x).
    tick = mark(page, "s01", "facing:mei")
    tick.scroll_into_view_if_needed()
    body = mark(page, "s01", "char:mei").bounding_box()
    tick_box = tick.bounding_box()
    page.mouse.move(tick_box["x"] + tick_box["width"] / 2, tick_box["y"] + tick_box["height"] / 2)
    page.mouse.down()
    page.mouse.move(body["x"] + body["width"] / 2 + 40, body["y"] + body["height"] / 2, steps=4)
    page.mouse.up()
    wait_checked(page)
    assert export(page)["characters"][1]["facing"] == pytest.approx(90, abs=3)  # mark centres are whole pixels
    # The camera: dragging the end of the dolly in s02 writes a motion the planner ends exactly there.
    x0, z0, k = drag_mark(page, "s02", "camend", 30, -20)
    wait_checked(page)
    exported = export(page)
    assert exported["shots"][1]["camera"]["type"] == "dolly"
    end = planned_camera_end(exported, 1)
    assert end == pytest.approx([x0 + 30 / k, z0 - 20 / k], abs=0.02)
    # The orbit's end mark sets the orbit angle.
    before = exported["shots"][3]["camera"]["orbit"]
    drag_mark(page, "s04", "orbit", 0, 25)
    wait_checked(page)
    assert export(page)["shots"][3]["camera"]["orbit"] != before
    # Keyboard: a focused mark moves 0.1 m a press (Shift 0.5 m) and turns 15° with Q / E.
    char = mark(page, "s03", "char:mei")
    x0, z0 = float(char.get_attribute("data-x")), float(char.get_attribute("data-z"))
    char.focus()
    page.keyboard.press("ArrowRight")
    page.keyboard.press("Shift+ArrowDown")
    wait_checked(page)
    assert page.evaluate("document.activeElement.dataset.handle") == "char:mei"  # focus survives the redraw
    facing = float(char.get_attribute("data-facing"))
    page.keyboard.press("e")
    wait_checked(page)
    exported = export(page)
    assert exported["characters"][1]["position"] == pytest.approx([x0 + 0.1, z0 + 0.5], abs=PX_TOLERANCE_M)
    assert exported["characters"][1]["facing"] == pytest.approx(facing + 15, abs=0.5)
    label = char.get_attribute("aria-label")
    assert "mei" in label and ("Arrows" in label or "方向键" in label)
    # Double-clicks on the floor draw mei's path in s03 (she was the last one moved there).
    for n in range(2):
        char = mark(page, "s03", "char:mei")
        char.scroll_into_view_if_needed()
        x0, z0 = float(char.get_attribute("data-x")), float(char.get_attribute("data-z"))
        k = float(page.locator('.stage[data-shot="s03"]').get_attribute("data-scale"))
        dx, dy = free_floor(page, "s03", char, [(-60, 40), (-60, -40), (60, 40), (60, -40), (-40, 60), (40, 60)])[n]
        box = char.bounding_box()
        page.mouse.dblclick(box["x"] + box["width"] / 2 + dx, box["y"] + box["height"] / 2 + dy)
        wait_checked(page)
        moves = export(page)["shots"][2]["blocking"]
        assert len(moves) == n + 1 and moves[n]["character"] == "mei"
        # The pointer lands on whole pixels: up to a pixel off, then rounded to the centimetre.
        assert moves[n]["to"] == pytest.approx([x0 + dx / k, z0 + dy / k], abs=1 / k + PX_TOLERANCE_M)
    assert moves[1]["start"] == moves[0]["end"] > 0  # the second walk follows the first
    # Screenshots of the staging editor at 1280 and 800 px.
    for width in (1280, 800):
        # Tall enough that the first shot shows without scrolling (the problems panel stays on top when scrolled).
        page.set_viewport_size({"width": width, "height": 2600})
        page.evaluate("window.scrollTo(0, 0)")
        page.wait_for_timeout(300)  # the plans redraw on resize
        mark(page, "s01", "char:lin").focus()
        snap(page, shots_dir, f"staging_{lang}_{width}.png", '.card.shot >> nth=0')
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        stage = page.locator('.stage[data-shot="s01"]').bounding_box()
        assert stage["width"] >= 240 and stage["x"] + stage["width"] <= width
    page.set_viewport_size({"width": 1280, "height": 800})


def free_floor(page, shot: str, anchor, offsets: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Offsets from a mark where the plan's canvas itself is under the pointer (no other mark)."""
    box = anchor.bounding_box()
    cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    return [(dx, dy) for dx, dy in offsets if page.evaluate(
        "([x, y, shot]) => { const n = document.elementFromPoint(x, y); return !!n && n.matches(`.stage[data-shot='${shot}'] canvas`); }",
        [cx + dx, cy + dy, shot])]


def planned_camera_end(script: dict, index: int) -> list[float]:
    """The planner's last camera position (x, z) of one shot of a script."""
    from daotai.plan.planner import plan_script
    from daotai.script.load import validate_script

    shot = plan_script(validate_script(script, source="test")).shots[index]
    m = shot.cameras[-1].cam_to_world
    return [m[3], m[11]]


def test_results_offer_every_deliverable_full_contact_sheet_plain_qc_and_board_pdf(page, live, shots_dir, tmp_path):
    pdftoppm, pdftotext = shutil.which("pdftoppm"), shutil.which("pdftotext")
    load(page, "quick")
    page.select_option("#preset-select", "")
    page.click("#submit-btn")
    job = page.locator(".job").first
    job.locator('.job-status[data-status=completed], .job-status[data-status=failed]').wait_for(timeout=120_000)
    assert job.locator(".job-status").get_attribute("data-status") == "completed", job.inner_text()
    outputs = httpx.get(f"{live.url}/v1/jobs/{job.get_attribute('data-job')}").json()["outputs"]
    # Every deliverable the job lists is a download link, the per-shot ones in a table by shot and kind.
    links = set(job.locator(".downloads-box a[data-output]").evaluate_all("ns => ns.map(a => a.dataset.output)"))
    assert links == {o["name"] for o in outputs}
    assert job.locator(".shot-files tbody tr").count() == 2
    # The contact sheet opens at its own size.
    job.locator(".sheet-full").click()
    full = page.locator("#sheet-dialog img")
    page.wait_for_function("(img) => img.complete && img.naturalWidth > 0", arg=full.element_handle())
    assert full.evaluate("img => img.getBoundingClientRect().width") == pytest.approx(full.evaluate("img => img.naturalWidth"), abs=1)
    snap(page, shots_dir, "contact_sheet_full.png")
    page.locator("#sheet-dialog .dialog-close").click()
    # QC: per shot, one verdict per check, failures first.
    for li in job.locator(".qc-list > li").all():
        checks = li.locator(".qc-check").evaluate_all("ns => ns.map(n => [n.dataset.check, n.dataset.verdict])")
        names = [name for name, _ in checks]
        assert len(names) == len(set(names)) and "camera" in names and "format" in names
        verdicts = [v for _, v in checks]
        assert verdicts == sorted(verdicts, key=lambda v: v != "failed")
        assert (li.get_attribute("class") == "qc-ok") == all(v == "ok" for v in verdicts)
    # Storyboard pages: printed to PDF by Chromium's own print path (print CSS), one page per N shots.
    job.locator(".boards-btn").click()
    page.wait_for_selector("#boards[data-ready=true]")
    assert page.locator("#boards .board-panel img").count() == 2
    snap(page, shots_dir, "boards_screen.png", "#boards")
    with page.expect_download() as info:
        page.locator("#boards .boards-png").first.click()
    from PIL import Image

    with Image.open(info.value.path()) as board:
        assert board.size == (1754, 1240)  # A4 landscape at 150 dpi
        assert len(board.convert("L").getcolors(256 * 256) or []) > 16  # frames and text, not a blank page
        for folder in shots_dir:
            board.save(folder / "boards_page1.png")
    pdf = tmp_path / "boards.pdf"
    page.emulate_media(media="print")
    page.pdf(path=str(pdf), prefer_css_page_size=True, print_background=True)
    page.emulate_media(media="screen")
    assert pdf.read_bytes().startswith(b"%PDF")
    if pdftoppm is None or pdftotext is None:
        pytest.skip("poppler-utils (pdftoppm, pdftotext) is not installed: the PDF was written but not rendered")
    subprocess.run([pdftoppm, "-r", "40", "-png", str(pdf), str(tmp_path / "board")], check=True, timeout=60)
    pages = sorted(tmp_path.glob("board*.png"))
    assert len(pages) == 1  # two shots fit one page
    for folder in shots_dir:
        shutil.copy(pages[0], folder / "boards_pdf_page1.png")
    text = subprocess.run([pdftotext, "-layout", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    for shot in json.loads((WEB_EXAMPLES / "quick.json").read_text())["shots"]:
        assert shot["action"] in text and shot["shot_id"] in text


def test_spelled_out_values_show_what_the_service_reads(page, live, tmp_path):
    """Phrases, colour names, durations as text and other field names: shown as the service reads them, exported as written."""
    script = json.loads((WEB_EXAMPLES / "quick.json").read_text())
    lin = script["characters"][0]
    del lin["colour"]
    lin["color"] = "brown"
    script["shots"][0]["camera"] = "pan left 20°"
    script["shots"][1]["duration"] = "2.5 s"
    script["shots"][1]["character"] = script["shots"][1].pop("subject")
    script["scene"]["time"] = script["scene"].pop("time_of_day")
    read = httpx.post(f"{live.url}/v1/schema/read", json=script).json()
    assert read["valid"] is True and read["script"]["shots"][0]["camera"]["type"] == "pan"
    saved = tmp_path / "spelled.json"
    saved.write_text(json.dumps(script, ensure_ascii=False))
    page.set_input_files("#import-file", str(saved))
    page.wait_for_function("""() => (document.querySelector('[data-path="shots[0].camera.type"]') || {}).value === 'pan'""")
    wait_checked(page)
    rotate = page.get_attribute('[data-path="shots[0].camera.rotate[0]"]', "placeholder")
    assert float(rotate) == pytest.approx(read["script"]["shots"][0]["camera"]["rotate"][0])
    hex_colour = "#" + "".join(f"{round(c * 255):02x}" for c in read["script"]["characters"][0]["colour"])
    assert page.input_value('.card[data-kind=character][data-index="0"] input[type=color]') == hex_colour
    assert page.input_value('[data-path="characters[0].colour"]') == "brown"
    assert page.input_value('[data-path="shots[1].duration"]') == "2.5 s"
    assert page.input_value('[data-path="shots[1].subject"]') == "mei"
    assert page.input_value('[data-path="scene.time_of_day"]') == "day"
    page.locator('[data-path="title"]').fill("Spelled out")
    wait_checked(page)
    exported = export(page)
    assert {**exported, "title": script["title"]} == script
    # Dragging the pan's aim writes the pan explicitly (the phrase's own amount would contradict it).
    drag_mark(page, "s01", "aim", 0, 30)
    wait_checked(page)
    camera = export(page)["shots"][0]["camera"]
    assert camera["type"] == "pan" and camera["rotate"][0] != 0
