"""x264 on a fixed number of frame threads: the same bytes whatever cores the process may use, a
keyframe every second, and settings that enter the shot cache key."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from fractions import Fraction

import pytest

from daotai.encode.remux import keyframes, stream_format
from daotai.encode.video import FRAME_THREADS, EncodeSettings, VideoWriter
from daotai.plan.planner import plan_script
from daotai.run.cache import key_fields, shot_key
from daotai.script.load import validate_script

# Encodes 40 textured, moving 192x108 frames with the default settings and prints the file's sha256
# and the CPUs it was allowed to use; argv[2] is a comma-separated CPU list for sched_setaffinity.
ENCODE = textwrap.dedent("""
    import hashlib, os, sys
    import numpy as np
    from daotai.encode.video import VideoWriter
    cpus = {int(c) for c in sys.argv[2].split(",")}
    os.sched_setaffinity(0, cpus)
    rng = np.random.default_rng(11)
    texture = rng.integers(0, 256, (108, 400, 3), dtype=np.uint8)
    with VideoWriter(sys.argv[1], 192, 108, 24) as writer:
        for i in range(40):
            frame = np.ascontiguousarray(texture[:, 3 * i:3 * i + 192])
            frame[40:60, (5 * i) % 170:(5 * i) % 170 + 20] = (250, 40, 40)  # a block moving the other way
            writer.write(frame)
    print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest(), sorted(os.sched_getaffinity(0)))
""")


def _encode_on(path, cpus: set[int]) -> tuple[str, str]:
    """Run the encode in a fresh process limited to ``cpus``: (sha256, the affinity it ran with)."""
    done = subprocess.run([sys.executable, "-c", ENCODE, str(path), ",".join(map(str, sorted(cpus)))],
                          capture_output=True, text=True, check=True, timeout=120)
    digest, affinity = done.stdout.split(" ", 1)
    return digest, affinity.strip()


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is a Linux call")
def test_threaded_x264_writes_the_same_bytes_on_one_core_and_on_all_of_them(tmp_path):
    cpus = sorted(os.sched_getaffinity(0))
    runs = [_encode_on(tmp_path / "one.mp4", {cpus[0]}), _encode_on(tmp_path / "last.mp4", {cpus[-1]}),
            _encode_on(tmp_path / "all.mp4", set(cpus)), _encode_on(tmp_path / "again.mp4", set(cpus))]
    assert runs[0][1] == f"[{cpus[0]}]" and runs[2][1] == str(cpus)  # the limits did apply
    assert len({digest for digest, _ in runs}) == 1, runs
    options = (tmp_path / "one.mp4").read_bytes()
    assert f" threads={FRAME_THREADS} ".encode() in options and b" sliced_threads=0 " in options


def test_a_keyframe_starts_every_second_and_the_format_follows_the_settings(tmp_path):
    import numpy as np

    rng = np.random.default_rng(3)
    path = tmp_path / "gop.mp4"
    with VideoWriter(path, 64, 48, Fraction(25), EncodeSettings()) as writer:
        for _ in range(80):
            writer.write(rng.integers(90, 110, (48, 64, 3), dtype=np.uint8))  # noise: no scene cut
    found = keyframes(path)
    assert found[0] == 0 and len(found) >= 4
    assert max(np.diff((*found, 80))) <= 25  # never a GOP longer than 1 s (x264 may start one early)
    assert b" keyint=25 " in stream_format(path).encoder_options


def _key(encode: EncodeSettings) -> str:
    data = {"fps": 24, "size": "160x96", "seed": 5, "characters": [{"id": "ana"}],
            "shots": [{"shot_id": "a", "duration": 0.5, "subject": "ana"}]}
    plan = plan_script(validate_script(data))
    return shot_key(key_fields(plan, plan.shots[0], backend="previz", options={}, controls=False, encode=encode,
                               source=None, model=None, memo={}))


def test_thread_count_and_gop_length_are_part_of_a_shots_cache_key():
    # they change a shot's bytes, so a shot cached with other values is rendered again, not reused
    base = EncodeSettings()
    keys = {_key(base), _key(replace(base, threads=1)), _key(replace(base, keyint_s=2.0))}
    assert len(keys) == 3
    assert _key(EncodeSettings()) == _key(base)


def test_the_same_frames_hash_the_same_in_process_too(tmp_path):
    import numpy as np

    frames = [np.full((48, 64, 3), (i * 9) % 256, np.uint8) for i in range(30)]
    digests = set()
    for name in ("a.mp4", "b.mp4"):
        with VideoWriter(tmp_path / name, 64, 48, 24) as writer:
            for frame in frames:
                writer.write(frame)
        digests.add(hashlib.sha256((tmp_path / name).read_bytes()).hexdigest())
    assert len(digests) == 1
