"""The tiny random Wan / Wan-VACE / LTX folders (tests/builders.py) round-trip through the
same loader users go through."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
pytest.importorskip("transformers")

from builders import BUILDERS  # noqa: E402

FIXTURES = {"wan": "tiny_wan", "wan-vace": "tiny_vace", "ltx": "tiny_ltx"}  # conftest's folder per family


@pytest.mark.parametrize("family", sorted(BUILDERS))
def test_tiny_folder_loads_through_the_user_loader(family, request):
    from daotai.runtime.device import resolve_runtime
    from daotai.runtime.model_loading import load_pipeline

    folder = request.getfixturevalue(FIXTURES[family])
    pipe, model = load_pipeline(str(folder), family, resolve_runtime("cpu"))
    assert model.spec is None and model.path == folder.resolve()
    assert pipe.transformer.dtype == torch.float32  # CPU rule: fp32 everywhere
    assert sum(p.numel() for p in pipe.transformer.parameters()) < 2_000_000


def test_footprint_measured_from_a_folder_counts_every_parameter(tiny_wan):
    from daotai.runtime.device import resolve_runtime
    from daotai.runtime.memory import footprint_from_folder, plan_placement
    from daotai.runtime.model_loading import load_pipeline

    folder = tiny_wan
    footprint = footprint_from_folder(folder, "wan")
    pipe, _ = load_pipeline(str(folder), "wan", resolve_runtime("cpu"))
    for component in ("transformer", "text_encoder", "vae"):
        counted = sum(p.numel() for p in getattr(pipe, component).parameters())
        assert getattr(footprint, f"{component}_b") * 1e9 == pytest.approx(counted, abs=1)
    assert (footprint.hidden, footprint.ffn, footprint.layers) == (24, 32, 2)
    assert plan_placement(footprint, 64, 64, 9, 4 * 1024**3).tier == "none"


def test_accelerator_dtype_rules_reach_each_component(tiny_wan):
    """The CUDA rule (bf16 transformer and text encoder, float32 VAE) applied at load time, checked on CPU."""
    from daotai.runtime.device import Runtime, dtype_rule
    from daotai.runtime.model_loading import load_pipeline

    runtime = Runtime("cpu", "cpu", *dtype_rule("cuda"), memory_bytes=0)
    pipe, _ = load_pipeline(str(tiny_wan), "wan", runtime)
    assert pipe.transformer.blocks[0].attn1.to_q.weight.dtype == torch.bfloat16
    assert pipe.text_encoder.dtype == torch.bfloat16
    assert pipe.vae.dtype == torch.float32
