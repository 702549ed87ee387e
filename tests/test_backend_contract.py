"""One contract, every registered backend: what `daotai backends` lists must hold for each of them.

A backend declares itself once in its ``SPEC`` (:mod:`daotai.render.spec`); these tests hold each
registered spec to the shared contract, in the spirit of diffusers' shared pipeline tests:

- its name and a typed options model (frozen, unknown fields forbidden), and a factory in the module
  that declares it;
- an unknown option is an OptionError naming the option, the nearest valid names and every valid one;
- a tiny render gives exactly the planned frames in order at the plan's size, control channels
  exactly when the spec says ``controls``, one Audio of the shot's length exactly when it says
  ``sound``, ``render_frames`` exactly when it says ``reproducible``; a cancelled context stops the
  render; ``close`` may be called twice.

A backend registered without a row in ``TINY`` fails here: each new backend brings a tiny model
the contract can render with.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from daotai.errors import Cancelled, OptionError
from daotai.events import Audio, Frame
from daotai.render.base import RenderJob, RunContext
from daotai.render.registry import backend_names, create_backend, spec_for
from daotai.render.spec import BackendEnv, BackendOptions

SCRIPT = {
    "title": "contract", "fps": 24, "size": [96, 64], "seed": 11, "scene": "office",
    "characters": [{"id": "mara", "appearance": "red coat"}],
    "shots": [{"shot_id": "s1", "duration": 1, "characters": ["mara"], "camera": {"type": "pan", "rotate": [8, 0, 0]}}],
}
NEURAL = ("torch", "diffusers", "transformers")
MLX = ("mlx.core",)


@dataclass(frozen=True)
class Tiny:
    """How the contract renders one backend: the session fixture holding its tiny model folder (None: it
    needs no model), the options beside ``model``, and the packages without which it cannot run."""

    model_fixture: str | None
    options: dict = field(default_factory=dict)
    needs: tuple[str, ...] = ()
    slow: bool = False


TINY = {
    "previz": Tiny(None, {"labels": False}),
    "wan": Tiny("tiny_wan", {"device": "cpu", "steps": 1}, NEURAL),
    "wan-vace": Tiny("tiny_vace", {"device": "cpu", "steps": 1}, NEURAL),
    "wan-camera": Tiny("tiny_wan_camera", {"device": "cpu", "steps": 1}, NEURAL),
    "ltx": Tiny("tiny_ltx", {"device": "cpu", "steps": 1}, NEURAL),
    "wan-mlx": Tiny("tiny_wan", {"steps": 1}, NEURAL + MLX),
    "wan-vace-mlx": Tiny("tiny_vace", {"steps": 1}, NEURAL + MLX),
    "ltx2": Tiny("tiny_ltx2", {"device": "cpu", "steps": 1, "accept_licence": True}, NEURAL),
    # MiniMax-H3 renders at least 5 s (two transformer forwards per generation at 3 sigma points)
    "h3": Tiny("tiny_h3", {"device": "cpu", "steps": 3, "accept_licence": True}, NEURAL, slow=True),
    "h3-mlx": Tiny("tiny_h3", {"steps": 3, "accept_licence": True}, NEURAL + MLX, slow=True),
}


def _rendered(name: str):
    """The backend names as test parameters, the slow renders marked slow."""
    tiny = TINY.get(name)
    return pytest.param(name, marks=[pytest.mark.slow] if tiny is not None and tiny.slow else [])


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch) -> Path:
    """Licence acceptances go to the test's own config folder, never the user's."""
    monkeypatch.setenv("DAOTAI_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path / "config"


# ------------------------------------------------------------------ spec and options


@pytest.mark.parametrize("name", backend_names())
def test_a_backend_declares_its_name_options_and_factory(name):
    import importlib

    spec = spec_for(name)
    assert spec.name == name and spec.summary.strip()
    assert issubclass(spec.options, BackendOptions)
    assert spec.options.model_config.get("extra") == "forbid" and spec.options.model_config.get("frozen") is True
    assert spec.option_names() == tuple(sorted(spec.options.model_fields)) and spec.option_names()
    assert isinstance(spec.validate_options({}), spec.options)  # every option has a default
    module_name, _, attribute = spec.factory.partition(":")
    if module_name in _builtin_modules():  # built-ins keep the class beside the SPEC that names it
        module = importlib.import_module(module_name)
        assert module.SPEC is spec
        assert callable(getattr(module, attribute))


def _builtin_modules() -> tuple[str, ...]:
    from daotai.render.registry import BUILTIN_MODULES

    return BUILTIN_MODULES


def _typo(option: str) -> str:
    """The option with its last letter mistyped ('steps' → 'stepx')."""
    return option[:-1] + ("x" if option[-1] != "x" else "y")


@pytest.mark.parametrize("name", backend_names())
def test_an_unknown_option_is_refused_naming_it_and_the_nearest_valid_names(name):
    spec = spec_for(name)
    for option in spec.option_names():
        typo = _typo(option)
        with pytest.raises(OptionError) as refused:
            spec.validate_options({typo: "1"})
        (issue,) = refused.value.issues
        assert issue.path == f"options.{typo}" and f"of the {name} backend" in issue.rule
        assert "did you mean" in issue.rule and f"'{option}'" in issue.rule, issue.rule
        assert refused.value.valid == spec.option_names()
        assert str(refused.value).endswith("valid options: " + ", ".join(spec.option_names()))
    with pytest.raises(OptionError) as far:
        create_backend(name, {"qqqqzzzz": 1})  # the build path checks options before it imports anything
    assert "did you mean" not in str(far.value) and "options.qqqqzzzz" in str(far.value)


def test_the_nearest_names_come_best_first():
    with pytest.raises(OptionError, match=r"options.stepz: 4 is not an option of the wan backend; "
                                          r"did you mean 'steps'\?; valid options: adaptive, "):
        spec_for("wan").validate_options({"stepz": 4})


# ------------------------------------------------------------------ a tiny render


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    from daotai.plan.planner import plan_script
    from daotai.script.load import load_script

    path = tmp_path_factory.mktemp("contract") / "contract.json"
    path.write_text(json.dumps(SCRIPT))
    return plan_script(load_script(path))


def _backend(name: str, request, root: Path):
    tiny = TINY.get(name)
    if tiny is None:
        pytest.fail(f"backend {name!r} has no tiny model in tests/test_backend_contract.py TINY: add one")
    for module in tiny.needs:
        pytest.importorskip(module, reason=f"the {name} backend's tiny render needs {module}")
    options = dict(tiny.options)
    if tiny.model_fixture is not None:
        options["model"] = str(request.getfixturevalue(tiny.model_fixture))
    return create_backend(name, options, BackendEnv(reference_root=root))


@pytest.mark.parametrize("name", [_rendered(n) for n in backend_names()])
def test_a_tiny_render_keeps_the_contract_its_spec_declares(name, plan, request, tmp_path):
    spec = spec_for(name)
    shot = plan.shots[0]
    backend = _backend(name, request, tmp_path)
    try:
        events = list(backend.render(RenderJob(plan, shot, controls=True), RunContext()))
        frames = [e for e in events if isinstance(e, Frame)]
        assert [f.index for f in frames] == list(range(shot.frames))  # exactly the planned frames, in order
        assert all(f.shot_id == shot.shot_id for f in frames)
        assert all(f.rgb.shape == (plan.height, plan.width, 3) and f.rgb.dtype == np.uint8 for f in frames)
        # control channels exactly when the spec declares them
        assert all((f.depth is not None and f.mask is not None) == spec.controls for f in frames)
        if spec.controls:
            assert all(f.depth.shape == f.mask.shape == (plan.height, plan.width) for f in frames)
        # one sound of the shot's length (within half a frame) exactly when the spec declares sound
        sounds = [e for e in events if isinstance(e, Audio)]
        assert len(sounds) == (1 if spec.sound else 0)
        for sound in sounds:
            assert sound.samples.dtype == np.float32 and sound.samples.ndim == 2
            assert abs(len(sound.samples) / sound.rate - shot.frames / plan.fps) <= 0.5 / plan.fps
        assert hasattr(backend, "render_frames") == spec.reproducible
        # a cancelled context stops the render before it finishes the shot
        stopped = RunContext()
        stopped.cancel.set()
        with pytest.raises(Cancelled):
            for _event in backend.render(RenderJob(plan, shot, controls=False), stopped):
                pass
    finally:
        backend.close()
    backend.close()  # closing again is harmless
