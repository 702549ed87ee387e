"""MiniMax-H3 with a turbo (step-distilled) LoRA on the CPU: its steps, shift and alpha read and applied.

A tiny LoRA is built here for the tiny random MiniMax-H3 folder (tests/builders.py: ``build_h3``)
and rendered through the h3 backend; the scheduler and the weights are observed during the real
pipeline call.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
pytest.importorskip("peft")

import builders  # noqa: E402
from daotai import catalog  # noqa: E402
from daotai.errors import BackendError, OptionError  # noqa: E402
from daotai.events import Frame, Notice  # noqa: E402
from daotai.render.base import RenderJob, RunContext  # noqa: E402

SCRIPT = {"title": "turbo", "fps": 24, "size": [112, 64], "seed": 5, "scene": "office",
          "characters": [{"id": "mara"}], "shots": [{"shot_id": "s1", "duration": 2, "characters": ["mara"]}]}
TARGETS = ("attn.to_q", "attn.to_v", "ff.net.2")  # a few linears of every block of the tiny transformer (width 32)


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("DAOTAI_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path / "config"


@pytest.fixture()
def plan(tmp_path):
    from daotai.plan.planner import plan_script
    from daotai.script.load import load_script

    (tmp_path / "s.json").write_text(json.dumps(SCRIPT))
    return plan_script(load_script(tmp_path / "s.json"))


def turbo_file(path: Path, metadata: dict[str, str] | None = None, in_features: int = 32, rank: int = 2,
               layer_prefix: str = "transformer.transformer_blocks") -> Path:
    """A diffusers-layout LoRA (alpha-less: peft's alpha == rank) with ``metadata`` in its safetensors header."""
    from safetensors.torch import save_file

    generator = torch.Generator().manual_seed(11)
    state = {}
    for block in range(2):
        for target in TARGETS:
            name = f"{layer_prefix}.{block}.{target}"
            state[f"{name}.lora_A.weight"] = torch.randn(rank, in_features, generator=generator) * 0.5
            state[f"{name}.lora_B.weight"] = torch.randn(32, rank, generator=generator) * 0.5
    save_file(state, str(path), metadata=metadata)
    return path


@pytest.fixture()
def observed(monkeypatch) -> dict:
    """What the real pipeline call ran with: each schedule the video scheduler built (points, shift, sigmas),
    the transformer's forwards, and its target weights during the call."""
    from diffusers import MiniMaxH3Scheduler
    from diffusers.modular_pipelines import MiniMaxH3ModularPipeline

    seen: dict = {"schedules": [], "forwards": 0, "weights": None}
    original_set, original_call = MiniMaxH3Scheduler.set_timesteps, MiniMaxH3ModularPipeline.__call__

    def set_timesteps(self, num_inference_steps=None, *args, **kwargs):
        original_set(self, num_inference_steps, *args, **kwargs)
        seen["schedules"].append((num_inference_steps, self.shift, self.sigmas.clone()))

    def call(self, *args, **kwargs):
        seen["weights"] = {n: p.detach().clone() for n, p in self.transformer.named_parameters()}

        def count(*_):
            seen["forwards"] += 1

        handle = self.transformer.register_forward_hook(count)
        try:
            return original_call(self, *args, **kwargs)
        finally:
            handle.remove()

    monkeypatch.setattr(MiniMaxH3Scheduler, "set_timesteps", set_timesteps)
    monkeypatch.setattr(MiniMaxH3ModularPipeline, "__call__", call)
    return seen


def render(model: Path, plan, **options) -> tuple[np.ndarray, list[str]]:
    """(frames (F, H, W, 3) uint8, notice texts) of the plan's only shot."""
    from daotai.render.h3 import H3Backend

    backend = H3Backend(model=str(model), device="cpu", accept_licence=True, **options)
    try:
        events = list(backend.render(RenderJob(plan, plan.shots[0], controls=False), RunContext()))
    finally:
        backend.close()
    return np.stack([e.rgb for e in events if isinstance(e, Frame)]), [e.text for e in events if isinstance(e, Notice)]


# ------------------------------------------------------------------ the turbo path end to end


def test_turbo_steps_shift_and_alpha_come_from_the_file_and_are_applied(tiny_h3, plan, tmp_path, observed):
    from diffusers import MiniMaxH3Transformer3DModel
    from safetensors.torch import load_file

    from daotai.runtime.model_checks import sha256_of

    path = turbo_file(tmp_path / "turbo.safetensors", {"steps": "3", "shift": "5.0", "alpha": "0.5"})
    frames, notices = render(tiny_h3, plan, turbo=str(path))
    assert frames.shape[0] == plan.shots[0].frames

    # 3 forwards: a schedule of 4 sigma points at shift 5 (12 is the folder's), and exactly 3 transformer calls.
    points, shift, sigmas = observed["schedules"][0]
    assert (points, shift) == (4, 5.0)
    base = torch.linspace(1.0, 0.0, 4)
    torch.testing.assert_close(sigmas, 5.0 * base / (1 + 4.0 * base))
    assert observed["forwards"] == 3

    # The weights the pipeline ran with: base + alpha * B @ A on every LoRA layer, untouched elsewhere.
    base_model = MiniMaxH3Transformer3DModel.from_pretrained(tiny_h3 / "transformer")
    raw = load_file(str(path))
    changed = 0
    for name, before in base_model.named_parameters():
        during = observed["weights"][name]
        layer = name.removesuffix(".weight")
        a_key = f"transformer.{layer}.lora_A.weight"
        if name.endswith(".weight") and a_key in raw:
            delta = 0.5 * raw[f"transformer.{layer}.lora_B.weight"] @ raw[a_key]
            torch.testing.assert_close(during, before.detach() + delta, rtol=1e-5, atol=1e-6)
            changed += 1
        else:
            assert torch.equal(during, before.detach()), name
    assert changed == 2 * len(TARGETS)

    # The manifest's notices name the LoRA with its full sha256 and where each setting came from.
    line = next(n for n in notices if n.startswith("h3: turbo turbo.safetensors"))
    assert sha256_of(path) in line
    assert "steps 3 (file metadata)" in line and "shift 5 (file metadata)" in line and "alpha 0.5" in line
    assert "h3: transformer: turbo turbo.safetensors fused at alpha 0.5: 6 layers" in notices


def test_explicit_steps_and_shift_override_the_turbo_with_a_notice(tiny_h3, plan, tmp_path, observed):
    path = turbo_file(tmp_path / "turbo.safetensors", {"steps": "3", "shift": "5.0"})
    _, notices = render(tiny_h3, plan, turbo=str(path), steps=3, shift=2.0)
    points, shift, _ = observed["schedules"][0]
    assert (points, shift) == (3, 2.0) and observed["forwards"] == 2
    assert any("steps=3 (2 forwards) overrides the 3 forwards it was distilled for" in n for n in notices)
    assert any("shift=2 overrides the shift 5 it was distilled with" in n for n in notices)
    assert any("alpha 1 (none given: full strength)" in n for n in notices)


def test_a_wrong_shape_turbo_is_refused_naming_the_file_key_and_shapes(tiny_h3, plan, tmp_path):
    path = turbo_file(tmp_path / "wide.safetensors", {"steps": "3", "shift": "5"}, in_features=48)
    with pytest.raises(BackendError) as caught:
        render(tiny_h3, plan, turbo=str(path))
    message = str(caught.value)
    assert "wide.safetensors" in message
    assert "transformer.transformer_blocks.0.attn.to_q.lora_A.weight has shape [2, 48]" in message
    assert "32 -> 32 (needs [2, 32] at rank 2)" in message


def test_a_lora_for_another_model_is_refused_naming_the_layer(tmp_path):
    from daotai.render.neural.lora import fuse_lora, h3_lora_state, resolve_lora

    path = turbo_file(tmp_path / "other.safetensors", layer_prefix="transformer.blocks")  # Wan's layer names
    state, prefix = h3_lora_state(resolve_lora(str(path)), "transformer")
    with pytest.raises(BackendError, match=r"other\.safetensors: transformer\.blocks\.0\.attn\.to_q\.lora_A\.weight "
                                           r"is for a layer 'blocks\.0\.attn\.to_q' this transformer does not have"):
        fuse_lora(builders.h3_transformer(1), state, prefix, 1.0, "other.safetensors")


# ------------------------------------------------------------------ resolving a turbo


def test_a_catalog_name_finds_its_file_in_the_hub_cache_and_the_file_metadata_wins(tmp_path, monkeypatch):
    from daotai.render.neural.turbo import resolve_turbo

    row = catalog.turbo_row("H3-Turbo-4step-768p")
    assert row is not None and (row.forwards, row.short_edge) == (4, 768)
    assert set(catalog.turbos()) == {f"h3-turbo-{n}step-{e}p" for n in (4, 8) for e in (544, 768)}
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(OptionError, match="is not downloaded .*huggingface.co/lightx2v/Minimax-h3-Turbo"):
        resolve_turbo(row.name)
    snapshot = tmp_path / "hub" / "models--lightx2v--Minimax-h3-Turbo" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    turbo_file(snapshot / "minimax_h3_t2v_8step_768p.safetensors")  # the other step count: not this row's
    with pytest.raises(OptionError, match="is not downloaded"):
        resolve_turbo(row.name)
    turbo_file(snapshot / "minimax_h3_t2v_4step_768p.safetensors", {"shift": "7.5"})
    turbo = resolve_turbo(row.name)
    assert turbo.label == row.name and turbo.lora.path.name == "minimax_h3_t2v_4step_768p.safetensors"
    assert (turbo.sampling.forwards, turbo.sampling.shift, turbo.sampling.alpha) == (4, 7.5, 1.0)
    assert turbo.sampling.short_edge == 768
    assert "shift 7.5 (file metadata)" in turbo.sources and f"steps 4 (catalog row {row.name})" in turbo.sources


def test_a_bare_file_needs_steps_and_shift_from_somewhere_and_bad_metadata_is_refused(tmp_path):
    from daotai.render.neural.turbo import resolve_turbo

    bare = turbo_file(tmp_path / "bare.safetensors")
    with pytest.raises(OptionError, match="bare.safetensors names no steps or shift in its metadata"):
        resolve_turbo(str(bare))
    given = resolve_turbo(str(bare), steps=5, shift=3.0)  # the user's own options stand in
    assert (given.sampling.forwards, given.sampling.shift) == (4, 3.0)
    assert given.sources == ("steps 4 (-O steps=5)", "shift 3 (-O shift=3)", "alpha 1 (none given: full strength)")
    (tmp_path / "two").mkdir()
    for name in ("a", "b"):
        turbo_file(tmp_path / "two" / f"{name}.safetensors")
    with pytest.raises(OptionError, match="exactly one .safetensors file; it holds 2") as caught:
        resolve_turbo(str(tmp_path / "two"))
    assert caught.value.issues[0].path == "turbo"  # the option the user wrote, not the plain lora one
    bad = turbo_file(tmp_path / "bad.safetensors", {"steps": "four", "shift": "5"})
    with pytest.raises(OptionError, match=r"bad.safetensors: metadata steps='four' must be a whole number"):
        resolve_turbo(str(bad))
    with pytest.raises(OptionError, match=r"metadata partition='vae' must be one of"):
        resolve_turbo(str(turbo_file(tmp_path / "p.safetensors", {"steps": "4", "shift": "5", "partition": "vae"})))


def test_the_option_refuses_unknown_names_and_a_turbo_must_cover_the_plans_workflows(tmp_path):
    from daotai.render.h3 import SPEC
    from daotai.render.neural.turbo import check_turbo_covers, resolve_turbo

    with pytest.raises(OptionError, match="h3-turbo-4step-544p"):
        SPEC.validate_options({"turbo": "h3-turbo-3step"})
    assert SPEC.validate_options({"turbo": "h3-turbo-8step-544p"}).turbo == "h3-turbo-8step-544p"
    turbo = resolve_turbo(str(turbo_file(tmp_path / "t.safetensors", {"steps": "4", "shift": "5"})))
    check_turbo_covers(turbo, {"t2va", "fl2va"}, "h3")
    with pytest.raises(BackendError, match="is for the transformer partition; the plan's ref2va shots run "
                                           "transformer_ref"):
        check_turbo_covers(turbo, {"t2va", "ref2va"}, "h3")


def test_a_544p_turbo_generates_at_its_own_canvas(tmp_path):
    from daotai.render.h3_options import H3Options
    from daotai.render.h3_runner import H3Runner

    path = turbo_file(tmp_path / "t.safetensors", {"steps": "4", "shift": "5", "short_edge": "544"})
    runner = H3Runner(H3Options(turbo=str(path), device="cpu"), "minimax-h3")
    runner.prepare()
    assert runner.defaults.steps == 5 and runner.defaults.shift == 5.0
    assert runner.canvas_settings()[0] == 544


# ------------------------------------------------------------------ memory planning


class _Runtime:
    def __init__(self, budget_bytes: float, kind: str):
        self.kind, self.device, self.memory_bytes = kind, kind, int(budget_bytes)


def test_the_planner_counts_a_lora_where_it_is_fused_in_the_same_pool(tmp_path):
    from daotai.render.h3_options import H3Options
    from daotai.render.h3_runner import H3Runner
    from daotai.render.neural.request import NativeRequest
    from daotai.runtime.memory import estimate

    path = turbo_file(tmp_path / "t.safetensors", {"steps": "4", "shift": "5"})
    # A short small request: its activations are smaller than one released-size layer's B @ A product.
    request = NativeRequest(128, 128, 22, 24.0, "", "", 0)  # (F, H, W) small: ~38 MB of activations
    from dataclasses import replace

    footprint = replace(catalog.footprint("minimax-h3"), releasable_text_encoder=False)  # one pool holds it all
    plain_need = estimate(footprint, 128, 128, 22, 2.0).peak_bytes
    product = footprint.hidden * footprint.ffn * 2  # 5376 x 14336 bf16: ~154 MB

    def runner(kind: str, budget: float, **options) -> H3Runner:
        made = H3Runner(H3Options(**options), "minimax-h3")
        made.runtime, made.planned_workflows = _Runtime(budget, kind), {"t2va"}
        if "turbo" in options:  # what prepare() resolves, without resolving a device
            from daotai.render.neural.turbo import resolve_turbo

            made.turbo = resolve_turbo(options["turbo"])
        return made

    # One pool (Apple Silicon): fusing happens with every weight resident, so the LoRA's bytes count there.
    budget = plain_need + product / 2
    assert runner("mps", budget)._tier_for(request) == "none"
    with_turbo = runner("mps", budget, turbo=str(path))
    with pytest.raises(BackendError, match="unified memory"):
        with_turbo._tier_for(request)
    roomy = runner("mps", plain_need + 2 * product, turbo=str(path))
    assert roomy._tier_for(request) == "none" and "LoRA fusing" in roomy.tier_reason
    assert roomy._lora_fusing_bytes(footprint) == path.stat().st_size + product
    # A CUDA card: the LoRA is fused on the host before placement, so the tier is what it was without it.
    for gib in (139, 79, 44):
        plain, turbo = runner("cuda", gib * 1024**3), runner("cuda", gib * 1024**3, turbo=str(path))
        full = NativeRequest(1344, 768, 124, 24.0, "", "", 0)
        assert plain._tier_for(full) == turbo._tier_for(full)


def test_the_fast_modes_step_cache_is_off_under_a_turbo(tmp_path):
    from daotai.render.h3_options import H3Options
    from daotai.render.h3_runner import H3Runner
    from daotai.render.speed import computed_steps, levers_for

    assert not all(computed_steps(4, levers_for("fast", "cuda")))  # it would reuse one of a 4-step turbo's forwards
    path = turbo_file(tmp_path / "t.safetensors", {"steps": "4", "shift": "5"})
    runner = H3Runner(H3Options(turbo=str(path), speed="fast", device="cpu"), "minimax-h3")
    runner.prepare()
    runner.tier = "none"
    runner._speed_up([])
    assert runner.speed_config.cache is None and runner.forwards() == 4
    assert any("the step cache is off" in text for text in runner.adaptations)


# ------------------------------------------------------------------ the shot cache


def test_a_lora_edited_in_place_changes_the_shot_key_and_other_backends_keys_stay(tmp_path, plan):
    from daotai.encode.video import EncodeSettings
    from daotai.run.cache import key_fields, shot_key

    path = turbo_file(tmp_path / "t.safetensors", {"steps": "4", "shift": "5"})

    def key(backend: str, **options) -> str:
        fields = key_fields(plan, plan.shots[0], backend, options, False, EncodeSettings(), None, None, {})
        return shot_key(fields)

    first = key("h3", turbo=str(path))
    assert key("h3", turbo=str(path)) == first
    turbo_file(path, {"steps": "4", "shift": "6"})  # same name, other bytes
    assert key("h3", turbo=str(path)) != first
    style = turbo_file(tmp_path / "style.safetensors")
    assert key("h3", lora=str(style)) != key("h3", lora=str(tmp_path / "missing.safetensors"))
    fields = key_fields(plan, plan.shots[0], "previz", {}, False, EncodeSettings(), None, None, {})
    assert "option_files" not in fields  # nothing named: the key's fields are as before
