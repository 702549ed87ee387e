"""Health telemetry: macOS tool parsing, NVML reason names, the ok/warn/critical verdict, --adaptive.

The macOS outputs below are written by hand in the formats the tools print (sysctl, the
memory_pressure tool, pmset -g therm); our build machines are Linux, so these tests could
not be run against a real Mac.
"""

from __future__ import annotations

import json
import sys
import time

import pytest

from builders import plan_from
from daotai.runtime.health import (
    MEMORY_PRESSURE,
    PMSET_THERM,
    SYSCTL,
    HealthStatus,
    assess,
    collect_macos,
    combine,
    format_sample,
    macos_sample,
    nvml_sample,
    parse_memory_free_percent,
    parse_pmset_therm,
    parse_pressure_level,
    run_command,
    thermal_pressure_name,
    throttle_reason_names,
)
from daotai.runtime.memory import tier_after_health

# `memory_pressure` on a 16 GB Apple Silicon laptop with a model loaded.
MEMORY_PRESSURE_OUT = """\
The system has 17179869184 (1048576 pages with a page size of 16384).

Stats: 
Pages free: 6812 
Pages purgeable: 2215 
Pages purged: 1873320 

Swap I/O:
Swapins: 412097 
Swapouts: 655391 

Page Q counts:
Pages active: 402811 
Pages inactive: 398120 
Pages speculative: 1544 
Pages throttled: 0 
Pages wired down: 158342 

Compressor Stats:
Pages used by compressor: 80121 
Pages decompressed: 9822134 
Pages compressed: 13011876 

File I/O:
Pageins: 2413201 
Pageouts: 31277 

System-wide memory free percentage: 23%
"""

# `pmset -g therm` on Apple Silicon: nothing recorded, no CPU power notification.
PMSET_APPLE_SILICON = """\
Note: No thermal warning level has been recorded
Note: No performance warning level has been recorded
Note: No CPU power status has been recorded
"""

# `pmset -g therm` on a hot Intel MacBook Pro (tabs as pmset prints them).
PMSET_INTEL_HOT = """\
Note: No thermal warning level has been recorded
Note: No performance warning level has been recorded
2024-03-02 14:11:52 +0100 CPU Power notify
\tCPU_Scheduler_Limit \t= 100
\tCPU_Available_CPUs \t= 8
\tCPU_Speed_Limit \t= 56
"""

# A recorded warning level (spelled with '=' by some macOS releases and ':' by others).
PMSET_WARNING_EQUALS = "Thermal Warning Level = 5\nPerformance Warning Level = 0\n"
PMSET_WARNING_COLON = ("2024-03-02 14:20:07 +0100 Thermal warning level: 10\n"
                       "Note: No performance warning level has been recorded\n")


@pytest.mark.parametrize("text, level", [
    ("1\n", "normal"), ("2\n", "warn"), ("4\n", "critical"), ("4", "critical"),
    ("0\n", None), ("3\n", None), ("", None), (None, None),
    ("sysctl: unknown oid 'kern.memorystatus_vm_pressure_level'\n", None),
])
def test_memory_pressure_level_from_sysctl(text, level):
    assert parse_pressure_level(text) == level


def test_free_percentage_from_the_memory_pressure_tool():
    assert parse_memory_free_percent(MEMORY_PRESSURE_OUT) == 23.0
    assert parse_memory_free_percent("System-wide memory free percentage: 42.5%\n") == 42.5
    assert parse_memory_free_percent("Pages free: 6812\n") is None
    assert parse_memory_free_percent(None) is None


@pytest.mark.parametrize("text, expected", [
    (PMSET_APPLE_SILICON, {"thermal_warning_level": 0, "performance_warning_level": 0}),
    (PMSET_INTEL_HOT, {"cpu_speed_limit": 56, "cpu_scheduler_limit": 100, "thermal_warning_level": 0,
                       "performance_warning_level": 0}),
    (PMSET_WARNING_EQUALS, {"thermal_warning_level": 5, "performance_warning_level": 0}),
    (PMSET_WARNING_COLON, {"thermal_warning_level": 10, "performance_warning_level": 0}),
    ("", {}),
    (None, {}),
    ("pmset: unrecognized option\n", {}),
])
def test_thermal_state_from_pmset(text, expected):
    assert parse_pmset_therm(text) == expected


def test_thermal_pressure_names():
    assert [thermal_pressure_name(i) for i in range(5)] == ["nominal", "moderate", "heavy", "trapping", "sleeping"]
    assert all(thermal_pressure_name(level) is None for level in (5, -1, None))


def recorded(outputs: dict):
    """A command runner that answers from recorded outputs (None: the command failed)."""
    seen = []

    def run(argv):
        seen.append(tuple(argv))
        return outputs.get(tuple(argv))

    run.seen = seen
    return run


def test_collect_macos_combines_every_source():
    run = recorded({SYSCTL: "4\n", MEMORY_PRESSURE: MEMORY_PRESSURE_OUT, PMSET_THERM: PMSET_INTEL_HOT})
    sample = collect_macos(run, thermal_pressure=lambda: 2)
    assert sample == {
        "memory_pressure": "critical", "memory_free_percent": 23.0, "cpu_speed_limit": 56,
        "cpu_scheduler_limit": 100, "thermal_warning_level": 0, "performance_warning_level": 0,
        "thermal_pressure": "heavy",
    }
    assert set(run.seen) == {SYSCTL, MEMORY_PRESSURE, PMSET_THERM}
    assert json.loads(json.dumps(sample)) == sample  # goes into the manifest as is


def test_collect_macos_leaves_out_what_failed():
    assert collect_macos(recorded({}), thermal_pressure=lambda: None) == {}
    partial = collect_macos(recorded({SYSCTL: "garbage", PMSET_THERM: PMSET_APPLE_SILICON}), thermal_pressure=lambda: 7)
    assert partial == {"thermal_warning_level": 0, "performance_warning_level": 0}


@pytest.mark.skipif(sys.platform == "darwin", reason="checks the off-Mac guard")
def test_nothing_macos_runs_off_a_mac():
    assert macos_sample() == {}


def test_commands_are_time_bounded_and_never_raise(tmp_path):
    assert run_command([sys.executable, "-c", "print(4)"]) == "4\n"
    assert run_command([str(tmp_path / "no-such-tool")]) is None
    assert run_command([sys.executable, "-c", "import sys; sys.exit(3)"]) is None
    started = time.perf_counter()
    assert run_command([sys.executable, "-c", "import time; time.sleep(30)"], timeout_s=0.5) is None
    assert time.perf_counter() - started < 10


def test_nvml_throttle_reason_names():
    assert throttle_reason_names(0) == ()
    assert throttle_reason_names(0x1 | 0x4) == ("gpu_idle", "sw_power_cap")
    assert throttle_reason_names(0x20 | 0x40) == ("sw_thermal_slowdown", "hw_thermal_slowdown")
    assert throttle_reason_names(0x8 | 0x200) == ("hw_slowdown", "bit_0x200")


def test_nvml_absent_means_no_fields():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: NVML may answer")
    assert nvml_sample(0) == {}


# (sample, level, a phrase every reason list must contain) — NVIDIA, Apple Silicon and macOS cases.
CASES = [
    ({}, "ok", None),
    ({"peak_allocated_gib": 40.2, "reserved_gib": 44.0, "total_gib": 139.8, "temperature_c": 61,
      "throttle_reasons": ["sw_power_cap"]}, "ok", None),  # at its power limit under load: by design
    ({"throttle_reasons": ["gpu_idle", "applications_clocks_setting", "sync_boost"]}, "ok", None),
    ({"peak_allocated_gib": 128.0, "total_gib": 139.8}, "warn", "128.0 of 139.8 GiB (92%)"),
    ({"peak_allocated_gib": 137.0, "total_gib": 139.8}, "critical", "(98%)"),
    ({"throttle_reasons": ["hw_thermal_slowdown"]}, "critical", "hw_thermal_slowdown"),
    ({"throttle_reasons": ["sw_thermal_slowdown", "sw_power_cap"]}, "critical", "sw_thermal_slowdown"),
    ({"throttle_reasons": ["hw_power_brake_slowdown"]}, "critical", "hw_power_brake_slowdown"),
    ({"throttle_reasons": ["hw_slowdown"]}, "critical", "hw_slowdown"),
    ({"allocated_gib": 20.1, "driver_gib": 21.0, "total_gib": 21.3}, "warn", "20.1 of 21.3 GiB"),
    ({"memory_pressure": "normal", "memory_free_percent": 61.0, "thermal_pressure": "nominal",
      "thermal_warning_level": 0, "performance_warning_level": 0}, "ok", None),
    ({"memory_pressure": "warn", "memory_free_percent": 12.0}, "warn", "memory pressure warn"),
    ({"memory_pressure": "critical"}, "critical", "memory pressure critical"),
    ({"thermal_pressure": "moderate"}, "warn", "thermal pressure moderate"),
    ({"thermal_pressure": "heavy"}, "critical", "thermal pressure heavy"),
    ({"cpu_speed_limit": 100}, "ok", None),
    ({"cpu_speed_limit": 85}, "warn", "CPU speed limited to 85%"),
    ({"cpu_speed_limit": 56}, "critical", "CPU speed limited to 56%"),
    ({"thermal_warning_level": 5}, "warn", "thermal warning level 5"),
    ({"memory_pressure": "warn", "thermal_pressure": "heavy"}, "critical", "memory pressure warn"),
    ({"peak_allocated_gib": 3.0, "total_gib": 0}, "ok", None),  # unknown total: no share to judge
    ({"peak_allocated_gib": "n/a", "total_gib": 80.0, "throttle_reasons": None}, "ok", None),
]


@pytest.mark.parametrize("sample, level, phrase", CASES)
def test_verdict_on_a_table_of_samples(sample, level, phrase):
    status = assess(sample)
    assert status.level == level
    assert bool(status.reasons) == (level != "ok")
    if phrase is not None:
        assert any(phrase in reason for reason in status.reasons), status.reasons


def test_mixed_sample_keeps_every_reason():
    status = assess({"memory_pressure": "warn", "thermal_pressure": "heavy", "cpu_speed_limit": 90})
    assert status.level == "critical" and len(status.reasons) == 3
    assert status.describe().startswith("health critical: system memory pressure warn; thermal pressure heavy")


def test_combining_a_shots_samples_keeps_the_worst():
    warn = HealthStatus("warn", ("a",))
    critical = HealthStatus("critical", ("b", "a"))
    assert combine([]) == HealthStatus()
    assert combine([HealthStatus(), warn]) == warn
    assert combine([warn, critical, HealthStatus()]) == HealthStatus("critical", ("a", "b"))


def test_sample_text_for_notices():
    assert format_sample({"peak_allocated_gib": 3.25, "temperature_c": 61, "throttle_reasons": []}) == \
        "peak_allocated_gib 3.25, temperature_c 61, throttle_reasons none"
    both = {"throttle_reasons": ["sw_power_cap", "hw_slowdown"]}
    assert format_sample(both) == "throttle_reasons sw_power_cap+hw_slowdown"


@pytest.mark.parametrize("tier, level, adaptive, expected", [
    ("none", "critical", True, "model"),
    ("model", "critical", True, "group"),
    ("group", "critical", True, "sequential"),
    ("sequential", "critical", True, "sequential"),  # nothing lower: stays
    ("none", "warn", True, "none"),  # a warning alone does not cost speed
    ("none", "ok", True, "none"),
    ("none", "critical", False, "none"),  # without --adaptive only a warning
])
def test_tier_after_a_health_verdict(tier, level, adaptive, expected):
    assert tier_after_health(tier, level, adaptive) == expected


def test_tier_after_health_rejects_an_unknown_tier():
    with pytest.raises(ValueError, match="'disk' must be one of none, model, group, sequential"):
        tier_after_health("disk", "critical", True)


def test_cpu_health_sample_is_empty_off_a_mac():
    pytest.importorskip("torch")
    if sys.platform == "darwin":
        pytest.skip("a Mac reports system memory pressure even for CPU renders")
    from daotai.runtime.device import health_sample, resolve_runtime

    assert health_sample(resolve_runtime("cpu")) == {}


# ------------------------------------------------------------------ --adaptive end to end (tiny Wan on CPU)

SCRIPT = {
    "title": "adaptive", "fps": 16, "size": [64, 64], "seed": 3, "scene": "office",
    "characters": [{"id": "ana", "appearance": "blue shirt"}],
    "shots": [
        {"shot_id": "s01", "duration": 0.5, "camera": {"type": "dolly", "motion": [0, 0, -0.5]}, "subject": "ana"},
        {"shot_id": "s02", "duration": 0.5, "camera": {"type": "pan", "rotate": [20, 0, 0]}, "subject": "ana"},
    ],
}


@pytest.fixture()
def plan_and_script(tmp_path):
    return plan_from(tmp_path / "adaptive.json", SCRIPT)


class Sampler:
    """A health sampler reporting critical system memory pressure from a given call on."""

    def __init__(self, critical_from: int = 0):
        self.calls = 0
        self.critical_from = critical_from
        self.kinds: list[str] = []

    def __call__(self, runtime) -> dict:
        self.calls += 1
        self.kinds.append(runtime.kind)
        pressure = "critical" if self.calls > self.critical_from else "normal"
        return {"memory_pressure": pressure, "memory_free_percent": 4.0 if pressure == "critical" else 55.0}


def test_adaptive_render_runs_the_shot_after_a_critical_one_a_tier_lower(tiny_wan, plan_and_script, tmp_path):
    from daotai.events import Notice
    from daotai.run.pipeline import run
    from daotai.run.records import Finished
    from daotai.run.settings import PipelineSettings

    plan, script = plan_and_script
    sampler = Sampler()
    settings = PipelineSettings(backend="wan", options={"model": str(tiny_wan), "device": "cpu", "steps": 2,
                                                        "adaptive": True}, camera_qc=False)
    events = list(run(plan, tmp_path / "out", settings, source=script, health=sampler))
    assert isinstance(events[-1], Finished)
    assert sampler.calls == 4 and set(sampler.kinds) == {"cpu"}  # mid-denoise and after decode, per shot

    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["settings"]["options"]["adaptive"] is True  # the validated options are recorded
    notes = {shot["shot_id"]: shot["notices"] for shot in manifest["shots"]}
    assert "memory tier none (cpu: weights already live in host memory)" in notes["s01"]
    assert "health mid-denoise: memory_pressure critical, memory_free_percent 4" in notes["s01"]
    assert ("health critical: system memory pressure critical; --adaptive: the next shot runs at memory tier model"
            in notes["s01"])
    assert "memory tier none -> model for this and later shots: health critical after s01" in notes["s02"]
    assert "memory tier model (stepped down from none by --adaptive: health critical after s01)" in notes["s02"]
    # One step per shot boundary: two critical samples in s01 did not skip a tier; s02 owes the next one.
    assert not any(note.startswith("memory tier group") for note in notes["s02"])
    assert any(note.endswith("--adaptive: the next shot runs at memory tier group") for note in notes["s02"])
    # The warnings reached the event stream the CLI prints.
    warnings = [e.text for e in events if isinstance(e, Notice) and e.level == "warning"]
    assert any(text.startswith("health critical") for text in warnings)


def test_without_adaptive_a_critical_shot_only_warns(tiny_wan, plan_and_script):
    from daotai.events import Notice
    from daotai.render.base import RenderJob, RunContext
    from daotai.render.spec import BackendEnv
    from daotai.render.wan import WanBackend

    plan, _ = plan_and_script
    sampler = Sampler(critical_from=1)  # the first sample is fine, later ones critical
    backend = WanBackend(model=str(tiny_wan), device="cpu", steps=2, env=BackendEnv(health_sampler=sampler))
    notices = []
    try:
        for shot in plan.shots:
            notices += [e for e in backend.render(RenderJob(plan, shot, controls=False), RunContext())
                        if isinstance(e, Notice)]
        assert backend.runner.tier == "none" and backend.runner.owed_step is None
        assert not backend.runner.pipe.vae.use_tiling  # never re-placed
    finally:
        backend.close()
    warnings = [n.text for n in notices if n.level == "warning"]
    assert warnings == ["health critical: system memory pressure critical; "
                        "run with --adaptive to step down a memory tier between shots"] * 2


def test_adaptive_re_places_the_loaded_pipeline_and_survives_a_broken_sampler(tiny_wan, plan_and_script):
    from daotai.events import Notice
    from daotai.render.base import RenderJob, RunContext
    from daotai.render.spec import BackendEnv
    from daotai.render.wan import WanBackend

    plan, _ = plan_and_script
    backend = WanBackend(model=str(tiny_wan), device="cpu", steps=1, adaptive=True,
                         env=BackendEnv(health_sampler=Sampler()))
    try:
        list(backend.render(RenderJob(plan, plan.shots[0], controls=False), RunContext()))
        pipe = backend.runner.pipe
        assert backend.runner.owed_step == "health critical after s01" and not pipe.vae.use_tiling

        def broken(runtime):
            raise RuntimeError("driver went away")

        backend.runner.health = broken  # telemetry failing must not fail the render
        events = list(backend.render(RenderJob(plan, plan.shots[1], controls=False), RunContext()))
        assert backend.runner.pipe is pipe and backend.runner.tier == "model"
        assert pipe.vae.use_tiling  # the lower tier's placement really ran (VAE tiling on)
        assert not any(isinstance(e, Notice) and e.text.startswith("health ") for e in events)
        assert backend.runner.owed_step is None
    finally:
        backend.close()


def test_nvml_is_initialised_once_per_process(monkeypatch):
    import sys
    import types

    import daotai.runtime.health as health

    calls = {"init": 0, "shutdown": 0}
    fake = types.ModuleType("pynvml")
    fake.NVML_TEMPERATURE_GPU = 0
    fake.nvmlInit = lambda: calls.__setitem__("init", calls["init"] + 1)
    fake.nvmlShutdown = lambda: calls.__setitem__("shutdown", calls["shutdown"] + 1)
    fake.nvmlDeviceGetHandleByIndex = lambda index: ("gpu", index)
    fake.nvmlDeviceGetTemperature = lambda handle, sensor: 61
    fake.nvmlDeviceGetCurrentClocksEventReasons = lambda handle: 0x4
    fake.nvmlDeviceGetMemoryInfo = lambda handle: types.SimpleNamespace(used=3 * 1024**3)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(health, "_NVML", {})
    first, second = nvml_sample(0), nvml_sample(0)
    assert first == second == {"temperature_c": 61, "throttle_reasons": ["sw_power_cap"], "device_used_gib": 3.0}
    assert calls == {"init": 1, "shutdown": 0}
