"""The previz render estimate: stage costs fitted from timed samples, added up as a run overlaps
its stages, and a real calibration on a small plan."""

from __future__ import annotations

import pytest

from daotai.plan.planner import plan_script
from daotai.run.estimate import (
    PROCESS_START_S,
    Calibration,
    MachineLoad,
    StageCost,
    assembly_encoded_frames,
    busiest_shot,
    calibrate,
    estimate_render,
    others_running,
    sample_shot,
    stored_calibration,
    thread_share,
    two_point,
    two_point_growing,
    whole_render_s,
)
from daotai.script.load import validate_script

SCRIPT = {
    "size": "160x96",
    "fps": 12,
    "characters": [{"id": "hero", "appearance": "red coat"}, {"id": "friend", "appearance": "blue coat"}],
    "shots": [
        {"shot_id": "a", "duration": 2, "characters": ["hero"], "camera": {"type": "dolly", "motion": [0, 0, -0.5]}},
        {"shot_id": "b", "duration": 3, "camera": {"type": "pan", "rotate": [20, 0, 0]}},
        {"shot_id": "c", "duration": 1, "transition": "crossfade"},
    ],
}


def plan():
    return plan_script(validate_script(SCRIPT))


def calibration(qc_per_frame: float = 0.04, others: float = 0.0, cores: int = 2) -> Calibration:
    return Calibration(width=640, height=360, backend_open=0.3, render=StageCost(0.012, 0.1),
                       qc=StageCost(qc_per_frame, 0.0), assemble=StageCost(0.007, 0.02),
                       sequence_check=StageCost(0.003, 0.0), others=others, cores=cores, assemble_encode=0.01,
                       reuse_shot=0.05)


def test_two_point_splits_per_frame_from_per_shot_and_never_goes_negative():
    cost = two_point(12, 0.5, 24, 0.8)
    assert cost.per_frame == pytest.approx(0.025) and cost.per_shot == pytest.approx(0.2)
    assert cost.seconds([24, 48]) == pytest.approx(0.8 + 1.4)
    noisy = two_point(12, 0.9, 24, 0.6)  # the shorter sample ran slower: all of the longer one is per frame
    assert noisy == StageCost(0.6 / 24, 0.0)


def test_checks_that_grow_faster_than_the_shot_are_fitted_with_a_log_term():
    cost = two_point_growing(24, 0.84, 48, 1.74)  # office s01's checks, CPU seconds
    assert cost.per_frame_log > 0 and cost.per_shot == 0
    assert cost.shot_s(24) == pytest.approx(0.84) and cost.shot_s(48) == pytest.approx(1.74)
    assert cost.shot_s(72) == pytest.approx(2.86, rel=0.1)  # measured, not fitted
    assert two_point_growing(24, 1.0, 48, 1.5) == two_point(24, 1.0, 48, 1.5)  # no growth: linear


def test_a_sample_is_a_middle_stretch_of_the_shot_on_its_own():
    p = plan()
    source = busiest_shot(p)
    assert source.shot_id == "b"  # every character, the longest
    sample = sample_shot(source, 12, "calibration_12")
    assert (sample.shot_id, sample.frames, sample.start_frame, sample.transition.type) == ("calibration_12", 12, 0, "cut")
    assert sample.cameras == source.cameras[12:24] and len(sample.character_frames) == 12
    assert sample_shot(source, 1000, "x").frames == source.frames


def test_checks_hide_behind_the_render_when_cores_are_spare_and_add_up_when_they_are_not():
    p = plan()
    frames = p.total_frames
    light = whole_render_s(p, calibration(qc_per_frame=0.001))
    assert light.qc_after == pytest.approx(0.003 * frames)  # only the sequence check is left after assembly
    heavy = whole_render_s(p, calibration(qc_per_frame=0.2))
    assert heavy.total > light.total + 0.1 * 0.2 * frames  # checks that do not fit beside the render come after
    one_core = whole_render_s(p, calibration(qc_per_frame=0.2, cores=1))
    shot_frames = sum(s.frames for s in p.shots)  # a crossfade overlaps two shots: more than the sequence
    encoded = assembly_encoded_frames(p, 12)  # a GOP a second at 12 fps
    expected = (PROCESS_START_S + 0.3 + 0.012 * shot_frames + 0.1 * 3 + 0.01 * encoded + 0.007 * shot_frames + 0.02 * 3
                + 0.2 * shot_frames + 0.003 * frames)
    assert one_core.total == pytest.approx(expected + one_core.deliver)  # everything one after another
    busy = whole_render_s(p, calibration(others=6.0))  # six threads of other programs share the cores
    assert busy.total > 3 * light.total


def test_assembly_encodes_only_the_gops_a_transition_touches():
    p = plan()  # a: 24 frames, b: 36, c: 12 after a crossfade; GOPs of 12 frames
    encoded = assembly_encoded_frames(p, 12)
    overlap = p.shots[2].transition.frames
    # the crossfade's frames at the end of b and the start of c, each side widened to its whole GOP
    assert encoded == 12 + 12 - overlap
    cuts = p.model_copy(update={"shots": p.shots[:2]})
    assert assembly_encoded_frames(cuts, 12) == 0  # cut shots are copied whole
    assert assembly_encoded_frames(p.model_copy(update={"letterbox": (320, 96)}), 12) == p.total_frames


def test_shots_the_cache_gives_back_cost_less_than_rendering_them():
    p = plan()
    cold = whole_render_s(p, calibration())
    some = whole_render_s(p, calibration(), reused={"b"})
    cached = whole_render_s(p, calibration(), reused={s.shot_id for s in p.shots})
    assert cached.total < some.total < cold.total
    assert (cached.render, cached.qc) == (0.0, 0.0) and cached.reuse > 0  # placed, not rendered nor checked
    assert cached.assemble > 0  # the sequence is cut either way


@pytest.mark.slow
def test_the_calibration_is_stored_reused_and_measured_again_for_another_version(tmp_path, monkeypatch):
    import daotai

    monkeypatch.setenv("DAOTAI_CACHE_DIR", str(tmp_path))
    p = plan()
    first, measured = stored_calibration(p, sample=8)
    assert measured and (tmp_path / "calibration.json").is_file()
    again, measured = stored_calibration(p, sample=8)
    assert not measured and again.render == first.render and again.qc == first.qc
    monkeypatch.setattr(daotai, "__version__", daotai.__version__ + ".dev1")
    _, measured = stored_calibration(p, sample=8)
    assert measured  # another daotai: timed again
    (tmp_path / "calibration.json").write_text("not json", encoding="utf-8")
    assert stored_calibration(p, sample=8)[1]  # an unreadable file is measured over


def test_other_programs_are_counted_from_the_machines_cpu_counters():
    before = MachineLoad(at=0.0, busy_s=100.0, idle_s=50.0)
    assert others_running(before, MachineLoad(2.0, 101.0, 52.0), cpu_s=1.0, share=1.0, cores=2) == 0.0  # idle
    half = others_running(before, MachineLoad(2.0, 102.0, 52.0), cpu_s=1.0, share=1.0, cores=2)
    assert half == pytest.approx(0.5)  # another program used half a core, with idle time left
    # no idle time and a busy thread got a third of a core: the two cores were shared with 5 others
    assert others_running(before, MachineLoad(3.0, 106.0, 50.0), cpu_s=1.0, share=1 / 3, cores=2) == pytest.approx(5.0)
    unknown = MachineLoad(0.0, None, None)
    assert others_running(unknown, unknown, cpu_s=1.0, share=0.2, cores=2) == 0.0
    assert 0.0 < thread_share(0.05) <= 1.0


def test_calibration_times_every_stage_here_and_the_estimate_covers_the_whole_render(tmp_path, monkeypatch):
    monkeypatch.setenv("DAOTAI_CACHE_DIR", str(tmp_path))
    p = plan()
    cal = calibrate(p, sample=8)
    assert (cal.width, cal.height) == (160, 96) and cal.cores >= 1 and cal.others >= 0
    for stage in (cal.render, cal.qc, cal.assemble, cal.sequence_check):
        assert stage.shot_s(24) > 0
    assert cal.assemble_encode > 0 and cal.reuse_shot > 0 and cal.process_start > 0 and cal.worker_start > 0
    times = whole_render_s(p, cal)
    assert times.total > times.render + times.assemble > 0
    estimate = estimate_render(p, "previz", {}, controls=True)
    assert estimate is not None and estimate.frames == p.total_frames and all(
        stage in estimate.basis for stage in ("start", "render+encode", "assembly", "QC", "deliver"))
    assert estimate_render(p, "previz", {}, quick=True) is None  # too small to time before a render


def test_a_calibration_stands_for_sets_of_about_its_size_and_its_cast():
    import json
    from pathlib import Path

    from daotai.run.estimate import calibration_key

    def example(name: str):
        return plan_script(validate_script(json.loads((Path(__file__).parent.parent / "examples" / f"{name}.json")
                                                      .read_text(encoding="utf-8"))))

    office = example("office")
    pieces = list(office.scene.set_pieces)
    one_more = office.model_copy(update={"scene": office.scene.model_copy(update={"set_pieces": pieces + pieces[:1]})})
    twice = office.model_copy(update={"scene": office.scene.model_copy(update={"set_pieces": pieces * 2})})
    fewer_cast = office.model_copy(update={"characters": office.characters[:1]})
    key = calibration_key(office, "previz", {}, True)
    assert calibration_key(one_more, "previz", {}, True) == key  # a prop added: the same calibration
    assert calibration_key(twice, "previz", {}, True) != key  # a set twice the size is measured again
    assert calibration_key(fewer_cast, "previz", {}, True) != key
