"""Device, dtype and generator rules of the neural runtime."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from daotai.errors import BackendError
from daotai.runtime.device import DTYPE_RULES, dtype_rule


def test_dtype_rules_per_device():
    assert dtype_rule("cuda") == ("bfloat16", "bfloat16", "float32")
    # fp16-unsafe parts on Apple Silicon (T5/UMT5 overflow, VAE norms) stay float32
    assert dtype_rule("mps") == ("float16", "float32", "float32")
    assert dtype_rule("cpu") == ("float32", "float32", "float32")
    assert set(DTYPE_RULES) == {"cuda", "mps", "cpu"}
    with pytest.raises(BackendError, match="'tpu' is not a device kind"):
        dtype_rule("tpu")


def test_importing_the_neural_modules_probes_nothing():
    code = (
        "import sys; import daotai.runtime.device, daotai.runtime.model_lookup, daotai.runtime.model_checks, "
        "daotai.runtime.model_downloads, daotai.runtime.model_loading, daotai.runtime.model_space, "
        "daotai.runtime.licences, daotai.runtime.memory, "
        "daotai.render.wan, daotai.render.wan_vace, daotai.render.ltx, daotai.render.neural.runner, "
        "daotai.render.wan_mlx; "
        "print(sorted(m for m in ('torch', 'diffusers', 'transformers', 'huggingface_hub') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


torch = pytest.importorskip("torch")


def test_cpu_runtime_and_explicit_device_errors():
    from daotai.runtime.device import resolve_runtime

    runtime = resolve_runtime("cpu")
    assert (runtime.kind, runtime.device) == ("cpu", "cpu")
    assert runtime.dtype("transformer") is torch.float32 and runtime.dtype("vae") is torch.float32
    assert runtime.memory_bytes > 0
    for bad, rule in (("gpu", "is not a device"), ("cuda:x", "must name a GPU index"), ("mps:1", "is not a device")):
        with pytest.raises(BackendError, match=rule):
            resolve_runtime(bad)
    if not torch.cuda.is_available():
        with pytest.raises(BackendError, match="no CUDA GPU"):
            resolve_runtime("cuda")
        assert resolve_runtime("auto").kind in ("cpu", "mps")


def test_a_seed_means_the_same_noise_every_time():
    from daotai.runtime.device import generator_for

    a = torch.randn(4, 8, generator=generator_for(123))
    b = torch.randn(4, 8, generator=generator_for(123))
    c = torch.randn(4, 8, generator=generator_for(124))
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert generator_for(5).device.type == "cpu"  # noise is drawn on the CPU on every device
    with pytest.raises(BackendError, match="seed"):
        generator_for(-1)


def test_ltx_vae_runs_in_bfloat16_on_cuda_only():
    torch = pytest.importorskip("torch")
    from daotai.runtime.device import Runtime, dtype_rule, vae_dtype_for

    for kind in ("cuda", "mps", "cpu"):
        runtime = Runtime(kind, kind, *dtype_rule(kind), memory_bytes=0)
        assert vae_dtype_for(runtime, "wan") == getattr(torch, runtime.vae_dtype)
        expected = torch.bfloat16 if kind == "cuda" else getattr(torch, runtime.vae_dtype)
        assert vae_dtype_for(runtime, "ltx") == expected


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no affinity mask on this platform")
def test_usable_cores_are_the_ones_this_process_was_granted_not_the_machines():
    """A container or taskset grants fewer cores than the machine has: pools sized by the
    machine's count would oversubscribe them."""
    from daotai.runtime.cores import usable_cores

    assert usable_cores() == len(os.sched_getaffinity(0))
    first = min(os.sched_getaffinity(0))
    code = (f"import os; os.sched_setaffinity(0, {{{first}}}); "
            "from daotai.runtime.cores import usable_cores; print(usable_cores())")
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert shown.stdout.strip() == "1"
