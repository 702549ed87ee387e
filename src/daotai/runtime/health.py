"""Accelerator health during a render: reading it without root, and judging it.

A *sample* is a flat, JSON-ready dict; every field is optional because every source can
be missing (no NVML binding, not a Mac, a tool that timed out). Fields by source:

- NVIDIA (torch allocator + NVML through the optional ``pynvml`` binding):
  ``peak_allocated_gib``, ``reserved_gib``, ``total_gib``, ``temperature_c``,
  ``device_used_gib`` (all processes), ``throttle_reasons`` (names, see THROTTLE_REASONS).
- Apple Silicon (torch.mps allocator): ``allocated_gib``, ``driver_gib``, ``total_gib``.
- macOS, any device (no root needed):
  ``memory_pressure`` (normal | warn | critical) from ``sysctl -n kern.memorystatus_vm_pressure_level``;
  ``memory_free_percent`` from the ``memory_pressure`` tool's last line;
  ``cpu_speed_limit`` / ``cpu_scheduler_limit`` (percent) and ``thermal_warning_level`` /
  ``performance_warning_level`` from ``pmset -g therm`` (Intel Macs report the limits,
  Apple Silicon usually only notes that no warning was recorded);
  ``thermal_pressure`` (nominal | moderate | heavy | trapping | sleeping), the level Darwin's
  notify system publishes as ``com.apple.system.thermalpressurelevel`` — on Apple Silicon
  the one thermal signal readable without root.

The text parsers are pure functions. Our build machines are Linux, so their tests run on
sample outputs written in the tools' formats, not on a Mac. Every command runs with a
timeout; a failure of any kind leaves its fields out and never raises.

:func:`assess` turns a sample into ok / warn / critical with reasons; a render warns on
anything but ok and, with ``--adaptive``, renders the following shots one memory tier
lower after a critical one (see :func:`daotai.runtime.memory.tier_after_health`).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping, Sequence

GIB = 1024**3
LEVELS = ("ok", "warn", "critical")  # in rising severity
COMMAND_TIMEOUT_S = 2.0  # each macOS tool answers in well under 100 ms; a hung one must not stall a render

SYSCTL = ("/usr/sbin/sysctl", "-n", "kern.memorystatus_vm_pressure_level")
MEMORY_PRESSURE = ("/usr/bin/memory_pressure",)
PMSET_THERM = ("/usr/bin/pmset", "-g", "therm")

# kern.memorystatus_vm_pressure_level uses the dispatch memory-pressure constants.
PRESSURE_LEVELS = MappingProxyType({1: "normal", 2: "warn", 4: "critical"})
# OSThermalNotification.h's thermal pressure levels, in the order the system publishes them.
THERMAL_PRESSURE = ("nominal", "moderate", "heavy", "trapping", "sleeping")

# NVML clock-event (throttle) reason bits, from nvml.h, with what each means for a render:
# None = not a slowdown that matters (idle, clocks the user set, sync boost, display clocks).
# The software power cap is deliberately None too: under full load most GPUs run at their
# power limit by design, so it would warn on every shot of a healthy render.
THROTTLE_REASONS = MappingProxyType({
    0x001: ("gpu_idle", None),
    0x002: ("applications_clocks_setting", None),
    0x004: ("sw_power_cap", None),
    0x008: ("hw_slowdown", "critical"),  # power brake, over-current or over-temperature signal
    0x010: ("sync_boost", None),
    0x020: ("sw_thermal_slowdown", "critical"),
    0x040: ("hw_thermal_slowdown", "critical"),
    0x080: ("hw_power_brake_slowdown", "critical"),
    0x100: ("display_clock_setting", None),
})
THROTTLE_SEVERITY = MappingProxyType({name: level for name, level in THROTTLE_REASONS.values()})

# ------------------------------------------------------------------ commands (time-bounded)


def run_command(argv: Sequence[str], timeout_s: float = COMMAND_TIMEOUT_S) -> str | None:
    """A command's stdout, or None when it is missing, fails, or outlives ``timeout_s``."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, errors="replace", timeout=timeout_s,
                              stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return done.stdout if done.returncode == 0 else None


# ------------------------------------------------------------------ macOS parsers (pure)


def parse_pressure_level(text: str | None) -> str | None:
    """``sysctl -n kern.memorystatus_vm_pressure_level`` output → normal | warn | critical (None: unreadable)."""
    if not text or not text.strip().isdigit():
        return None
    return PRESSURE_LEVELS.get(int(text.strip()))


def parse_memory_free_percent(text: str | None) -> float | None:
    """The ``memory_pressure`` tool's "System-wide memory free percentage: N%" line → N."""
    found = re.search(r"memory free percentage:\s*(\d+(?:\.\d+)?)\s*%", text or "", re.IGNORECASE)
    return float(found.group(1)) if found else None


def parse_pmset_therm(text: str | None) -> dict[str, int]:
    """``pmset -g therm`` → CPU speed/scheduler limits (percent) and recorded warning levels.

    "No thermal warning level has been recorded" means level 0; limits appear only after
    the system published a CPU power notification (mostly Intel Macs).
    """
    text = text or ""
    found: dict[str, int] = {}
    for key, field in (("CPU_Speed_Limit", "cpu_speed_limit"), ("CPU_Scheduler_Limit", "cpu_scheduler_limit")):
        match = re.search(rf"{key}\s*=\s*(\d+)", text)
        if match:
            found[field] = int(match.group(1))
    for kind in ("thermal", "performance"):
        field = f"{kind}_warning_level"
        match = re.search(rf"{kind} warning level\s*[=:]\s*(\d+)", text, re.IGNORECASE)
        if match:
            found[field] = int(match.group(1))
        elif re.search(rf"no {kind} warning level has been recorded", text, re.IGNORECASE):
            found[field] = 0
    return found


def thermal_pressure_name(level: int | None) -> str | None:
    """Darwin's published thermal pressure level (0–4) → its name; None for anything else."""
    if level is None or not 0 <= level < len(THERMAL_PRESSURE):
        return None
    return THERMAL_PRESSURE[level]


def read_thermal_pressure() -> int | None:
    """The thermal pressure level from Darwin's notify system (no root); None off-Mac or on failure."""
    if sys.platform != "darwin":
        return None
    try:
        import ctypes

        lib = ctypes.CDLL("/usr/lib/libSystem.B.dylib")
        # Exact prototypes from <notify.h>, so ctypes passes the right widths.
        register = lib.notify_register_check
        register.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)]
        register.restype = ctypes.c_uint32
        get_state = lib.notify_get_state
        get_state.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_uint64)]
        get_state.restype = ctypes.c_uint32
        cancel = lib.notify_cancel
        cancel.argtypes = [ctypes.c_int]
        cancel.restype = ctypes.c_uint32
        token = ctypes.c_int(0)
        if register(b"com.apple.system.thermalpressurelevel", ctypes.byref(token)) != 0:
            return None
        try:
            state = ctypes.c_uint64(0)
            return int(state.value) if get_state(token, ctypes.byref(state)) == 0 else None
        finally:
            cancel(token)
    except (OSError, AttributeError, ValueError):
        return None


def collect_macos(run: Callable[[Sequence[str]], str | None] = run_command,
                  thermal_pressure: Callable[[], int | None] = read_thermal_pressure) -> dict[str, Any]:
    """Memory pressure and thermal state from the macOS tools; fields that could not be read are left out."""
    sample: dict[str, Any] = {}
    pressure = parse_pressure_level(run(SYSCTL))
    if pressure is not None:
        sample["memory_pressure"] = pressure
    free = parse_memory_free_percent(run(MEMORY_PRESSURE))
    if free is not None:
        sample["memory_free_percent"] = free
    sample.update(parse_pmset_therm(run(PMSET_THERM)))
    thermal = thermal_pressure_name(thermal_pressure())
    if thermal is not None:
        sample["thermal_pressure"] = thermal
    return sample


def macos_sample() -> dict[str, Any]:
    """:func:`collect_macos` on a Mac; {} everywhere else (nothing is run)."""
    return collect_macos() if sys.platform == "darwin" else {}


# ------------------------------------------------------------------ NVIDIA


def throttle_reason_names(mask: int) -> tuple[str, ...]:
    """NVML's clock-event reason bit mask → reason names (unknown bits as ``bit_0x...``)."""
    names = [name for bit, (name, _) in THROTTLE_REASONS.items() if mask & bit]
    known = sum(THROTTLE_REASONS)
    rest = mask & ~known
    names += [f"bit_{1 << i:#x}" for i in range(rest.bit_length()) if rest >> i & 1]
    return tuple(names)


# NVML as initialised in this process: {pid: pynvml module, or None where it is missing or refused}.
# nvmlInit enumerates the devices (tens to hundreds of ms), and a shot takes its samples while
# the user waits for frames, so it is paid once per process; a forked child initialises its own.
_NVML: dict[int, Any] = {}


def _nvml() -> Any | None:
    """pynvml, initialised once in this process; None without the binding or a driver."""
    pid = os.getpid()
    if pid not in _NVML:
        try:
            import pynvml  # ships as nvidia-ml-py; optional

            pynvml.nvmlInit()
            _NVML[pid] = pynvml
        except Exception:  # noqa: BLE001  (no binding, no driver, or NVML refuses: nothing to read)
            _NVML[pid] = None
    return _NVML[pid]


def nvml_sample(index: int) -> dict[str, Any]:
    """Temperature, throttle reasons and device-wide memory use from NVML; {} without the binding."""
    pynvml = _nvml()
    if pynvml is None:
        return {}
    sample: dict[str, Any] = {}
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        readers = {
            "temperature_c": lambda: int(pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)),
            "throttle_reasons": lambda: list(throttle_reason_names(int(_clock_reasons(pynvml)(handle)))),
            "device_used_gib": lambda: round(pynvml.nvmlDeviceGetMemoryInfo(handle).used / GIB, 2),
        }
        for field, read in readers.items():
            try:
                sample[field] = read()
            except Exception:  # noqa: BLE001  (one unsupported query, e.g. on a MIG slice, leaves only its field out)
                pass
    except Exception:  # noqa: BLE001  (telemetry never fails a render: keep the fields read so far)
        pass
    return sample


def _clock_reasons(pynvml: Any) -> Callable[[Any], int]:
    """The binding's reader of current clock-event reasons (newer NVML renamed "throttle" to "event")."""
    return (getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
            or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons)


# ------------------------------------------------------------------ judging a sample (pure)


@dataclass(frozen=True)
class HealthLimits:
    """Where a sample stops being ok."""

    memory_warn: float = 0.90  # share of the accelerator's memory at the shot's peak
    memory_critical: float = 0.97  # the next, slightly larger allocation would fail
    cpu_speed_critical: int = 70  # pmset CPU_Speed_Limit percent at or below which the Mac is hot


@dataclass(frozen=True)
class HealthStatus:
    """The verdict on one or more samples."""

    level: str = "ok"  # one of LEVELS
    reasons: tuple[str, ...] = ()

    @property
    def critical(self) -> bool:
        return self.level == "critical"

    def describe(self) -> str:
        return f"health {self.level}" + (f": {'; '.join(self.reasons)}" if self.reasons else "")


def _memory_findings(sample: Mapping[str, Any], limits: HealthLimits) -> Iterable[tuple[str, str]]:
    used = sample.get("peak_allocated_gib", sample.get("allocated_gib"))
    total = sample.get("total_gib")
    if not isinstance(used, (int, float)) or not isinstance(total, (int, float)) or total <= 0:
        return
    share = used / total
    text = f"accelerator memory {used:.1f} of {total:.1f} GiB ({share:.0%}) in use"
    if share >= limits.memory_critical:
        yield "critical", text
    elif share >= limits.memory_warn:
        yield "warn", text


def _gpu_findings(sample: Mapping[str, Any]) -> Iterable[tuple[str, str]]:
    for name in sample.get("throttle_reasons") or ():
        level = THROTTLE_SEVERITY.get(name)
        if level is not None:
            yield level, f"gpu clocks throttled ({name})"


def _macos_findings(sample: Mapping[str, Any], limits: HealthLimits) -> Iterable[tuple[str, str]]:
    pressure = sample.get("memory_pressure")
    if pressure in ("warn", "critical"):
        yield pressure, f"system memory pressure {pressure}"
    thermal = sample.get("thermal_pressure")
    if thermal == "moderate":
        yield "warn", "thermal pressure moderate"
    elif thermal in ("heavy", "trapping", "sleeping"):
        yield "critical", f"thermal pressure {thermal}"
    speed = sample.get("cpu_speed_limit")
    if isinstance(speed, int) and speed < 100:
        yield ("critical" if speed <= limits.cpu_speed_critical else "warn"), f"CPU speed limited to {speed}%"
    for kind in ("thermal", "performance"):
        level = sample.get(f"{kind}_warning_level")
        if isinstance(level, int) and level > 0:
            yield "warn", f"{kind} warning level {level} recorded"


def assess(sample: Mapping[str, Any], limits: HealthLimits = HealthLimits()) -> HealthStatus:
    """ok / warn / critical for one sample, with a reason per finding (an empty sample is ok)."""
    findings = [*_memory_findings(sample, limits), *_gpu_findings(sample), *_macos_findings(sample, limits)]
    if not findings:
        return HealthStatus()
    level = max((lvl for lvl, _ in findings), key=LEVELS.index)
    return HealthStatus(level, tuple(text for _, text in findings))


def combine(statuses: Iterable[HealthStatus]) -> HealthStatus:
    """The worst level of several statuses (e.g. a shot's samples) with their reasons, each once."""
    level, reasons = "ok", []
    for status in statuses:
        level = max(level, status.level, key=LEVELS.index)
        reasons += [r for r in status.reasons if r not in reasons]
    return HealthStatus(level, tuple(reasons))


def format_sample(sample: Mapping[str, Any]) -> str:
    """``key value, ...`` for a notice; lists joined with '+', an empty list as 'none'."""
    def show(value: Any) -> str:
        if isinstance(value, (list, tuple)):
            return "+".join(map(str, value)) or "none"
        return f"{value:g}" if isinstance(value, float) else str(value)

    return ", ".join(f"{key} {show(value)}" for key, value in sample.items())
