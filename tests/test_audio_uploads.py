"""Sound files sent to the service are decoded in the sandbox: type from the bytes, duration and
size caps; hostile ones (truncated, forged lengths, wrong type, empty) get 4xx and the server lives on."""

from __future__ import annotations

import io
import json
import struct
import wave
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from daotai.server.images import ImageRejected, check_sound, sound_container

RATE = 48000


def wav_bytes(seconds: float = 1.0, rate: int = RATE) -> bytes:
    buffer = io.BytesIO()
    t = np.arange(int(seconds * rate)) / rate
    tone = (0.3 * np.sin(2 * np.pi * 440 * t) * 32767).astype("<i2")
    with wave.open(buffer, "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(rate)
        handle.writeframes(tone.tobytes())
    return buffer.getvalue()


def encoded(fmt: str, codec: str, seconds: float = 1.0) -> bytes:
    """A sound file made by PyAV in memory (FLAC, MP3, Ogg/Opus, M4A)."""
    import av

    buffer = io.BytesIO()
    rate = 48000
    with av.open(buffer, "w", format=fmt) as container:
        stream = container.add_stream(codec, rate=rate, layout="mono")
        t = np.arange(int(seconds * rate)) / rate
        samples = (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)[None, :]
        frame = av.AudioFrame.from_ndarray(samples, format="flt", layout="mono")
        frame.sample_rate = rate
        frame.pts = 0
        frame.time_base = Fraction(1, rate)
        for packet in stream.encode(frame):
            container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return buffer.getvalue()


@pytest.mark.parametrize("fmt, codec, kind", [("flac", "flac", "audio/flac"), ("mp3", "libmp3lame", "audio/mpeg"),
                                              ("ogg", "libopus", "audio/ogg"), ("ipod", "aac", "audio/mp4")])
def test_common_sound_files_are_read_from_their_bytes(tmp_path, fmt, codec, kind):
    checked = check_sound(encoded(fmt, codec), tmp_path)
    assert checked.content_type == kind and checked.seconds == pytest.approx(1.0, abs=0.1)
    assert list(tmp_path.iterdir()) == []  # nothing left in staging


def test_wav_is_read_and_measured(tmp_path):
    checked = check_sound(wav_bytes(2.0), tmp_path)
    assert (checked.codec, checked.rate, checked.channels, checked.content_type) == ("pcm_s16le", RATE, 1, "audio/wav")
    assert checked.seconds == pytest.approx(2.0)


def forged_length(data: bytes) -> bytes:
    """A WAV whose data chunk claims ~4 GB (about 12 hours) while holding one second."""
    forged = bytearray(data)
    at = forged.find(b"data")
    forged[at + 4:at + 8] = struct.pack("<I", 0xFFFFFF00)
    return bytes(forged)


@pytest.mark.parametrize("name, data, status, code", [
    ("empty", b"", 400, "empty_file"),
    ("text", b"hello, this is not sound" * 10, 415, "unsupported_sound_type"),
    ("truncated_wav", wav_bytes()[:200], 400, "invalid_sound"),
    ("forged_length", forged_length(wav_bytes()), 400, "invalid_sound"),
    ("flac_magic_then_garbage", b"fLaC" + b"\x00garbage" * 64, 400, "invalid_sound"),
    ("mp3_sync_then_garbage", b"\xff\xfb" + bytes(range(256)) * 4, 400, "invalid_sound"),
])
def test_hostile_sound_is_refused(tmp_path, name, data, status, code):
    with pytest.raises(ImageRejected) as caught:
        check_sound(data, tmp_path)
    assert (caught.value.status, caught.value.code) == (status, code), str(caught.value)
    assert str(caught.value).startswith("file: ")
    assert not any(tmp_path.iterdir()) if tmp_path.exists() else True


def test_duration_cap(tmp_path):
    with pytest.raises(ImageRejected) as caught:
        check_sound(wav_bytes(3.0), tmp_path, max_seconds=2.0)
    assert caught.value.status == 413 and caught.value.code == "sound_too_long"
    flac = encoded("flac", "flac", seconds=3.0)
    with pytest.raises(ImageRejected):
        check_sound(flac, tmp_path, max_seconds=2.0)


def test_images_are_not_mistaken_for_sound():
    from builders import png_bytes

    assert sound_container(png_bytes(8, 8)) is None
    assert sound_container(b"\xff\xd8\xff\xe0" + b"\0" * 20) is None  # JPEG
    assert sound_container(b"RIFF\0\0\0\0WEBPVP8 ") is None


def test_server_refuses_hostile_sound_with_4xx_and_survives(tmp_path):
    pytest.importorskip("fastapi")
    httpx = pytest.importorskip("httpx")
    from daotai.server.app import create_app
    from daotai.server.testing import thread_server

    app = create_app(tmp_path / "data", start_dispatcher=False)
    with thread_server(app) as url:
        cases = {"empty": (b"", 400), "truncated": (wav_bytes()[:200], 400),
                 "forged": (forged_length(wav_bytes()), 400), "garbage_flac": (b"fLaC" + b"\0" * 500, 400)}
        for name, (data, status) in cases.items():
            reply = httpx.post(f"{url}/v1/uploads", files={"file": ("a.wav", data, "audio/wav")}, timeout=30)
            assert reply.status_code == status, (name, reply.text)
            assert reply.json()["error"]["param"] == "file"
        assert httpx.get(f"{url}/health").status_code == 200
        good = httpx.post(f"{url}/v1/uploads", files={"file": ("a.wav", wav_bytes(), "audio/wav")}, timeout=30)
        assert good.status_code == 201 and good.json()["id"].startswith("snd_"), good.text
        again = httpx.post(f"{url}/v1/uploads", files={"file": ("b.wav", wav_bytes(), "audio/wav")}, timeout=30)
        assert again.status_code == 200 and again.json()["id"] == good.json()["id"]  # content addressed
        content = httpx.get(f"{url}/v1/uploads/{good.json()['id']}/content")
        assert content.content == wav_bytes() and content.headers["content-type"] == "audio/wav"
    staging = tmp_path / "data" / "staging"
    assert not staging.exists() or list(staging.iterdir()) == []


def test_a_server_job_renders_under_an_uploaded_soundtrack(tmp_path, monkeypatch):
    """Upload a WAV, name it as the script's soundtrack, run the job: the sequence carries it."""
    pytest.importorskip("fastapi")
    httpx = pytest.importorskip("httpx")
    import av

    from daotai.server.app import create_app
    from daotai.server.testing import thread_server
    from daotai.server.worker import run_job

    app = create_app(tmp_path / "data", start_dispatcher=False)
    store = app.state.store
    script = {"size": "160x96", "fps": 24, "characters": [{"id": "hero"}],
              "shots": [{"shot_id": "a", "duration": 1, "subject": "hero"}]}
    with thread_server(app) as url:
        sound = httpx.post(f"{url}/v1/uploads", files={"file": ("t.wav", wav_bytes(2.0), "audio/wav")}, timeout=30)
        assert sound.status_code == 201, sound.text
        refused = httpx.post(f"{url}/v1/jobs", json={**script, "soundtrack": "music/t.wav"})
        assert refused.status_code == 422 and refused.json()["issues"][0]["path"] == "soundtrack.path"
        unknown = httpx.post(f"{url}/v1/jobs", json={**script, "soundtrack": "upload:snd_" + "0" * 32})
        assert unknown.status_code == 422 and "not a stored upload" in unknown.text
        made = httpx.post(f"{url}/v1/jobs", json={**script, "soundtrack": f"upload:{sound.json()['id']}"})
        assert made.status_code == 202, made.text
    monkeypatch.chdir(tmp_path)  # run_job changes the current folder: restored after
    job = store.claim_next()
    assert run_job(store.data_dir, job.id, job.attempts) == 0
    finished = store.get(job.id)
    assert finished.status == "completed", finished.error_message
    out = store.job_dir(job.id) / "out"
    with av.open(str(out / "sequence.mp4")) as container:
        assert len(container.streams.audio) == 1
    manifest = json.loads((out / "manifest.json").read_text())
    assert any(r["reference"] == f"upload:{sound.json()['id']}" for r in manifest["references"])


def test_sound_and_images_decode_where_packages_come_from_pythonpath(tmp_path):
    """A bare interpreter that finds PyAV, Pillow and daotai only through PYTHONPATH (a container
    image, a portable ComfyUI) still decodes uploads: the isolated decoding child is handed the
    parent's path, since isolated mode ignores PYTHONPATH."""
    import os
    import subprocess
    import sys
    import venv

    bare = tmp_path / "bare"
    venv.EnvBuilder(with_pip=False).create(bare)
    python = bare / "bin" / "python"
    # what this interpreter imports from (its site-packages, and a PYTHONPATH where one feeds it)
    packages = [str(Path(__file__).parents[1] / "src"), *(entry for entry in sys.path if entry)]
    probe = ("import sys, pathlib; from daotai.server.images import check_sound, check_image; "
             "d = pathlib.Path(sys.argv[1]); "
             "print(check_sound(d.joinpath('a.wav').read_bytes(), d / 'staging').seconds); "
             "print(check_image(d.joinpath('a.png').read_bytes(), d / 'staging', 10**6).width)")
    (tmp_path / "a.wav").write_bytes(wav_bytes(1.0))
    from PIL import Image

    Image.new("RGB", (24, 16), (200, 30, 30)).save(tmp_path / "a.png")
    clean = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    assert subprocess.run([str(python), "-c", "import av"], capture_output=True, env=clean).returncode != 0  # bare
    env = {**clean, "PYTHONPATH": os.pathsep.join(packages)}
    done = subprocess.run([str(python), "-c", probe, str(tmp_path)], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["1.0", "24"]
