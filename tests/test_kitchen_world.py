"""A dialogue scene in a kitchen, written in plain words in English and in Chinese, rendered from
the command line and checked on what the render wrote: the previz's depth and mask channels (every
character pixel and every table pixel put back into the world through the depth and the plan's
cameras), the shot videos, qc.json, the storyboard PDF and the subtitles.

Two people sit across a table: a master, reverse over-the-shoulders, a push-in on a close-up, a
reverse close-up and a two-shot. In every frame of every shot the set is behind the subject (no
pixel of void), the table stands between the two, both are seated, each keeps their side of the
frame (the 180 degree line), the push ends with the head in frame, and no name label lies on a
face. The film ends on a fade to black after a wipe, its 2.39:1 picture letterboxed in a 16:9 frame
(the Chinese one is 16:9 throughout), and passes ``--strict``;
a cut that gets someone up with no action saying so fails it, naming the shot.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from daotai.encode.read import decode_frames, decode_gray
from daotai.plan import geometry
from daotai.plan.blocking import SEATED_DROP_SHARE
from daotai.plan.headroom import HEADROOM
from daotai.plan.model import Plan
from daotai.render.previz.control import MM_SKY

pytestmark = pytest.mark.slow  # four command-line renders: 17 s on two idle cores, a minute when shared

ROOT = Path(__file__).resolve().parent.parent
STRICT_FAILED = 7  # the exit status of `daotai render --strict` when a quality check fails
FACE_BAND = (0.875, 0.945)  # the face's rows, shares of the standing height (docs/conventions.md, identity QC)
LABEL_DIFF = 60  # a label's pixels differ from the picture under them by more than this (0..255); codec noise does not


def _shots(lines: dict[str, str], actions: dict[str, str], framings: dict[str, str], push: str) -> list[dict]:
    return [
        {"shot_id": "master", "duration": 1.0, "framing": framings["wide"], "action": actions["sit"]},
        {"shot_id": "ots_mia", "duration": 1.0, "framing": framings["ots"], "subject": "mia",
         "dialogue": [{"character": "mia", "line": lines["mia"]}]},
        {"shot_id": "ots_tom", "duration": 1.0, "framing": framings["ots"], "subject": "tom",
         "dialogue": [{"character": "tom", "line": lines["tom"]}], "transition": {"type": "wipe_right", "duration": 0.25}},
        {"shot_id": "push_mia", "duration": 1.5, "framing": framings["cu"], "subject": "mia", "camera": push},
        {"shot_id": "cu_tom", "duration": 1.0, "framing": framings["cu"], "subject": "tom"},
        {"shot_id": "two", "duration": 1.0, "framing": framings["two"]},
    ]


ENGLISH = {
    "title": "Kitchen", "fps": 12, "size": "320x180 2.39:1 letterbox", "seed": 3, "fade_out": 0.5,
    "scene": {"name": "kitchen", "description": "A small kitchen at night. A table between them."},
    "characters": [{"id": "mia", "name": "Mia", "appearance": "red jacket"},
                   {"id": "tom", "name": "Tom", "appearance": "blue shirt"}],
    "shots": _shots({"mia": "You came back.", "tom": "My keys."},
                    {"sit": "Mia and Tom sit across the table."},
                    {"wide": "master", "ots": "OTS", "cu": "CU", "two": "two_shot"}, "push_in"),
}
CHINESE = {
    "title": "厨房", "fps": 12, "size": "320x180", "seed": 5, "fade_out": 0.5,
    "scene": {"name": "厨房", "description": "夜晚的小厨房，桌子在他们中间。"},
    "characters": [{"id": "mia", "name": "米娅", "appearance": "红色外套"},
                   {"id": "tom", "name": "汤姆", "appearance": "蓝色衬衫"}],
    "shots": _shots({"mia": "你回来了。", "tom": "我的钥匙。"},
                    {"sit": "米娅和汤姆隔着桌子坐着。"},
                    {"wide": "主镜头", "ots": "过肩", "cu": "特写", "two": "双人镜头"}, "推镜头"),
}


def daotai(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "daotai.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, COLUMNS="200"), timeout=300)


def _render(folder: Path, name: str, script: dict, *options: str) -> tuple[subprocess.CompletedProcess, Path]:
    path = folder / f"{name}.json"
    path.write_text(json.dumps(script, ensure_ascii=False), encoding="utf-8")
    out = folder / name
    return daotai("render", str(path), "-o", str(out), "--no-cache", "--strict", *options), out


@pytest.fixture(scope="module", params=["en", "zh"])
def kitchen(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(f"kitchen_{request.param}")
    script = ENGLISH if request.param == "en" else CHINESE
    done, out = _render(folder, "labelled", script, "--boards", "pdf")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    plan = Plan.model_validate_json((out / "plan.json").read_text(encoding="utf-8"))
    yield script, plan, out
    _LIFTED.clear()


_LIFTED: dict[tuple[Path, str], list] = {}


def _lifted(plan: Plan, out: Path, shot_id: str) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per frame of a shot: (depth (H, W) uint16 mm, mask (H, W) uint8, world points (H, W, 3) float32 m);
    decoded once per render."""
    if (out, shot_id) in _LIFTED:
        return _LIFTED[(out, shot_id)]
    shot = next(s for s in plan.shots if s.shot_id == shot_id)
    uv = geometry.pixel_centres(plan.width, plan.height).reshape(-1, 2)
    depths = decode_gray(out / "control" / f"{shot_id}_depth.mkv")
    masks = decode_gray(out / "control" / f"{shot_id}_mask.mkv")
    frames = []
    for camera, depth_mm, mask in zip(shot.cameras, depths, masks, strict=True):
        metres = np.where(depth_mm == MM_SKY, 1e6, depth_mm / 1000.0).reshape(-1)
        world = geometry.unproject(uv, metres, np.reshape(camera.cam_to_world, (4, 4)),
                                   geometry.intrinsics_from_matrix(np.reshape(camera.K, (3, 3))))
        frames.append((depth_mm, mask, world.reshape(plan.height, plan.width, 3).astype(np.float32)))
    _LIFTED[(out, shot_id)] = frames
    return frames


def _mask_value(plan: Plan, shot_id: str, char_id: str) -> int:
    shot = next(s for s in plan.shots if s.shot_id == shot_id)
    return shot.characters.index(char_id) + 1


def test_the_plan_reads_the_words_a_kitchen_two_seated_people_and_a_table(kitchen):
    _, plan, _ = kitchen
    assert plan.scene.set == "kitchen"
    assert [p for p in plan.scene.set_pieces if p.name == "table"]
    for shot in plan.shots:
        for frame in shot.character_frames:
            assert {p.id: p.pose for p in frame} == {"mia": "sit", "tom": "sit"}, shot.shot_id
        assert not shot.warnings, (shot.shot_id, shot.warnings)


def test_every_frame_shows_set_behind_the_people_and_both_seated(kitchen):
    _, plan, out = kitchen
    heights = {c.id: c.height for c in plan.characters}
    for shot in plan.shots:
        for i, (depth, mask, world) in enumerate(_lifted(plan, out, shot.shot_id)):
            # a closed kitchen: every pixel hits a wall, the ceiling, the floor or a person; none the void
            assert not (depth == MM_SKY).any(), (shot.shot_id, i, int((depth == MM_SKY).sum()))
            for char_id in ("mia", "tom"):
                mine = mask == _mask_value(plan, shot.shot_id, char_id)
                if char_id == shot.subject:
                    assert mine.sum() > 200, (shot.shot_id, i, char_id)
                if mine.sum() < 50:
                    continue
                crown = (1.0 - SEATED_DROP_SHARE) * heights[char_id]  # a seated crown, metres above the floor
                top = float(world[mine][:, 1].max())
                assert top < crown + 0.06, (shot.shot_id, i, char_id, top)  # nobody stands


def test_the_table_stands_between_them_and_each_keeps_their_side_of_the_frame(kitchen):
    _, plan, out = kitchen
    first = plan.shots[0].character_frames[0]
    mia, tom = (np.array(next(p for p in first if p.id == c).position) for c in ("mia", "tom"))
    line = (tom - mia) / np.linalg.norm(tom - mia)
    gap = float(np.linalg.norm(tom - mia))
    top = max((p for p in plan.scene.set_pieces if p.name == "table"), key=lambda p: p.position[1] + p.size[1])
    top_y = top.position[1] + top.size[1]
    table_seen: dict[str, int] = {}
    sides: set[bool] = set()
    for shot in plan.shots:
        for _, mask, world in _lifted(plan, out, shot.shot_id):
            along = (world[..., [0, 2]] - mia) @ line  # (H, W) metres along the line from Mia toward Tom
            on_top = (mask == 0) & (np.abs(world[..., 1] - top_y) < 0.02) & (
                np.linalg.norm(world[..., [0, 2]] - np.array([top.position[0], top.position[2]]), axis=-1)
                < 0.5 * max(top.size[0], top.size[2]))
            table_seen[shot.shot_id] = max(table_seen.get(shot.shot_id, 0), int(on_top.sum()))
            people = {c: mask == _mask_value(plan, shot.shot_id, c) for c in ("mia", "tom")}
            if on_top.sum() >= 10:
                assert (along[on_top] > 0.1 * gap).all() and (along[on_top] < 0.9 * gap).all(), shot.shot_id
                if all(m.sum() >= 50 for m in people.values()):
                    seen_at = [float(np.median(along[m])) for m in people.values()]
                    assert min(seen_at) < along[on_top].min() and along[on_top].max() < max(seen_at), shot.shot_id
            if all(m.sum() >= 50 for m in people.values()):
                columns = {c: float(np.median(np.nonzero(m)[1])) for c, m in people.items()}
                sides.add(columns["mia"] < columns["tom"])
    assert table_seen["master"] >= 10 and table_seen["two"] >= 10, table_seen
    assert len(sides) == 1  # Mia is on the same side of the frame in every shot that shows both: the line held


def test_the_push_ends_with_the_head_in_frame(kitchen):
    _, plan, out = kitchen
    shot = next(s for s in plan.shots if s.shot_id == "push_mia")
    assert shot.framing == "close_up"
    first_cam, last_cam = (np.reshape(shot.cameras[i].cam_to_world, (4, 4))[:3, 3] for i in (0, -1))
    assert np.linalg.norm(last_cam - first_cam) > 0.15  # it does push in
    _, mask, _ = _lifted(plan, out, "push_mia")[-1]
    rows = np.flatnonzero((mask == _mask_value(plan, "push_mia", "mia")).any(axis=1))
    assert rows.size and rows[0] >= HEADROOM["close_up"].crown_margin * plan.height - 1, rows[:1]


def test_no_name_label_lies_on_a_face(kitchen):
    from daotai.render.previz.backend import PrevizBackend

    _, plan, out = kitchen
    heights = {c.id: c.height for c in plan.characters}
    bare = PrevizBackend(labels=False)  # the same frames without name labels: the difference is the labels
    labelled_frames = 0
    try:
        for shot in plan.shots:
            ends = (0, shot.frames - 1)
            without = bare.render_frames(plan, shot, set(ends))
            delivered = list(decode_frames(out / "shots" / f"{shot.shot_id}.mp4"))
            for i in ends:
                _, mask, world = _lifted(plan, out, shot.shot_id)[i]
                diff = np.abs(delivered[i].astype(np.int16) - without[i].astype(np.int16)).max(axis=2)
                label = diff > LABEL_DIFF
                labelled_frames += bool(label.any())
                for char_id in ("mia", "tom"):
                    mine = mask == _mask_value(plan, shot.shot_id, char_id)
                    drop = SEATED_DROP_SHARE * heights[char_id]
                    low, high = (share * heights[char_id] - drop for share in FACE_BAND)
                    face = mine & (world[..., 1] > low) & (world[..., 1] < high)
                    assert not (label & face).any(), (shot.shot_id, i, char_id, int((label & face).sum()))
    finally:
        bare.close()
    assert labelled_frames == 2 * len(plan.shots)  # every frame checked has its labels, off the faces


def test_fade_out_wipe_and_aspect_pass_strict_qc_and_boards_open(kitchen):
    script, plan, out = kitchen
    report = json.loads((out / "qc.json").read_text(encoding="utf-8"))
    assert report["ok"] and not report["failures"], report["failures"]
    assert plan.fade_out is not None and plan.fade_out.frames == 6
    assert next(s for s in plan.shots if s.shot_id == "ots_tom").transition.type == "wipe_right"
    frames = np.stack(list(decode_frames(out / "sequence.mp4")))  # (F, H, W, 3)
    width, height = plan.delivery_size
    assert frames.shape == (plan.total_frames, height, width, 3)
    if script is ENGLISH:  # the 2.39:1 picture, letterboxed in the 320x180 frame: black bars above and below
        assert (plan.width, plan.height, plan.letterbox) == (320, 134, (320, 180))
        assert frames[:, :22].mean() < 1 and frames[:, 22 + 134:].mean() < 1  # black, but for codec ringing at the edge
        assert frames[:-6, 22:22 + 134].mean(axis=(1, 2, 3)).min() > 20
    assert frames[-1].mean() < 8 < frames[-7].mean()  # it ends on black, faded from the picture
    data = (out / "boards.pdf").read_bytes()
    assert data.startswith(b"%PDF-") and data.rstrip().endswith(b"%%EOF")
    if shutil.which("pdfinfo") is not None:  # poppler: a PDF reader opens it
        pdfinfo = subprocess.run(["pdfinfo", str(out / "boards.pdf")], capture_output=True, text=True, timeout=60)
        assert pdfinfo.returncode == 0 and "Pages:           1" in pdfinfo.stdout, pdfinfo.stderr
        assert f"Title:           {script['title']}" in pdfinfo.stdout


def test_subtitles_read_back_with_the_dialogue_at_the_shots_times(kitchen):
    import av

    script, plan, out = kitchen
    fps = plan.fps
    expected = []
    for shot in plan.shots:
        for line in next(s for s in script["shots"] if s["shot_id"] == shot.shot_id).get("dialogue", ()):
            speaker = next(c["name"] for c in script["characters"] if c["id"] == line["character"])
            expected.append((round(1000 * (shot.start_frame + shot.transition.frames // 2) / fps),
                             f"{speaker.upper()}: {line['line']}"))
    for name in ("sequence.srt", "sequence.vtt"):
        with av.open(str(out / name)) as container:
            stream = container.streams.subtitles[0]
            cues = [(int(p.pts * p.time_base * 1000), bytes(p).decode("utf-8").strip())
                    for p in container.demux(stream) if p.pts is not None and p.size]
        assert cues == expected, (name, cues)


@pytest.mark.parametrize(("action", "passes"), [("", False), ("汤姆站起来。", True)])
def test_a_cut_that_gets_someone_up_unsaid_fails_strict_qc_naming_the_shot(tmp_path, action, passes):
    names = {"Tom": "汤姆"} if not action.isascii() else {}
    script = {
        "fps": 12, "size": "320x180", "scene": {"name": "kitchen", "description": "A table between them."},
        "characters": [{"id": "mia", "name": "Mia"}, {"id": "tom", "name": names.get("Tom", "Tom")}],
        "shots": [
            {"shot_id": "master", "duration": 0.5, "framing": "wide", "action": "Mia and Tom sit at the table."},
            {"shot_id": "cu_mia", "duration": 0.5, "framing": "CU", "subject": "mia"},
            # the pose gets Tom up at the cut; only the action can say that is meant
            {"shot_id": "tom_up", "duration": 0.5, "framing": "two_shot", "pose": {"tom": "stand"}, "action": action},
        ],
    }
    done, out = _render(tmp_path, "cut", script, "--no-controls")
    report = json.loads((out / "qc.json").read_text(encoding="utf-8"))
    verdicts = {s["shot_id"]: {v["check"]: v for v in s["verdicts"]} for s in report["shots"]}
    if passes:
        assert done.returncode == 0, done.stderr
        assert verdicts["tom_up"]["continuity"]["ok"]
        return
    assert done.returncode == STRICT_FAILED, done.stderr
    bad = verdicts["tom_up"]["continuity"]
    assert not bad["ok"] and "seated at the end of cu_mia and standing at the start of tom_up" in bad["text"]
    assert all(verdicts[s]["continuity"]["ok"] for s in ("cu_mia",)) and "continuity" not in verdicts["master"]
    assert [s["shot_id"] for s in report["shots"] if not s["ok"]] == ["tom_up"]
