"""ComfyUI front end: daotai's script, exact cameras, previz controls, camera check and assembly as nodes.

Two halves, in the direction of the layers (README, "Layers"): the modules here other than
``nodes`` are plain functions over the library (numpy in, numpy out, no ComfyUI import), and
:mod:`daotai.comfy.nodes` is the thin V3 node layer over them (``comfy_api.latest``), loaded by
``comfyui/__init__.py`` at the repository root, which ComfyUI's ``custom_nodes`` scanner finds.

- :mod:`daotai.comfy.script`: read and validate a script (text or file), plan it once.
- :mod:`daotai.comfy.camera_node`: one shot's exact cameras, Plücker rays, and the Wan-Fun camera embedding.
- :mod:`daotai.comfy.previz`: one shot's previz frames, depth and character masks.
- :mod:`daotai.comfy.check`: camera adherence of any frames against the shot's plan.
- :mod:`daotai.comfy.sequence`: shot videos joined with the script's transitions, plus the timeline files.
- :mod:`daotai.comfy.h3`: one shot through the ``h3`` backend (MiniMax-H3), with looks and previz from the graph.
- :mod:`daotai.comfy.driver`: running the library's event generators with progress and cancellation.
"""
