"""One shot split over two CPU processes (gloo): the same frames as one process, and clean failures.

Tolerance: the split changes only how attention's work is divided (Ulysses: each rank takes
half the heads over the whole sequence) and how the per-token layers are batched, so the
float32 frames may differ in the last bits of a float32; after rounding to 8 bits a pixel may
move by at most one level (1/255). Measured on the tiny models here: 0 levels.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from daotai.errors import BackendError  # noqa: E402
from daotai.events import Frame, Progress  # noqa: E402
from daotai.render.base import RenderJob, RunContext  # noqa: E402

MAX_LEVELS = 1  # 8-bit levels a split render's pixel may differ from the single-process one
SCRIPT = {
    "title": "split", "fps": 16, "size": [64, 64], "seed": 11, "scene": "office",
    "characters": [{"id": "ana", "appearance": "blue shirt"}],
    "shots": [{"shot_id": "s01", "duration": 0.5, "camera": {"type": "dolly", "motion": [0, 0, -0.5]},
               "subject": "ana"}],
}


def plan_at(tmp_path: Path):
    from daotai.plan.planner import plan_script
    from daotai.script.load import load_script

    path = tmp_path / "split.json"
    path.write_text(json.dumps(SCRIPT))
    return plan_script(load_script(path)), path


def render(backend_name: str, model: Path, plan, gpus: int) -> tuple[np.ndarray, list]:
    from daotai.render.registry import create_backend

    backend = create_backend(backend_name, {"model": str(model), "device": "cpu", "steps": 2, "gpus": gpus})
    try:
        events = list(backend.render(RenderJob(plan, plan.shots[0], controls=False), RunContext()))
    finally:
        backend.close()
    return np.stack([e.rgb for e in events if isinstance(e, Frame)]), events  # (F, H, W, 3) uint8


@pytest.mark.slow
@pytest.mark.parametrize("backend_name,fixture", [("wan", "tiny_wan"), ("wan-vace", "tiny_vace"), ("ltx", "tiny_ltx")])
def test_two_processes_render_the_frames_one_process_renders(backend_name, fixture, request, tmp_path):
    model = request.getfixturevalue(fixture)
    plan, _ = plan_at(tmp_path)
    single, _ = render(backend_name, model, plan, gpus=1)
    split, events = render(backend_name, model, plan, gpus=2)
    assert split.shape == single.shape == (plan.shots[0].frames, 64, 64, 3)
    difference = int(np.abs(split.astype(np.int16) - single.astype(np.int16)).max())
    print(f"{backend_name}: max abs difference {difference} levels")  # shown with -s; the report quotes it
    assert difference <= MAX_LEVELS
    assert [e.done for e in events if isinstance(e, Progress) and e.stage == "denoise"] == [1, 2]
    assert any("split over 2 CPU processes" in getattr(e, "text", "") for e in events)
    assert not [p for p in multiprocessing.active_children() if p.name.startswith("daotai-rank-")]


@pytest.mark.slow
def test_a_killed_rank_fails_the_shot_clearly_and_leaves_no_file(tiny_wan, tmp_path):
    from daotai.run.pipeline import run
    from daotai.run.settings import PipelineSettings

    plan, source = plan_at(tmp_path)
    out = tmp_path / "out"
    settings = PipelineSettings(backend="wan", options={"model": str(tiny_wan), "device": "cpu", "steps": 50,
                                                        "gpus": 2}, camera_qc=False)
    with pytest.raises(BackendError, match=r"rank 1 of 2 stopped unexpectedly \(killed by SIGKILL\)"):
        for event in run(plan, out, settings, source=source):
            if isinstance(event, Progress) and event.stage == "denoise" and event.done == 1:
                (rank,) = [p for p in multiprocessing.active_children() if p.name == "daotai-rank-1"]
                os.kill(rank.pid, signal.SIGKILL)
    assert not list(out.glob("shots/*")) if out.exists() else True
    assert not [p for p in multiprocessing.active_children() if p.name.startswith("daotai-rank-")]


@pytest.mark.slow
def test_cancelling_a_split_shot_stops_every_rank_at_the_same_step(tiny_wan, tmp_path):
    from daotai.errors import Cancelled
    from daotai.render.registry import create_backend

    plan, _ = plan_at(tmp_path)
    backend = create_backend("wan", {"model": str(tiny_wan), "device": "cpu", "steps": 6, "gpus": 2})
    ctx = RunContext()
    try:
        with pytest.raises(Cancelled):
            for event in backend.render(RenderJob(plan, plan.shots[0], controls=False), ctx):
                if isinstance(event, Progress) and event.stage == "denoise" and event.done == 1:
                    ctx.cancel.set()
        # Had the ranks stopped at different steps, one would wait in a collective forever and
        # this second render would hang; instead the same group renders the shot in full.
        events = list(backend.render(RenderJob(plan, plan.shots[0], controls=False), RunContext()))
    finally:
        backend.close()
    assert len([e for e in events if isinstance(e, Frame)]) == plan.shots[0].frames


def test_the_vace_plan_splits_the_control_blocks_and_the_main_blocks_alike(tiny_vace):
    from diffusers import WanVACETransformer3DModel

    from daotai.render.neural.parallel import plan_for

    transformer = WanVACETransformer3DModel.from_pretrained(tiny_vace / "transformer")
    plan = plan_for(transformer)
    names = dict(transformer.named_modules())
    assert set(plan) <= set(names) | {""}  # every hooked module exists
    assert plan["vace_blocks.0"]["hidden_states"].split_dim == plan["blocks.0"]["hidden_states"].split_dim == 1
    assert plan["vace_blocks.0"]["control_hidden_states"].split_dim == 1
    assert plan["proj_out"].gather_dim == 1


def test_a_split_the_heads_do_not_divide_is_refused_before_any_work(tiny_wan):
    from diffusers import WanTransformer3DModel

    from daotai.render.neural.parallel import check_divisible

    transformer = WanTransformer3DModel.from_pretrained(tiny_wan / "transformer")  # 2 heads
    with pytest.raises(BackendError, match="gpus: 3 does not divide WanTransformer3DModel's 2 attention heads"):
        check_divisible(transformer, 3)


def test_more_gpus_than_the_host_has_are_refused_before_spawning():
    from daotai.render.neural.parallel import check_world

    with pytest.raises(BackendError, match="gpus: 2 processes need CUDA GPUs or the CPU"):
        check_world(2, "mps", 0)
    if not torch.cuda.is_available():
        with pytest.raises(BackendError, match=r"gpus: 2 GPUs from cuda:0 asked for, but 0 are visible"):
            check_world(2, "cuda", 0)


def test_gpus_is_an_option_of_the_diffusers_backends_and_is_checked():
    from daotai.errors import OptionError
    from daotai.render.registry import spec_for

    for name in ("wan", "wan-vace", "ltx"):
        assert "gpus" in spec_for(name).option_names()
    with pytest.raises(OptionError, match="gpus"):
        spec_for("wan").validate_options({"gpus": 0})


def test_a_split_shot_asks_ray_for_its_gpus_on_one_node():
    from daotai.cluster.runner import actor_resources

    one = actor_resources("wan", None)
    assert one.placement() is None  # a one-GPU actor is scheduled freely
    two = actor_resources("wan", None, gpus=2)
    assert (two.num_gpus, two.num_cpus, two.memory_bytes) == (2, 2, 2 * one.memory_bytes)
    assert two.placement() == ([{"CPU": 2.0, "GPU": 2.0, "memory": float(two.memory_bytes)}], "STRICT_PACK")
    assert actor_resources("previz", None, gpus=2).placement() is None  # CPU backends take no GPUs


@pytest.mark.slow
def test_a_split_shot_actor_lands_in_a_placement_group_of_its_gpus_on_a_real_cluster():
    ray = pytest.importorskip("ray")
    from ray.util.placement_group import placement_group_table
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    from daotai.cluster.runner import _release, actor_resources, reserve_group, worker_count

    # GPUs declared to Ray as resources: the scheduling is real, the devices are not needed.
    ray.init(address="local", num_cpus=4, num_gpus=4, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    try:
        res = actor_resources("wan", "/models/local-folder", gpus=2)
        assert worker_count(res, ray.cluster_resources(), shots=5, wanted=0) == 2  # 4 GPUs: two 2-GPU shots at once
        group = reserve_group(ray, res, RunContext(), 0.2)
        table = placement_group_table(group)
        assert table["strategy"] == "STRICT_PACK" and table["state"] == "CREATED"
        assert list(table["bundles"].values()) == [{"CPU": 2.0, "GPU": 2.0}]

        @ray.remote
        class Probe:
            def where(self):
                context = ray.get_runtime_context()
                return context.get_placement_group_id(), len(ray.get_gpu_ids())

        probe = Probe.options(num_cpus=2, num_gpus=2, scheduling_strategy=PlacementGroupSchedulingStrategy(
            group, placement_group_bundle_index=0)).remote()
        group_id, gpus = ray.get(probe.where.remote(), timeout=60)
        assert (group_id, gpus) == (group.id.hex(), 2)  # the actor sees both of its group's GPUs
        ray.kill(probe)
        _release(group)
    finally:
        ray.shutdown()


def test_a_split_divides_the_activations_per_gpu_but_not_the_weights():
    from daotai.runtime.memory import estimate

    one = estimate("wan2.1-t2v-14b", 1280, 720, 81, offload="none")
    two = estimate("wan2.1-t2v-14b", 1280, 720, 81, offload="none", gpus=2)
    assert two.weights_bytes == one.weights_bytes  # every GPU holds the whole model
    assert two.activations_bytes == pytest.approx(one.activations_bytes / 2, rel=1e-3)
    assert two.vae_decode_bytes == one.vae_decode_bytes  # rank 0 decodes the whole video
    assert two.peak_bytes < one.peak_bytes
    with pytest.raises(ValueError, match="gpus"):
        estimate("wan2.1-t2v-14b", 1280, 720, 81, gpus=0)


def test_the_planner_names_the_fewest_gpus_that_make_a_shot_fit():
    from daotai.runtime.memory import GIB, estimate, gpus_that_fit

    def peak(gpus):
        return min(estimate("wan2.1-t2v-14b", 1280, 720, 81, 2.0, "none", tiling, gpus).peak_bytes
                   for tiling in (False, True))

    assert gpus_that_fit("wan2.1-t2v-14b", 1280, 720, 81, 141 * GIB) == 1  # an H200 holds it whole
    budget = (peak(2) + peak(1)) / 2  # between what 2 and 1 GPUs need
    assert gpus_that_fit("wan2.1-t2v-14b", 1280, 720, 81, budget) == 2
    assert gpus_that_fit("wan2.1-t2v-14b", 1280, 720, 81, 8 * GIB) is None  # the weights alone do not fit


def test_doctor_says_which_split_fits_each_preset():
    from daotai.doctor import _split_check
    from daotai.runtime.memory import GIB

    check = _split_check("cuda: a 48 GiB card", 48 * GIB)
    assert check.name.startswith("wan 14B, 81 frames, split")
    assert "draft: --gpus" in check.value and "final:" in check.value


def test_backends_whose_pipeline_a_rank_cannot_rebuild_refuse_a_split():
    from daotai.render.neural.runner import DiffusersShotRunner
    from daotai.render.spec import DiffusersOptions

    def custom_build(model, family, runtime):  # e.g. camera adapters attached after loading
        raise AssertionError("never called: refused before loading")

    runner = DiffusersShotRunner("wan", DiffusersOptions(gpus=2, device="cpu"), "wan2.1-t2v-1.3b", build=custom_build)
    with pytest.raises(BackendError, match="gpus: 2 is not available for the wan family yet"):
        runner.prepare()


@pytest.mark.slow
def test_ctrl_c_stops_every_rank_and_writes_no_shot(tiny_wan, tmp_path):
    import subprocess
    import sys
    import time

    _, script = plan_at(tmp_path)
    out = tmp_path / "out"
    render = subprocess.Popen(
        [sys.executable, "-m", "daotai.cli", "render", str(script), "--backend", "wan", "--model", str(tiny_wan),
         "--device", "cpu", "--steps", "400", "--gpus", "2", "--no-cache", "-o", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)

    def ranks() -> list[int]:
        found = subprocess.run(["ps", "-o", "pid=", "--ppid", str(render.pid)], capture_output=True, text=True)
        return [int(pid) for pid in found.stdout.split()]

    try:
        deadline = time.monotonic() + 240
        while len(ranks()) < 3 and time.monotonic() < deadline:  # 2 ranks + multiprocessing's resource tracker
            time.sleep(0.5)
        children = ranks()
        assert len(children) >= 3, render.stderr.read() if render.poll() is not None else "ranks never started"
        time.sleep(15)  # into the denoise loop
        os.killpg(render.pid, signal.SIGINT)  # what a terminal sends on Ctrl-C: the whole foreground group
        _, stderr = render.communicate(timeout=120)
    finally:
        if render.poll() is None:
            os.killpg(render.pid, signal.SIGKILL)
    assert render.returncode == 130, stderr[-2000:]
    assert "interrupted" in stderr.lower() or "stopped" in stderr.lower()
    time.sleep(2)
    alive = [pid for pid in children if Path(f"/proc/{pid}").exists()
             and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]]
    assert alive == []  # every rank is gone
    assert not (out / "shots" / "s01.mp4").exists()


@pytest.mark.slow
def test_a_cluster_renders_a_split_shot_in_its_placement_group(tiny_wan, tmp_path):
    ray = pytest.importorskip("ray")
    from daotai.cluster import executor_for
    from daotai.encode.read import probe
    from daotai.run.pipeline import run
    from daotai.run.records import Finished
    from daotai.run.settings import PipelineSettings

    plan, source = plan_at(tmp_path)
    # Two GPUs declared to Ray: the actor's placement group and its 2 ranks are real; with
    # device=cpu the ranks split the shot over gloo instead of NCCL.
    ray.init(address="local", num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    try:
        settings = PipelineSettings(backend="wan", options={"model": str(tiny_wan), "device": "cpu", "steps": 2,
                                                            "gpus": 2}, camera_qc=False, cluster="local")
        events = list(run(plan, tmp_path / "out", settings, source=source, executor=executor_for(settings)))
        from ray.util.placement_group import placement_group_table

        groups = list(placement_group_table().values())
    finally:
        ray.shutdown()
    assert isinstance(events[-1], Finished)
    assert probe(tmp_path / "out" / "shots" / "s01.mp4").frames == plan.shots[0].frames
    notices = [getattr(e, "text", "") for e in events]
    assert any("split over 2 CPU processes" in text for text in notices)
    assert [(g["strategy"], list(g["bundles"].values()), g["state"]) for g in groups] == [
        ("STRICT_PACK", [{"CPU": 2.0, "GPU": 2.0}], "REMOVED")]  # reserved for the actor, released after


def test_after_a_failed_group_the_next_shot_starts_a_new_one(monkeypatch, tmp_path):
    from daotai.render.neural.parallel import RankGroup
    from daotai.render.neural.runner import DiffusersShotRunner
    from daotai.render.spec import DiffusersOptions

    plan, _ = plan_at(tmp_path)
    runner = DiffusersShotRunner("wan", DiffusersOptions(gpus=2, device="cpu"), "wan2.1-t2v-1.3b")
    loads = []
    monkeypatch.setattr(runner, "load_for", lambda request, shot_id: iter(loads.append(shot_id) or ()))
    failed = RankGroup.__new__(RankGroup)
    failed.broken = True  # what a rank's failure leaves (its ranks already stopped)
    runner.group = failed
    list(runner.ensure_loaded(plan, plan.shots[0]))
    assert runner.group is None and loads == ["s01"]  # loads again instead of reusing the failed group


@pytest.mark.slow
def test_an_ltx_keyframe_shot_splits_like_any_other(tmp_path):
    from builders import build_ltx

    model = build_ltx(tmp_path / "ltx-condition", condition=True)
    plan, _ = plan_at(tmp_path)
    frames = {}
    for gpus in (1, 2):
        from daotai.render.registry import create_backend

        backend = create_backend("ltx", {"model": str(model), "device": "cpu", "steps": 2, "gpus": gpus,
                                         "keyframe": "previz"})
        try:
            events = list(backend.render(RenderJob(plan, plan.shots[0], controls=False), RunContext()))
        finally:
            backend.close()
        frames[gpus] = np.stack([e.rgb for e in events if isinstance(e, Frame)])
    difference = int(np.abs(frames[2].astype(np.int16) - frames[1].astype(np.int16)).max())
    print(f"ltx keyframe: max abs difference {difference} levels")
    assert difference <= MAX_LEVELS
