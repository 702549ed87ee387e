"""The ComfyUI stub has nothing the real ComfyUI 0.3.64 API lacks.

The stub (tests/comfy_stub) once gave ``ComfyAPISync()`` an ``execution`` that the release does
not have; the nodes used it, passed their tests and crashed in ComfyUI. Here every object of the
stub that a node pack can reach (the modules ``comfy_api.latest``, its ``io``,
``comfy.model_management`` and ``comfy.utils``, the classes they define and their nested
classes, and instances of the classes nodes construct) is compared with
tests/comfy_stub/real_api_0.3.64.txt, the names checked in the release: a name the list lacks,
or an object it does not list, fails.
"""

from __future__ import annotations

import enum
import importlib
import sys
import types
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

STUB = Path(__file__).resolve().parent / "comfy_stub"
RECORD = STUB / "real_api_0.3.64.txt"
OWN = ("comfy_api", "comfy")  # the stub's top-level packages
BUILTIN_MODULES = ("builtins", "abc", "enum", "typing")


def recorded() -> dict[str, set[str]]:
    """path → names, as listed in the record."""
    listed = {}
    for line in RECORD.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            path, _, names = line.partition(":")
            assert path not in listed, f"{path} is listed twice"
            listed[path.strip()] = set(names.split())
    return listed


@pytest.fixture(scope="module")
def stub() -> Iterator[types.SimpleNamespace]:
    """The stub's modules, imported from tests/comfy_stub and forgotten again afterwards."""
    saved = {k: sys.modules.pop(k) for k in list(sys.modules) if k.split(".")[0] in OWN}
    sys.path.insert(0, str(STUB))
    try:
        yield types.SimpleNamespace(**{name.replace(".", "_"): importlib.import_module(name) for name in
                                       ("comfy_api.latest", "comfy.model_management", "comfy.utils")})
    finally:
        sys.path.remove(str(STUB))
        for key in [k for k in sys.modules if k.split(".")[0] in OWN]:
            del sys.modules[key]
        sys.modules.update(saved)


def _defined_here(value: Any) -> bool:
    module = getattr(value, "__module__", None) or ""
    return module.split(".")[0] in OWN


def _class_names(cls: type) -> set[str]:
    """Public names a class adds to the builtin and library classes it derives from."""
    names = {n for n in dir(cls) if not n.startswith("_")}
    for base in cls.__mro__:
        if base.__module__ in BUILTIN_MODULES:
            names -= set(dir(base))
    if issubclass(cls, enum.Enum):
        names -= {"name", "value"}
    return names


def _module_names(module: Any) -> set[str]:
    """Public names a module (or the ``io`` namespace) defines, leaving out what it imports."""
    names = set()
    for name in (n for n in dir(module) if not n.startswith("_")):
        value = getattr(module, name)
        if isinstance(value, types.ModuleType) and name != "io":
            continue
        if type(value).__module__ == "__future__":
            continue
        if hasattr(value, "__module__") and not _defined_here(value):  # a class, function or typing form imported
            continue
        names.add(name)
    return names


def _instance_names(value: Any) -> set[str]:
    return _class_names(type(value)) | {n for n in vars(value) if not n.startswith("_")}


def walk(path: str, value: Any, found: dict[str, set[str]]) -> None:
    """Record the names of ``value`` at ``path`` and walk into the stub's own classes it holds."""
    if path in found:
        return
    names = _module_names(value) if isinstance(value, types.ModuleType) else _class_names(value)
    found[path] = names
    for name in sorted(names):
        if name == "Parent":  # a socket class's link back to its type
            continue
        inner = getattr(value, name)
        if isinstance(inner, types.ModuleType) or (isinstance(inner, type) and _defined_here(inner)):
            walk(f"{path}.{name}", inner, found)


def instances(stub: types.SimpleNamespace) -> dict[str, Callable[[], Any]]:
    latest, utils = stub.comfy_api_latest, stub.comfy_utils
    io = latest.io
    return {
        "comfy_api.latest.ComfyAPISync()": latest.ComfyAPISync,
        "comfy_api.latest.io.NodeOutput()": lambda: io.NodeOutput(1),
        "comfy_api.latest.io.Schema()": lambda: io.Schema(node_id="x"),
        "comfy_api.latest.io.Int.Input()": lambda: io.Int.Input("x"),
        "comfy_api.latest.io.Float.Input()": lambda: io.Float.Input("x"),
        "comfy_api.latest.io.String.Input()": lambda: io.String.Input("x"),
        "comfy_api.latest.io.Boolean.Input()": lambda: io.Boolean.Input("x"),
        "comfy_api.latest.io.Combo.Input()": lambda: io.Combo.Input("x", options=["a"]),
        "comfy_api.latest.io.Image.Input()": lambda: io.Image.Input("x"),
        "comfy_api.latest.io.Image.Output()": lambda: io.Image.Output(),
        "comfy_api.latest.Types.VideoComponents()": lambda: latest.Types.VideoComponents(images=None, frame_rate=1),
        "comfy.utils.ProgressBar()": lambda: utils.ProgressBar(1),
    }


def stub_surface(stub: types.SimpleNamespace) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    walk("comfy_api.latest", stub.comfy_api_latest, found)
    walk("comfy.model_management", stub.comfy_model_management, found)
    walk("comfy.utils", stub.comfy_utils, found)
    for path, make in instances(stub).items():
        found[path] = _instance_names(make())
    return found


def test_the_stub_has_no_name_the_real_api_lacks(stub):
    real = recorded()
    found = stub_surface(stub)
    unlisted = sorted(set(found) - set(real))
    assert not unlisted, f"stub objects not checked against ComfyUI 0.3.64 (add them to {RECORD.name}): {unlisted}"
    beyond = {path: sorted(names - real[path]) for path, names in found.items() if names - real[path]}
    assert not beyond, f"the stub has names ComfyUI 0.3.64 lacks: {beyond}"


def test_the_check_sees_a_name_the_real_api_lacks(stub, monkeypatch):
    """The old stub's mistake, put back, fails the comparison."""
    monkeypatch.setattr(stub.comfy_api_latest.ComfyAPISync, "__init__",
                        lambda self: setattr(self, "execution", object()))
    found = stub_surface(stub)
    assert found["comfy_api.latest.ComfyAPISync()"] - recorded()["comfy_api.latest.ComfyAPISync()"] == {"execution"}
    assert "execution" not in recorded()["comfy_api.latest.ComfyAPISync"]


def test_the_record_names_what_nodes_use():
    real = recorded()
    assert {"ProgressBar", "set_progress_bar_global_hook"} <= real["comfy.utils"]
    assert {"processing_interrupted", "InterruptProcessingException"} <= real["comfy.model_management"]
    assert {"io", "ComfyExtension", "InputImpl", "Types"} <= real["comfy_api.latest"]
    assert real["comfy_api.latest.ComfyAPISync()"] == set()
