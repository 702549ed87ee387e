"""The CPU cores this process may run on: the one place that counts them.

A container or ``taskset`` often grants fewer cores than the machine has, and
``os.cpu_count()`` reports the machine's; sizing thread pools, worker processes and
encoders by it would oversubscribe what the process was given. Where the platform says
which cores are ours (Linux's affinity mask) that count is used, else the machine's.
"""

from __future__ import annotations

import os


def usable_cores() -> int:
    """Cores this process may run on (at least one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1
