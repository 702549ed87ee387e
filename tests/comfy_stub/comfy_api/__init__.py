"""Test stub of ComfyUI's ``comfy_api`` package (see tests/comfy_stub/README.md)."""
