"""Stub of ``comfy_api.latest.io`` (ComfyUI 0.3.64): node schemas, socket types, node base class.

Signatures follow the release: ``Schema(node_id, display_name, category, inputs, outputs,
hidden, description, is_output_node, …)``; ``Int.Input(id, display_name, optional, tooltip,
lazy, default, min, max, step, …)``; ``Output(id, display_name, tooltip, is_output_list)``;
``NodeOutput(*args, ui=None, expand=None, block_execution=None)``. ``Schema.validate`` checks
what the release checks (ids unique); the stricter checks the test harness runs live in
``comfy_stub_harness`` (see tests/comfy_stub/README.md), so the stub has no name the release lacks.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from enum import Enum
from typing import Any


class NumberDisplay(str, Enum):
    number = "number"
    slider = "slider"


class UploadType(str, Enum):
    image = "image_upload"
    audio = "audio_upload"
    video = "video_upload"
    model = "file_upload"


# ------------------------------------------------------------------ inputs and outputs


class Input:
    """A socket input (a value from another node's output)."""

    Parent: Any = None

    def __init__(self, id: str, display_name: str | None = None, optional: bool = False, tooltip: str | None = None,
                 lazy: bool | None = None, extra_dict: dict | None = None):
        self.id = id
        self.display_name = display_name
        self.optional = optional
        self.tooltip = tooltip
        self.lazy = lazy
        self.extra_dict = extra_dict or {}

    @property
    def io_type(self) -> str:
        return self.Parent.io_type

    def as_dict(self) -> dict:
        values = {"display_name": self.display_name, "optional": self.optional, "tooltip": self.tooltip,
                  "lazy": self.lazy}
        return {k: v for k, v in values.items() if v not in (None, False)} | self.extra_dict


class WidgetInput(Input):
    """An input shown as a widget (a constant on the node) unless converted to a socket."""

    def __init__(self, id: str, display_name: str | None = None, optional: bool = False, tooltip: str | None = None,
                 lazy: bool | None = None, default: Any = None, socketless: bool | None = None,
                 widget_type: str | None = None, force_input: bool | None = None, extra_dict: dict | None = None):
        super().__init__(id, display_name, optional, tooltip, lazy, extra_dict)
        self.default = default
        self.socketless = socketless
        self.widget_type = widget_type
        self.force_input = force_input

    def as_dict(self) -> dict:
        values = {"default": self.default, "socketless": self.socketless, "forceInput": self.force_input}
        return super().as_dict() | {k: v for k, v in values.items() if v is not None}


class Output:
    """A node output."""

    Parent: Any = None

    def __init__(self, id: str | None = None, display_name: str | None = None, tooltip: str | None = None,
                 is_output_list: bool = False):
        self.id = id
        self.display_name = display_name
        self.tooltip = tooltip
        self.is_output_list = is_output_list

    @property
    def io_type(self) -> str:
        return self.Parent.io_type


class ComfyTypeIO:
    """A socket type: ``io_type`` plus its Input and Output classes."""

    io_type: str = None  # type: ignore[assignment]
    Type: Any = Any

    class Input(Input):
        pass

    class Output(Output):
        pass


def comfytype(io_type: str):
    """Bind ``io_type`` to a ComfyTypeIO subclass and give it its own Input / Output classes."""

    def bind(cls: type) -> type:
        cls.io_type = io_type
        cls.Input = type(f"{cls.__name__}Input", (cls.Input,), {"Parent": cls})
        cls.Output = type(f"{cls.__name__}Output", (cls.Output,), {"Parent": cls})
        return cls

    return bind


def Custom(io_type: str) -> type[ComfyTypeIO]:
    """A socket type for values only the pack's own nodes understand."""

    @comfytype(io_type)
    class CustomType(ComfyTypeIO):
        pass

    return CustomType


@comfytype("BOOLEAN")
class Boolean(ComfyTypeIO):
    Type = bool

    class Input(WidgetInput):
        def __init__(self, id: str, display_name: str | None = None, optional: bool = False,
                     tooltip: str | None = None, lazy: bool | None = None, default: bool | None = None,
                     label_on: str | None = None, label_off: str | None = None, socketless: bool | None = None,
                     force_input: bool | None = None):
            super().__init__(id, display_name, optional, tooltip, lazy, default, socketless, None, force_input)
            self.label_on = label_on
            self.label_off = label_off


@comfytype("INT")
class Int(ComfyTypeIO):
    Type = int

    class Input(WidgetInput):
        def __init__(self, id: str, display_name: str | None = None, optional: bool = False,
                     tooltip: str | None = None, lazy: bool | None = None, default: int | None = None,
                     min: int | None = None, max: int | None = None, step: int | None = None,
                     control_after_generate: bool | None = None, display_mode: NumberDisplay | None = None,
                     socketless: bool | None = None, force_input: bool | None = None):
            super().__init__(id, display_name, optional, tooltip, lazy, default, socketless, None, force_input)
            self.min, self.max, self.step = min, max, step
            self.control_after_generate = control_after_generate
            self.display_mode = display_mode


@comfytype("FLOAT")
class Float(ComfyTypeIO):
    Type = float

    class Input(WidgetInput):
        def __init__(self, id: str, display_name: str | None = None, optional: bool = False,
                     tooltip: str | None = None, lazy: bool | None = None, default: float | None = None,
                     min: float | None = None, max: float | None = None, step: float | None = None,
                     round: float | None = None, display_mode: NumberDisplay | None = None,
                     socketless: bool | None = None, force_input: bool | None = None):
            super().__init__(id, display_name, optional, tooltip, lazy, default, socketless, None, force_input)
            self.min, self.max, self.step, self.round = min, max, step, round
            self.display_mode = display_mode


@comfytype("STRING")
class String(ComfyTypeIO):
    Type = str

    class Input(WidgetInput):
        def __init__(self, id: str, display_name: str | None = None, optional: bool = False,
                     tooltip: str | None = None, lazy: bool | None = None, multiline: bool = False,
                     placeholder: str | None = None, default: str | None = None, dynamic_prompts: bool | None = None,
                     socketless: bool | None = None, force_input: bool | None = None):
            super().__init__(id, display_name, optional, tooltip, lazy, default, socketless, None, force_input)
            self.multiline = multiline
            self.placeholder = placeholder
            self.dynamic_prompts = dynamic_prompts


@comfytype("COMBO")
class Combo(ComfyTypeIO):
    Type = str

    class Input(WidgetInput):
        def __init__(self, id: str, options: list | type[Enum] | None = None, display_name: str | None = None,
                     optional: bool = False, tooltip: str | None = None, lazy: bool | None = None,
                     default: Any = None, control_after_generate: bool | None = None,
                     upload: UploadType | None = None, image_folder: Any = None, remote: Any = None,
                     socketless: bool | None = None):
            if isinstance(options, type) and issubclass(options, Enum):
                options = [member.value for member in options]
            if isinstance(default, Enum):
                default = default.value
            super().__init__(id, display_name, optional, tooltip, lazy, default, socketless)
            self.options = options
            self.multiselect = False
            self.control_after_generate = control_after_generate
            self.upload = upload


@comfytype("IMAGE")
class Image(ComfyTypeIO):
    """(batch, height, width, channels) float tensor in [0, 1]."""


@comfytype("MASK")
class Mask(ComfyTypeIO):
    """(batch, height, width) float tensor in [0, 1]."""


@comfytype("WAN_CAMERA_EMBEDDING")
class WanCameraEmbedding(ComfyTypeIO):
    """(1, 24, latent frames, height, width) float tensor: Plücker rays packed 4 frames per latent frame."""


@comfytype("LATENT")
class Latent(ComfyTypeIO):
    pass


@comfytype("CONDITIONING")
class Conditioning(ComfyTypeIO):
    pass


@comfytype("MODEL")
class Model(ComfyTypeIO):
    pass


@comfytype("CLIP")
class Clip(ComfyTypeIO):
    pass


@comfytype("VAE")
class Vae(ComfyTypeIO):
    pass


@comfytype("CLIP_VISION")
class ClipVision(ComfyTypeIO):
    pass


@comfytype("CLIP_VISION_OUTPUT")
class ClipVisionOutput(ComfyTypeIO):
    pass


@comfytype("AUDIO")
class Audio(ComfyTypeIO):
    pass


@comfytype("VIDEO")
class Video(ComfyTypeIO):
    """A ``comfy_api.latest.Input.Video`` (VideoFromFile, VideoFromComponents)."""


@comfytype("*")
class AnyType(ComfyTypeIO):
    pass


# ------------------------------------------------------------------ schema and node


class Hidden(str, Enum):
    unique_id = "UNIQUE_ID"
    prompt = "PROMPT"
    extra_pnginfo = "EXTRA_PNGINFO"
    dynprompt = "DYNPROMPT"
    auth_token_comfy_org = "AUTH_TOKEN_COMFY_ORG"
    api_key_comfy_org = "API_KEY_COMFY_ORG"


@dataclass
class Schema:
    """What a node is: its id, where it sits in the menu, its inputs and outputs."""

    node_id: str
    display_name: str | None = None
    category: str = "sd"
    inputs: list[Input] | None = None
    outputs: list[Output] | None = None
    hidden: list[Hidden] | None = None
    description: str = ""
    is_input_list: bool = False
    is_output_node: bool = False
    is_deprecated: bool = False
    is_experimental: bool = False
    is_api_node: bool = False
    not_idempotent: bool = False
    enable_expand: bool = False

    def validate(self) -> None:
        """What ComfyUI checks: input ids unique, output ids unique, and no id both an input and an output."""
        inputs = [i.id for i in self.inputs or []]
        outputs = [o.id for o in self.outputs or []]
        problems = []
        for kind, ids in (("Input", inputs), ("Output", outputs)):
            repeated = [name for name, count in Counter(ids).items() if count > 1]
            if repeated:
                problems.append(f"{kind} ids must be unique, but {repeated} are not.")
        both = set(inputs) & set(outputs)
        if both:
            problems.append(f"Ids must be unique between inputs and outputs, but {both} are not.")
        if problems:
            raise ValueError("\n".join(problems))

    def finalize(self) -> None:
        """Outputs without an id get one from their position and type; output nodes get their hidden inputs."""
        if self.is_output_node:
            self.hidden = list(self.hidden or [])
            for wanted in (Hidden.prompt, Hidden.extra_pnginfo):
                if wanted not in self.hidden:
                    self.hidden.append(wanted)
        for index, output in enumerate(self.outputs or []):
            if output.id is None:
                output.id = f"_{index}_{output.io_type}_"


class ComfyNode:
    """Base of every V3 node: override ``define_schema`` and ``execute`` (classmethods)."""

    SCHEMA: Schema | None = None
    hidden: Any = None

    @classmethod
    def define_schema(cls) -> Schema:
        raise NotImplementedError

    @classmethod
    def execute(cls, **kwargs: Any) -> NodeOutput:
        raise NotImplementedError

    @classmethod
    def validate_inputs(cls, **kwargs: Any) -> bool | str:
        raise NotImplementedError

    @classmethod
    def fingerprint_inputs(cls, **kwargs: Any) -> Any:
        raise NotImplementedError

    @classmethod
    def VALIDATE_CLASS(cls) -> None:
        for name in ("define_schema", "execute"):
            if getattr(cls, name).__func__ is getattr(ComfyNode, name).__func__:
                raise Exception(f"No {name} function was defined for node class {cls.__name__}.")

    @classmethod
    def GET_SCHEMA(cls) -> Schema:
        """The finalized, validated schema (as ComfyUI's loader builds it)."""
        cls.VALIDATE_CLASS()
        schema = cls.define_schema()
        schema.finalize()
        schema.validate()
        cls.SCHEMA = schema
        return schema

    @classmethod
    def EXECUTE_NORMALIZED(cls, **kwargs: Any) -> NodeOutput:
        """Run ``execute`` and normalise what it returned to a NodeOutput (None, tuple and dict allowed)."""
        returned = cls.execute(**kwargs)
        if returned is None:
            return NodeOutput()
        if isinstance(returned, NodeOutput):
            return returned
        if isinstance(returned, tuple):
            return NodeOutput(*returned)
        if isinstance(returned, dict):
            return NodeOutput(*returned.get("result", ()), ui=returned.get("ui"), expand=returned.get("expand"))
        raise Exception(f"Invalid return type from node: {type(returned)}")


class NodeOutput:
    """A node's results, in the order of its schema's outputs (plus optional UI data)."""

    def __init__(self, *args: Any, ui: Any = None, expand: dict | None = None, block_execution: str | None = None):
        self.args = args
        self.ui = ui
        self.expand = expand
        self.block_execution = block_execution

    @property
    def result(self) -> tuple | None:
        return self.args if self.args else None

    def __getitem__(self, index: int) -> Any:
        return self.args[index]
