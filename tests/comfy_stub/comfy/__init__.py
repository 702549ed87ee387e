"""Test stub of the parts of ComfyUI's ``comfy`` package that node packs call (see tests/comfy_stub/README.md)."""
