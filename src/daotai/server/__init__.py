"""The local video service: ``create_app`` (FastAPI), the SQLite job store and worker processes.

Needs the ``server`` extra (fastapi, uvicorn, python-multipart).
"""
