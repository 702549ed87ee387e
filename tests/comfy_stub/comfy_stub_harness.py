"""What ComfyUI's loader and executor do with a V3 node pack, as a test harness over the stub.

``load_pack(module)`` awaits the module's ``comfy_entrypoint``, checks it returned a
``ComfyExtension``, and registers every node after checking its schema (``schema_problems``: ids
unique within and across nodes, every socket typed, widget defaults valid). ``run_node(cls,
**inputs)`` runs one node the way the executor runs it: unknown inputs refused, missing widget
values filled with their defaults, required inputs enforced, widget values checked against
their ranges and options, ``validate_inputs`` called with the constant inputs it names (a
string answer fails the prompt, as in ComfyUI), then ``execute``; the outputs are checked
against the declared types. Failures raise :class:`PromptError` with ComfyUI-like messages.

The stricter checks live here, not in the stub, so that the stub has no name ComfyUI 0.3.64
lacks (tests/test_comfy_stub_surface.py). Progress goes where ComfyUI's server sends it: to the
global hook of ``comfy.utils``, which here records ``(value, total)`` in ``PROGRESS`` and, as the
server's hook does, raises ``InterruptProcessingException`` when stop was pressed. A picture sent
with an update goes through what the server does with it (ComfyUI 0.3.64's ``send_image``: a
``(format, PIL image, largest side)`` triple, the image fitted into the side and saved as JPEG or
PNG) and is recorded in ``PREVIEWS``; anything the server could not send fails the node.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import math
import sys
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterator

STUB = Path(__file__).resolve().parent
OWN_MODULES = ("comfy_api", "comfy")  # top-level packages of the stub


PROGRESS: list[tuple[int, int]] = []  # every progress update of the running node, in order
PREVIEWS: list[SimpleNamespace] = []  # every picture sent with an update: value, total, size, data


class PromptError(Exception):
    """The prompt (graph) would be refused before running, or a node broke its declared contract."""


def _progress_hook(value: int, total: int, preview: Any = None, node_id: str | None = None) -> None:
    """What ComfyUI's server does with a progress update: stop when asked, else show it (here: record it)."""
    import comfy.model_management

    comfy.model_management.throw_exception_if_processing_interrupted()
    PROGRESS.append((value, total))
    if preview is not None:
        PREVIEWS.append(_sent_picture(value, total, preview))


def _sent_picture(value: int, total: int, preview: Any) -> SimpleNamespace:
    """What ComfyUI's server sends for a preview, or PromptError where it would break."""
    import io

    from PIL import Image, ImageOps

    if not (isinstance(preview, tuple) and len(preview) == 3):
        raise PromptError(f"a preview must be (format, image, max_size), got {preview!r}")
    kind, image, max_size = preview
    if kind not in ("JPEG", "PNG") or not isinstance(image, Image.Image):
        raise PromptError(f"a preview must be a JPEG or PNG PIL image, got {kind!r} {type(image).__name__}")
    if max_size is not None:
        image = ImageOps.contain(image, (max_size, max_size), Image.Resampling.BILINEAR)
    data = io.BytesIO()
    image.save(data, format=kind, quality=95, compress_level=1)  # raises where the server's send would
    return SimpleNamespace(value=value, total=total, size=image.size, data=data.getvalue())


# ------------------------------------------------------------------ stricter checks of declarations


def _number_problems(widget: Any, kind: type | tuple[type, ...]) -> list[str]:
    found = []
    for name in ("default", "min", "max", "step"):
        value = getattr(widget, name, None)
        if value is not None and (isinstance(value, bool) or not isinstance(value, kind)):
            found.append(f"{name} {value!r} is not a {widget.io_type} value")
        elif isinstance(value, float) and not math.isfinite(value):
            found.append(f"{name} {value!r} is not finite")
    if found:
        return found
    if widget.min is not None and widget.max is not None and widget.min > widget.max:
        found.append(f"min {widget.min} > max {widget.max}")
    if widget.default is None:
        found.append("has no default")
    elif ((widget.min is not None and widget.default < widget.min)
          or (widget.max is not None and widget.default > widget.max)):
        found.append(f"default {widget.default} lies outside [{widget.min}, {widget.max}]")
    if widget.step is not None and widget.step <= 0:
        found.append(f"step {widget.step} must be > 0")
    return found


def _number_value(widget: Any, value: Any, kind: type | tuple[type, ...]) -> str | None:
    if isinstance(value, bool) or not isinstance(value, kind):
        return f"{value!r} is not a {widget.io_type}"
    if widget.min is not None and value < widget.min:
        return f"{value} is below the minimum {widget.min}"
    if widget.max is not None and value > widget.max:
        return f"{value} is above the maximum {widget.max}"
    return None


_PLAIN = {"BOOLEAN": bool, "STRING": str}
_NUMBER = {"INT": int, "FLOAT": (int, float)}


def widget_problems(widget: Any) -> list[str]:
    """Where a widget's declared default (and range, options) breaks its own rules."""
    kind = widget.io_type
    if kind in _NUMBER:
        return _number_problems(widget, _NUMBER[kind])
    if kind in _PLAIN:
        return [] if isinstance(widget.default, _PLAIN[kind]) else [f"default {widget.default!r} is not a {kind}"]
    if kind == "COMBO":
        if not widget.options:
            return ["has no options"]
        if len(set(widget.options)) != len(widget.options):
            return [f"options {widget.options!r} repeat a value"]
        if widget.default is not None and widget.default not in widget.options:
            return [f"default {widget.default!r} is not one of the options {widget.options!r}"]
    return []


def widget_value_problem(widget: Any, value: Any) -> str | None:
    """Why ``value`` is not acceptable for ``widget``, or None (what ComfyUI's prompt validation refuses)."""
    kind = widget.io_type
    if kind in _NUMBER:
        return _number_value(widget, value, _NUMBER[kind])
    if kind in _PLAIN:
        return None if isinstance(value, _PLAIN[kind]) else f"{value!r} is not a {kind}"
    if kind == "COMBO":
        return None if value in widget.options else f"{value!r} is not one of {widget.options!r}"
    return None


def schema_problems(schema: Any) -> list[str]:
    """Every problem a careful reviewer would flag in a node's declaration (stricter than ComfyUI)."""
    from comfy_api.latest import io

    problems = []
    if not schema.node_id or not isinstance(schema.node_id, str):
        problems.append(f"node_id {schema.node_id!r} must be a non-empty string")
    if not schema.display_name:
        problems.append(f"{schema.node_id}: has no display_name")
    for item in [*(schema.inputs or []), *(schema.outputs or [])]:
        if not isinstance(item, (io.Input, io.Output)):
            problems.append(f"{schema.node_id}: {item!r} is not an Input or Output")
            continue
        if not item.id:
            problems.append(f"{schema.node_id}: an input or output has no id")
        if not getattr(item.Parent, "io_type", None):
            problems.append(f"{schema.node_id}.{item.id}: has no type")
        if isinstance(item, io.WidgetInput):
            problems += [f"{schema.node_id}.{item.id}: {p}" for p in widget_problems(item)]
    ids = [i.id for i in schema.inputs or []] + [o.id for o in schema.outputs or []]
    repeated = sorted(name for name, count in Counter(ids).items() if count > 1)
    if repeated:
        problems.append(f"{schema.node_id}: ids {repeated} repeat (inputs and outputs share one namespace)")
    return problems


def _stub_module_names(extra: tuple[str, ...]) -> list[str]:
    return [name for name in sys.modules
            if name.split(".")[0] in OWN_MODULES or name in extra or name.startswith(tuple(f"{e}." for e in extra))]


@contextmanager
def stub_pack(pack_dir: Path, name: str = "daotai_comfyui_pack") -> Iterator[SimpleNamespace]:
    """The stub importable as ``comfy_api`` / ``comfy`` and the pack at ``pack_dir`` loaded through it
    (as ComfyUI loads a custom_nodes folder); on exit the stub's modules, the pack and the node
    module are forgotten and whatever they had shadowed is put back."""
    extra = (name, "daotai.comfy.nodes")
    saved = {key: sys.modules.pop(key) for key in _stub_module_names(extra)}
    sys.path.insert(0, str(STUB))
    try:
        spec = importlib.util.spec_from_file_location(name, Path(pack_dir) / "__init__.py",
                                                      submodule_search_locations=[str(pack_dir)])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        import comfy.model_management as model_management
        import comfy.utils
        import comfy_api.latest as latest

        comfy.utils.set_progress_bar_global_hook(_progress_hook)
        yield SimpleNamespace(nodes=load_pack(module), run=run_node, PromptError=PromptError, api=latest,
                              mm=model_management, module=module, progress=PROGRESS, previews=PREVIEWS,
                              schema_problems=schema_problems, widget_value_problem=widget_value_problem)
    finally:
        sys.path.remove(str(STUB))
        for key in _stub_module_names(extra):
            del sys.modules[key]
        sys.modules.update(saved)


def load_pack(module: Any) -> dict[str, Any]:
    """node_id → node class of the pack ``module`` (its ``comfy_entrypoint``), every schema checked."""
    from comfy_api.latest import ComfyExtension
    entry = getattr(module, "comfy_entrypoint", None)
    if not callable(entry):
        raise PromptError(f"{module.__name__}: no callable comfy_entrypoint")
    extension = asyncio.run(entry()) if inspect.iscoroutinefunction(entry) else entry()
    if not isinstance(extension, ComfyExtension):
        raise PromptError(f"{module.__name__}: comfy_entrypoint returned {type(extension).__name__}, not a ComfyExtension")
    asyncio.run(extension.on_load())
    nodes = asyncio.run(extension.get_node_list())
    if not isinstance(nodes, list):
        raise PromptError(f"{module.__name__}: get_node_list returned {type(nodes).__name__}, not a list")
    registry: dict[str, Any] = {}
    for cls in nodes:
        schema = cls.GET_SCHEMA()
        problems = schema_problems(schema)
        if problems:
            raise PromptError("; ".join(problems))
        if schema.node_id in registry:
            raise PromptError(f"node id {schema.node_id!r} is declared twice")
        registry[schema.node_id] = cls
    return registry


def _tensor_shape(value: Any) -> tuple[int, ...] | None:
    shape = getattr(value, "shape", None)
    return tuple(int(s) for s in shape) if shape is not None and hasattr(value, "dtype") else None


def _is_float_tensor(value: Any) -> bool:
    return bool(getattr(value, "is_floating_point", lambda: False)())


def check_value(io_type: str, value: Any, where: str) -> None:
    """Raise PromptError when ``value`` is not what a socket of ``io_type`` carries."""
    shape = _tensor_shape(value)
    problem = None
    if io_type == "INT":
        problem = None if isinstance(value, int) and not isinstance(value, bool) else "is not an int"
    elif io_type == "FLOAT":
        problem = None if isinstance(value, (int, float)) and not isinstance(value, bool) else "is not a float"
    elif io_type == "BOOLEAN":
        problem = None if isinstance(value, bool) else "is not a bool"
    elif io_type == "STRING":
        problem = None if isinstance(value, str) else "is not a str"
    elif io_type == "IMAGE":
        if shape is None or len(shape) != 4 or shape[-1] not in (3, 4) or not _is_float_tensor(value):
            problem = f"is not an IMAGE batch (B, H, W, 3) of floats (shape {shape})"
        elif shape[0] and (float(value.min()) < 0.0 or float(value.max()) > 1.0):
            problem = "has IMAGE values outside [0, 1]"
    elif io_type == "MASK":
        if shape is None or len(shape) != 3 or not _is_float_tensor(value):
            problem = f"is not a MASK batch (B, H, W) of floats (shape {shape})"
    elif io_type == "WAN_CAMERA_EMBEDDING":
        if shape is None or len(shape) != 5 or shape[:2] != (1, 24) or not _is_float_tensor(value):
            problem = f"is not a Wan camera embedding (1, 24, T, H, W) (shape {shape})"
    elif io_type == "VIDEO":
        from comfy_api.latest import Input

        problem = None if isinstance(value, Input.Video) else "is not a VIDEO (comfy_api.latest.Input.Video)"
    elif value is None:
        problem = "is None"
    if problem:
        raise PromptError(f"{where}: {type(value).__name__} {problem}")


def run_node(cls: Any, **given: Any) -> tuple:
    """Run a node as ComfyUI's executor would, with ``given`` as its connected and widget values."""
    from comfy_api.latest import io

    schema = cls.GET_SCHEMA()
    problems = schema_problems(schema)
    if problems:
        raise PromptError("; ".join(problems))
    node = schema.node_id
    declared = {i.id: i for i in schema.inputs or []}
    unknown = sorted(set(given) - set(declared))
    if unknown:
        raise PromptError(f"{node}: unknown inputs {unknown}")
    values: dict[str, Any] = {}
    for item in schema.inputs or []:
        if item.id in given and given[item.id] is not None:
            value = given[item.id]
            if isinstance(item, io.WidgetInput):
                problem = widget_value_problem(item, value)
                if problem:
                    raise PromptError(f"{node}.{item.id}: Value not valid: {problem}")
            else:
                check_value(item.io_type, value, f"{node}.{item.id}")
            values[item.id] = value
        elif isinstance(item, io.WidgetInput) and item.default is not None:
            values[item.id] = item.default
        elif not item.optional:
            raise PromptError(f"{node}.{item.id}: Required input is missing")
    if getattr(cls.validate_inputs, "__func__", None) is not io.ComfyNode.validate_inputs.__func__:
        parameters = inspect.signature(cls.validate_inputs).parameters
        takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
        constants = {k: v for k, v in values.items()
                     if isinstance(declared[k], io.WidgetInput) and (takes_all or k in parameters)}
        answer = cls.validate_inputs(**constants)
        if answer is not True:  # as ComfyUI reports it: once for every input the method names
            raise PromptError(f"{node}: Failed to validate prompt: " +
                              "\n".join(f"{name} - {answer}" for name in constants))
    output = cls.EXECUTE_NORMALIZED(**values)
    outputs = schema.outputs or []
    if len(output.args) != len(outputs):
        raise PromptError(f"{node}: returned {len(output.args)} values for {len(outputs)} outputs")
    for declared_output, value in zip(outputs, output.args, strict=True):
        check_value(declared_output.io_type, value, f"{node} output {declared_output.id}")
    return output.args
