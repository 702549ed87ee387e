"""The shot cache key, input by input: everything that changes a shot's pixels or sound changes its
key, by content (a file edited in place under the same name too), and nothing else does. Keys are
computed from plans alone: no render."""

from __future__ import annotations

import copy
import json
import os
import wave
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from daotai.encode.video import EncodeSettings
from daotai.plan.planner import plan_script
from daotai.post.assemble import sample_at
from daotai.run.cache import key_fields, shot_key
from daotai.run.sound import load_soundtrack
from daotai.script.load import validate_script

SCRIPT = {
    "fps": 24, "size": "160x96", "seed": 5,
    "scene": {"name": "street", "description": "a quiet street", "time_of_day": "day",
              "set_pieces": [{"kind": "box", "position": [1.5, 0, -2], "size": [0.5, 0.5, 0.5], "colour": "#884422"}]},
    "soundtrack": {"path": "music.wav", "offset": 0.25, "gain_db": -3},
    "characters": [{"id": "ana", "colour": "#3366cc", "reference_images": ["ana.png"], "voice": "ana.wav"},
                   {"id": "bo", "position": [1.0, -1.0]}],
    "shots": [{"shot_id": "a", "duration": 0.5, "subject": "ana", "camera": "pan_left"},
              {"shot_id": "b", "duration": 0.5, "subject": "bo", "camera": "push_in"},
              {"shot_id": "c", "duration": 0.5, "subject": "ana"}],
}


def write_wav(path: Path, value: int, seconds: float = 2.0) -> None:
    with wave.open(str(path), "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(48000)
        handle.writeframes(np.full(int(48000 * seconds), value, "<i2").tobytes())


@pytest.fixture
def folder(tmp_path):
    write_wav(tmp_path / "music.wav", 3000)
    write_wav(tmp_path / "ana.wav", 1000, 0.5)
    (tmp_path / "ana.png").write_bytes(b"\x89PNG first picture")
    return tmp_path


def key(folder: Path, script: dict, shot: int = 0, **change) -> str:
    plan = plan_script(validate_script(script))
    args = {"backend": "previz", "options": {}, "controls": True, "encode": EncodeSettings(), "model": None}
    args.update(change)
    return shot_key(key_fields(plan, plan.shots[shot], source=folder / "script.json", memo={}, **args))


def edited(**paths) -> dict:
    """SCRIPT with the given fields (path 'scene.time_of_day' as 'scene__time_of_day') replaced."""
    script = copy.deepcopy(SCRIPT)
    for dotted, value in paths.items():
        *parents, last = dotted.split("__")
        node = script
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[int(last) if last.isdigit() else last] = value
    return script


@pytest.mark.parametrize("change", [
    {"scene__time_of_day": "night"},
    {"scene__time_of_day": "dusk"},
    {"scene__set_pieces__0__position": [1.6, 0, -2]},
    {"scene__set_pieces__0__colour": "#884423"},
    {"scene__set_pieces__0__kind": "cylinder"},
    {"scene__set_pieces__0__size": [0.5, 0.6, 0.5]},
    {"scene__set_pieces": []},
    {"scene__description": "a quiet street with lanterns and food stalls"},  # the dressed props
    {"scene__name": "night market"},
    {"scene__palette": [[0.2, 0.3, 0.4]]},
    {"soundtrack__offset": 0.5},
    {"soundtrack__gain_db": -2},
    {"soundtrack": None},
    {"characters__0__colour": "#3366cd"},
    {"characters__0__appearance": "a woman in a red coat"},
    {"characters__0__height": 1.6},
    {"characters__1__position": [1.0, -1.2]},  # someone else on the set
    {"characters__0__reference_images": []},
    {"characters__0__voice": None},
    {"fps": 25},
    {"size": "160x90"},
    {"seed": 6},
    {"shots__0__duration": 0.6},
    {"shots__0__camera": "pan_right"},
    {"shots__0__framing": "close_up"},
    {"shots__0__angle": "high"},
    {"shots__0__seed": 99},
    {"shots__0__action": "ana waves"},
    {"shots__0__audio": {"gain_db": -6}},
    {"shots__0__dialogue": [{"character": "ana", "line": "Hello."}]},
])
def test_every_input_of_a_shot_changes_its_key(folder, change):
    assert key(folder, edited(**change)) != key(folder, SCRIPT), change


def test_the_key_is_stable_and_other_shots_sound_leaves_it_alone(folder):
    base = key(folder, SCRIPT)
    assert key(folder, copy.deepcopy(SCRIPT)) == base
    assert key(folder, edited(shots__2__audio={"gain_db": -6})) == base
    assert key(folder, edited(shots__1__dialogue=[{"character": "bo", "line": "Hi."}])) == base
    assert key(folder, edited(title="another title")) == base


@pytest.mark.parametrize("name, other", [
    ("music.wav", lambda p: write_wav(p, 3001)),
    ("ana.png", lambda p: p.write_bytes(b"\x89PNG other picture")),
    ("ana.wav", lambda p: write_wav(p, 1001, 0.5)),
])
def test_a_file_edited_in_place_changes_the_key_by_its_bytes(folder, name, other):
    base = key(folder, SCRIPT)
    stamp = (folder / name).stat()
    other(folder / name)
    os.utime(folder / name, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))  # even with its old time stamp
    assert (folder / name).stat().st_size == stamp.st_size  # and its old size
    assert key(folder, SCRIPT) != base, name


def test_a_file_restored_to_its_bytes_gives_back_its_key(folder):
    base = key(folder, SCRIPT)
    original = (folder / "ana.png").read_bytes()
    (folder / "ana.png").write_bytes(b"changed")
    assert key(folder, SCRIPT) != base
    (folder / "ana.png").write_bytes(original)
    assert key(folder, SCRIPT) == base  # by content, not by name or time


@pytest.mark.parametrize("change", [{"backend": "wan"}, {"options": {"labels": False}}, {"controls": False}])
def test_the_run_settings_change_the_key(folder, change):
    assert key(folder, SCRIPT, **change) != key(folder, SCRIPT)


def test_fast_modes_step_cache_cadence_and_vae_levers_are_part_of_a_fast_shots_key_only(folder, monkeypatch):
    from daotai.render import speed

    fast = {"backend": "wan", "options": {"speed": "fast"}, "controls": False}
    exact = {"backend": "wan", "options": {"speed": "exact"}, "controls": False}
    before = key(folder, SCRIPT, **fast), key(folder, SCRIPT, **exact), key(folder, SCRIPT)
    monkeypatch.setitem(speed.FAST_STEP_CACHE, "wan", (4, 2, 0.2))  # a retuned cadence, same release
    after = key(folder, SCRIPT, **fast), key(folder, SCRIPT, **exact), key(folder, SCRIPT)
    assert before[0] != after[0]  # a fast shot cached with the old cadence is not reused
    assert before[1:] == after[1:]  # other modes and backends keep their keys
    monkeypatch.setitem(speed.FAST_VAE_LEVERS, "wan", (False, True))  # its decode retuned, same release
    assert key(folder, SCRIPT, **fast) not in (before[0], after[0])
    assert (key(folder, SCRIPT, **exact), key(folder, SCRIPT)) == before[1:]


def test_a_fast_shots_key_holds_the_choices_its_backend_applies():
    """The key reads the same row as the backend: Wan's own cadence for wan, the general one for the MLX
    ports (their samplers skip whole steps only), and H3's VAE kept at its catalog dtype."""
    from daotai.render.speed import computed_steps, fast_choices, levers_for
    from daotai.run.cache import fast_levers

    fast = {"speed": "fast"}
    assert fast_levers("wan", fast)["fast_step_cache"] == list(fast_choices("wan")[0]) != list(fast_choices(None)[0])
    assert fast_levers("h3", fast)["fast_vae"] == [False, False]
    assert (levers_for("fast", "cuda", "h3").vae_bf16, levers_for("fast", "cuda", "h3").vae_channels_last) == (
        False, False)
    pytest.importorskip("mlx.core")
    from daotai.render.wan_mlx import WanMLXBackend
    from daotai.render.wan_vace_mlx import WanVACEMLXBackend

    general = computed_steps(50, levers_for("fast", "mps"))
    for name, backend in (("wan-mlx", WanMLXBackend), ("wan-vace-mlx", WanVACEMLXBackend)):
        assert fast_levers(name, fast)["fast_step_cache"] == list(fast_choices(None)[0])
        assert list(backend(speed="fast")._computed_steps(50)) == general, name


def test_a_shot_that_comes_to_end_the_film_gets_another_key_with_a_soundtrack(folder):
    """The soundtrack is ramped out where the picture ends, and a silent shot's file carries its slice:
    the same shot cut as the last one sounds different, so it must not be reused from the cache."""
    whole = plan_script(validate_script(SCRIPT))
    shorter_script = edited(shots=SCRIPT["shots"][:2])
    shorter = plan_script(validate_script(shorter_script))
    assert whole.shots[1] == shorter.shots[1]  # the same shot plan ...

    def slice_of(plan):
        track = load_soundtrack(plan, folder / "script.json")
        fps = Fraction(*plan.fps_fraction)
        shot = plan.shots[1]
        return track[sample_at(shot.start_frame, fps):sample_at(shot.start_frame + shot.frames, fps)]

    assert not np.array_equal(slice_of(whole), slice_of(shorter))  # ... with other sound
    assert key(folder, shorter_script, shot=1) != key(folder, SCRIPT, shot=1)
    # without a soundtrack the shot's files are the same wherever it stands
    silent = edited(soundtrack=None)
    assert key(folder, dict(silent, shots=silent["shots"][:2]), shot=1) == key(folder, silent, shot=1)


def test_the_key_fields_are_plain_json(folder):
    plan = plan_script(validate_script(SCRIPT))
    fields = key_fields(plan, plan.shots[0], "previz", {}, True, EncodeSettings(), folder / "script.json", None, {})
    assert json.loads(json.dumps(fields)) == fields
    assert fields["references"]["ana.png"] != fields["references"]["ana.wav"]
    assert len(fields["soundtrack"]["file"]) == 64  # the file's sha256, not its name


def chained_keys(folder: Path, script: dict, workflow: str) -> dict[str, str]:
    from daotai.run.reuse import shot_keys
    from daotai.run.settings import PipelineSettings

    model = folder / "model"
    if not model.is_dir():  # written once: the folder's fingerprint is its files' sizes and times
        model.mkdir()
        (model / "weights.safetensors").write_bytes(b"tiny")
    settings = PipelineSettings(backend="h3", options={"model": str(model), "workflow": workflow})
    return shot_keys(plan_script(validate_script(script)), settings, EncodeSettings(), folder / "script.json")


def test_a_shot_that_starts_on_the_last_frame_before_it_changes_with_that_shot(folder):
    # Forced fl2va: each shot starts on the last frame of the shot before, so a change in shot a
    # reaches b and c; with any other workflow b and c keep their keys.
    before = chained_keys(folder, SCRIPT, "fl2va")
    after = chained_keys(folder, edited(shots__0__camera="pan_right"), "fl2va")
    assert all(before[s] != after[s] for s in "abc")
    assert chained_keys(folder, SCRIPT, "fl2va") == before  # still stable
    free_before = chained_keys(folder, SCRIPT, "auto")
    free_after = chained_keys(folder, edited(shots__0__camera="pan_right"), "auto")
    assert free_before["a"] != free_after["a"]
    assert [free_before[s] == free_after[s] for s in "bc"] == [True, True]
    # A change in the last shot leaves the chain before it alone
    late = chained_keys(folder, edited(shots__2__camera="pan_right"), "fl2va")
    assert [before[s] == late[s] for s in "abc"] == [True, True, False]


def test_a_chain_with_a_changed_shot_is_rendered_whole(folder, tmp_path):
    # Reusing the unchanged shots before the change would start the changed one on its previz frame,
    # not on the frame a render without the cache gives it: a chain is reused whole or not at all.
    from daotai.run.cache import ENTRIES, RECORD, ShotCache
    from daotai.run.reuse import chain_cache_misses
    from daotai.run.settings import PipelineSettings

    keys = chained_keys(folder, SCRIPT, "fl2va")
    plan = plan_script(validate_script(SCRIPT))
    cache = ShotCache(tmp_path / "cache")
    def store(shot_id: str) -> None:  # what has() looks for: a finished entry's record
        entry = cache.root / ENTRIES / keys[shot_id]
        entry.mkdir(parents=True)
        (entry / RECORD).write_text("{}")

    for shot_id in "ab":  # c changed since
        store(shot_id)
    model = str(folder / "model")
    assert cache.has(keys["a"]), "the test's stand-in entries must count as cached"
    settings = PipelineSettings(backend="h3", options={"model": model, "workflow": "fl2va"})
    assert chain_cache_misses(plan, settings, cache, keys) == ["a", "b", "c"]
    store("c")
    assert chain_cache_misses(plan, settings, cache, keys) == []
    free = PipelineSettings(backend="h3", options={"model": model, "workflow": "auto"})
    assert chain_cache_misses(plan, free, cache, keys) == []
