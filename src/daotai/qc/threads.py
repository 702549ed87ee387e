"""How many threads one process's shot checks may use.

A render checks its shots in several worker processes (daotai.qc.parallel) while later shots
render. Inside a worker, the camera checks run OpenCV on threads (frame pairs side by side, the
path's estimators on one pool). The workers share the machine's cores between them, so each is
started with its share in ``DAOTAI_QC_THREADS``: together they use about every core, not every
core each, and the render's own threads (a GPU render's launches, its encoders) are not crowded
out. Checks in the rendering process itself (no workers) may use every core.
"""

from __future__ import annotations

import os

from daotai.runtime.cores import usable_cores

THREADS_ENV = "DAOTAI_QC_THREADS"


def check_threads() -> int:
    """Threads this process's checks may keep busy: its share when a worker, else every core."""
    value = os.environ.get(THREADS_ENV, "")
    return int(value) if value.isdigit() and int(value) >= 1 else usable_cores()


def worker_share(workers: int) -> int:
    """Each of ``workers`` worker processes' share of the cores (at least one)."""
    return max(1, usable_cores() // max(1, workers))
