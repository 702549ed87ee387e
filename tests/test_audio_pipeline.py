"""Sound through the pipeline: a backend's Audio into its shot file and the mix, a soundtrack under
a previz animatic, A/V sync measured on clicks, and the checks that refuse bad audio."""

from __future__ import annotations

import json
import wave
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from daotai.encode.audio import ROLE_MIX, ROLE_SHOT, ROLE_SOUNDTRACK, decode_audio, probe_audio
from daotai.encode.read import probe
from daotai.errors import EncodeError, ScriptError
from daotai.events import Audio, Frame, Notice, Progress
from daotai.plan.planner import plan_script
from daotai.run.pipeline import run
from daotai.run.records import Finished, ShotRecord
from daotai.run.settings import PipelineSettings
from daotai.run.shots import render_shot
from daotai.script.load import validate_script

FPS = 24
SIZE = "160x96"
CLICK_FRAMES = (10, 30, 55, 80)  # sequence frames where the soundtrack clicks


def script_data(**extra) -> dict:
    data = {
        "fps": FPS, "size": SIZE, "scene": {"name": "sound stage", "set_pieces": []},
        "characters": [{"id": "hero"}],
        "shots": [
            {"shot_id": "a", "duration": 1.5, "subject": "hero"},
            {"shot_id": "b", "duration": 1.5, "subject": "hero", "transition": {"type": "crossfade", "duration": 0.25}},
            {"shot_id": "c", "duration": 1.0, "subject": "hero", "transition": "cut"},
        ],
    }
    data.update(extra)
    return data


def write_wav(path: Path, samples: np.ndarray, rate: int) -> Path:
    """16-bit PCM WAV of (N, C) float samples."""
    with wave.open(str(path), "wb") as handle:
        handle.setnchannels(samples.shape[1])
        handle.setsampwidth(2)
        handle.setframerate(rate)
        handle.writeframes((np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes())
    return path


def click_track(seconds: float, rate: int, click_times: list[float], level: float = 0.1) -> np.ndarray:
    """(N, 2) quiet 220 Hz tone with 1 ms full clicks at the given times."""
    t = np.arange(int(seconds * rate)) / rate
    tone = level * np.sin(2 * np.pi * 220 * t)
    for when in click_times:
        i = int(round(when * rate))
        tone[i:i + rate // 1000] = 0.9
    return np.stack([tone, tone], axis=1)


def click_times(samples: np.ndarray, rate: int, threshold: float = 0.6) -> list[float]:
    """Start time (s) of every click: runs above the threshold, separated by more than 50 ms."""
    loud = np.flatnonzero(np.abs(samples).max(axis=1) > threshold)
    if loud.size == 0:
        return []
    starts = loud[np.r_[True, np.diff(loud) > rate // 20]]
    return [float(i) / rate for i in starts]


def collect(events) -> tuple[list, Finished]:
    seen = []
    for event in events:
        if isinstance(event, Finished):
            return seen, event
        seen.append(event)
    raise AssertionError("no Finished event")


# ------------------------------------------------------------------ soundtrack under previz


@pytest.fixture(scope="module")
def soundtrack_render(tmp_path_factory):
    folder = tmp_path_factory.mktemp("soundtrack")
    rate = 44100
    times = [f / FPS for f in CLICK_FRAMES]
    write_wav(folder / "clicks.wav", click_track(6.0, rate, times), rate)
    data = script_data(soundtrack={"path": "clicks.wav", "gain_db": 0})
    data["shots"][0]["dialogue"] = [{"character": "hero", "line": "Hello."}]
    data["shots"][1]["sound"] = "rain"
    (folder / "script.json").write_text(json.dumps(data))
    plan = plan_script(validate_script(data))
    events, finished = collect(run(plan, folder / "out", PipelineSettings(controls=False, camera_qc=False),
                                   source=folder / "script.json"))
    return plan, folder / "out", events, finished


def test_each_shot_gets_its_soundtrack_slice_and_is_checked_while_later_shots_render(soundtrack_render):
    """A silent shot's slice is muxed as soon as the shot is finished, so it is handed to the QC workers
    then, not after the last shot (the order of the events shows it)."""
    from daotai.render.base import Progress

    _, _, events, _ = soundtrack_render
    said = [(e.stage, e.shot_id, e.message) for e in events if isinstance(e, Progress)]
    sliced = {shot: said.index(("encode", shot, "soundtrack slice added")) for shot in ("a", "b", "c")}
    last_render = {shot: max(i for i, (stage, sid, _) in enumerate(said) if stage == "render" and sid == shot)
                   for shot in ("a", "b", "c")}
    assert sliced["a"] < last_render["c"] and sliced["b"] < last_render["c"], said
    assert all(sliced[shot] > last_render[shot] for shot in sliced)


def test_sequence_carries_the_soundtrack_for_exactly_the_pictures_length(soundtrack_render):
    plan, out, _, _ = soundtrack_render
    video = probe(out / "sequence.mp4")
    info = probe_audio(out / "sequence.mp4")
    assert info is not None and info.codec == "aac" and info.rate == 48000 and info.channels == 2
    assert info.role == ROLE_MIX and info.start_s == 0
    samples, rate, first = decode_audio(out / "sequence.mp4")
    assert first == 0.0
    picture = plan.total_frames / FPS
    assert video.duration_s == pytest.approx(picture)
    assert abs(samples.shape[0] / rate - picture) <= 1024 / rate  # one AAC frame


def test_clicks_land_within_a_frame_in_the_sequence_and_every_shot(soundtrack_render):
    plan, out, _, _ = soundtrack_render
    samples, rate, _ = decode_audio(out / "sequence.mp4")
    found = click_times(samples, rate)
    planned = [f / FPS for f in CLICK_FRAMES if f < plan.total_frames]
    assert len(found) == len(planned)
    assert all(abs(a - b) < 1 / FPS for a, b in zip(found, planned, strict=True)), (found, planned)
    for shot in plan.shots:
        info = probe_audio(out / "shots" / f"{shot.shot_id}.mp4")
        assert info is not None and info.role == ROLE_SOUNDTRACK and info.start_s == 0
        assert abs(info.duration_s - shot.frames / FPS) <= 1024 / 48000
        shot_samples, shot_rate, first = decode_audio(out / "shots" / f"{shot.shot_id}.mp4")
        assert first == 0.0
        inside = [f for f in CLICK_FRAMES if shot.start_frame + 1 <= f < shot.start_frame + shot.frames - 1]
        heard = click_times(shot_samples, shot_rate)
        assert len(heard) == len(inside), (shot.shot_id, heard, inside)
        for when, frame in zip(heard, inside, strict=True):
            assert abs(when - (frame - shot.start_frame) / FPS) < 1 / FPS


def test_silent_backend_with_dialogue_gets_one_notice(soundtrack_render):
    _, _, events, finished = soundtrack_render
    notices = [e for e in events if isinstance(e, Notice) and "makes no sound" in e.text]
    assert len(notices) == 1 and "a, b" in notices[0].text
    assert finished.result.qc_ok


def test_scripts_without_sound_get_no_audio_track(tmp_path):
    plan = plan_script(validate_script(script_data()))
    collect(run(plan, tmp_path / "out", PipelineSettings(controls=False, camera_qc=False)))
    assert probe_audio(tmp_path / "out" / "sequence.mp4") is None
    assert probe_audio(tmp_path / "out" / "shots" / "a.mp4") is None


def test_missing_or_uploaded_soundtrack_is_refused_before_rendering(tmp_path):
    for path, rule in (("nowhere.wav", "does not exist"), ("upload:aud_0123", "upload")):
        plan = plan_script(validate_script(script_data(soundtrack=path)))
        with pytest.raises(ScriptError) as caught:
            collect(run(plan, tmp_path / "out", PipelineSettings(controls=False), source=tmp_path / "s.json"))
        assert caught.value.issues[0].path == "soundtrack.path" and rule in caught.value.issues[0].rule
        assert not (tmp_path / "out" / "shots" / "a.mp4").exists()


# ------------------------------------------------------------------ a backend that makes sound


class SoundBackend:
    """Flat frames and stereo 32 kHz sound: a tone per shot with a click at frame ``CLICK_AT``."""

    name = "sound-fake"
    RATE = 32000
    CLICK_AT = 12

    def __init__(self, seconds_error: float = 0.0, extra: bool = False):
        self.seconds_error = seconds_error
        self.extra = extra

    def render(self, job, ctx):
        plan, shot = job.plan, job.shot
        n = int(round((shot.frames / plan.fps + self.seconds_error) * self.RATE))
        t = np.arange(n) / self.RATE
        tone = 0.2 * np.sin(2 * np.pi * (300 + 100 * shot.index) * t)
        click = int(self.CLICK_AT / plan.fps * self.RATE)
        tone[click:click + 32] = 0.95
        sound = np.stack([tone, -tone], axis=1).astype(np.float32)
        yield Audio(shot.shot_id, sound, self.RATE, "stereo")  # before the frames: any time is allowed
        if self.extra:
            yield Audio(shot.shot_id, sound, self.RATE, "stereo")
        for index in range(shot.frames):
            yield Frame(shot.shot_id, index, np.full((plan.height, plan.width, 3), 60 + 40 * shot.index, np.uint8))
        yield Progress("render", shot.shot_id, shot.frames, shot.frames)

    def close(self):
        pass


class FakeExecutor:
    def __init__(self, backend):
        self.backend = backend

    def render_shots(self, plan, out_dir, settings, ctx, source, health):
        records = []
        for shot in plan.shots:
            record = ShotRecord(shot.shot_id)
            yield from render_shot(self.backend, plan, shot, out_dir, settings, ctx, record)
            records.append(record)
        return records


def test_backend_audio_reaches_shot_files_and_the_mix(tmp_path):
    data = script_data()
    data["shots"][2]["audio"] = {"gain_db": -6}
    plan = plan_script(validate_script(data))
    settings = PipelineSettings(controls=False, camera_qc=False)
    _, finished = collect(run(plan, tmp_path / "out", settings, executor=FakeExecutor(SoundBackend())))
    out = tmp_path / "out"
    for shot in plan.shots:
        path = out / "shots" / f"{shot.shot_id}.mp4"
        info = probe_audio(path)
        assert info.role == ROLE_SHOT and info.rate == 48000 and info.channels == 2 and info.start_s == 0
        samples, rate, first = decode_audio(path)
        assert first == 0 and abs(samples.shape[0] - shot.frames * rate // FPS) <= 1024
        assert np.corrcoef(samples[:, 0], samples[:, 1])[0, 1] < -0.99  # the right channel is inverted: stereo kept
        (when,) = click_times(samples, rate, 0.7)
        assert abs(when - SoundBackend.CLICK_AT / FPS) < 1 / FPS
    mix, rate, _ = decode_audio(out / "sequence.mp4")
    heard = click_times(mix, rate, 0.35)
    planned = [(s.start_frame + SoundBackend.CLICK_AT) / FPS for s in plan.shots]
    assert len(heard) == 3 and all(abs(a - b) < 1 / FPS for a, b in zip(heard, planned, strict=True)), (heard, planned)
    peaks = [np.abs(mix[int(t * rate):int(t * rate) + 100]).max() for t in heard]
    assert peaks[2] / peaks[0] == pytest.approx(0.5, abs=0.08)  # shot c at -6 dB
    assert np.abs(mix).max() < 0.999
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["shots"][0]["audio"]["source"] == "backend"
    assert finished.result.qc_ok


@pytest.mark.parametrize("error, extra, message", [(0.1, False, "half a frame"), (0.0, True, "second Audio")])
def test_bad_backend_audio_is_an_encode_error(tmp_path, error, extra, message):
    plan = plan_script(validate_script(script_data()))
    backend = SoundBackend(seconds_error=error, extra=extra)
    with pytest.raises(EncodeError, match=message):
        collect(run(plan, tmp_path / "out", PipelineSettings(controls=False), executor=FakeExecutor(backend)))
    assert not (tmp_path / "out" / "shots" / "a.mp4").exists()


def test_audio_within_half_a_frame_is_accepted_and_fitted(tmp_path):
    plan = plan_script(validate_script(script_data()))
    shot = plan.shots[2]
    record = ShotRecord(shot.shot_id)
    backend = SoundBackend(seconds_error=0.4 / FPS)
    from daotai.render.base import RunContext

    (tmp_path / "shots").mkdir()
    list(render_shot(backend, plan, shot, tmp_path, PipelineSettings(controls=False), RunContext(), record))
    info = probe_audio(tmp_path / "shots" / "c.mp4")
    assert info.duration_s == pytest.approx(float(Fraction(shot.frames, FPS)), abs=1 / 48000)
    assert record.audio["rate"] == 32000


def test_encoder_processes_and_audio_together(tmp_path):
    """Shots encoded by the encoder-process pool get their sound muxed after the picture, unshifted."""
    from daotai.encode.procsink import EncoderPool
    from daotai.render.base import RunContext

    plan = plan_script(validate_script(script_data()))
    (tmp_path / "shots").mkdir()
    with EncoderPool() as pool:
        pool.start("shot")
        pool.wait_ready()
        for shot in plan.shots[:2]:
            record = ShotRecord(shot.shot_id)
            list(render_shot(SoundBackend(), plan, shot, tmp_path, PipelineSettings(controls=False), RunContext(),
                             record, pool))
            samples, rate, first = decode_audio(tmp_path / "shots" / f"{shot.shot_id}.mp4")
            assert first == 0 and probe(tmp_path / "shots" / f"{shot.shot_id}.mp4").frames == shot.frames
            (when,) = click_times(samples, rate, 0.7)
            assert abs(when - SoundBackend.CLICK_AT / FPS) < 1 / FPS
    assert sorted(p.name for p in (tmp_path / "shots").iterdir()) == ["a.mp4", "b.mp4"]  # no temp files left


def test_clicks_stay_in_sync_after_enhance_interpolate_60(soundtrack_render, tmp_path):
    from daotai.post.enhance import enhance, parse_steps

    plan, out, _, _ = soundtrack_render
    enhance(out / "sequence.mp4", tmp_path / "smooth.mp4", parse_steps("interpolate=60"))
    video = probe(tmp_path / "smooth.mp4")
    assert video.fps == 60 and video.duration_s == pytest.approx(plan.total_frames / FPS, abs=1 / 60)
    samples, rate, first = decode_audio(tmp_path / "smooth.mp4")
    assert first == 0
    planned = [f / FPS for f in CLICK_FRAMES if f < plan.total_frames]
    found = click_times(samples, rate)
    assert len(found) == len(planned) and all(abs(a - b) < 1 / FPS for a, b in zip(found, planned, strict=True))


def test_readme_smallest_script_with_a_soundtrack_through_the_cli(tmp_path):
    """The README's smallest script plus a soundtrack: `daotai render` gives a sequence whose sound lasts
    the picture (±1 audio frame) and whose clicks land within a frame of their planned times."""
    import subprocess
    import sys

    rate = 44100
    frames = (12, 40, 77)
    write_wav(tmp_path / "clicks.wav", click_track(5.0, rate, [f / FPS for f in frames]), rate)
    script = {"scene": "office",
              "characters": [{"id": "char_001", "appearance": "wearing glasses, blue shirt"}],
              "shots": [{"shot_id": "s01", "camera": {"type": "dolly", "motion": [0.1, 0.0, -0.3]},
                         "subject": "char_001", "framing": "medium_shot"}],
              "soundtrack": "clicks.wav"}
    (tmp_path / "script.json").write_text(json.dumps(script))
    done = subprocess.run([sys.executable, "-m", "daotai.cli", "render", str(tmp_path / "script.json"), "-o",
                           str(tmp_path / "out"), "--preset", "preview", "--strict"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    qc = json.loads((tmp_path / "out" / "qc.json").read_text())
    assert qc["sequence"]["audio"]["ok"] and qc["shots"][0]["audio"]["ok"]
    samples, rate_out, first = decode_audio(tmp_path / "out" / "sequence.mp4")
    assert first == 0 and abs(samples.shape[0] / rate_out - 4.0) <= 1024 / rate_out
    found = click_times(samples, rate_out)
    assert len(found) == len(frames)
    assert all(abs(a - f / FPS) < 1 / FPS for a, f in zip(found, frames, strict=True))
