"""Scale-out on Ray: the shots of a plan rendered by long-lived actors across a cluster.

Nothing here imports Ray at import time; :func:`daotai.cluster.runner.render_shots` does,
when a run asks for ``--cluster``. The base install works without Ray
(``pip install 'daotai[cluster]'`` adds it).

Running on a few machines
-------------------------
Every node needs the same Python, the same daotai version and its extras (a shot's bytes
depend on the library versions, as in a local run)::

    # head node (its address is what the others and the driver connect to)
    ray start --head --port=6379
    # every other node
    ray start --address=HEAD_IP:6379
    # from the head node (or any node): connect to the running cluster
    daotai render script.json -o out/ --cluster auto
    # from a machine outside the cluster, through Ray Client (port 10001 on the head)
    daotai render script.json -o out/ --cluster ray://HEAD_IP:10001

``--cluster local`` starts a throw-away cluster on this machine (one worker per core).
Files are encoded on the worker's machine and sent back through Ray's object store, so
no shared file system is needed; the output folder lives where ``daotai render`` runs.

Models on each node
-------------------
Neural backends resolve ``--model`` on the worker's node, so each node must have it:
either a shared (read-only) model folder mounted at the same path on every node and
passed as ``--model /shared/models/<name>``, or a per-node ``daotai models pull <name>``
before the run, which checks every file's SHA-256 and records it in the folder's manifest
(``daotai models verify <name>`` re-checks a node's copy).
Actors ask Ray for one GPU each and host memory for the model's bf16 weights (from
:mod:`daotai.runtime.memory`), so a node only gets as many workers as it has GPUs.

What to expect
--------------
Shots are independent, so throughput grows with the number of workers until the driver's
final assembly and quality checks (a few seconds per minute of video) dominate. One
worker per GPU renders as fast as a local run on that GPU plus a fixed start-up (Ray
start, actor start, the first shot's model load); with N GPUs in total a long shot list
runs close to N times the shots per hour of one GPU, while a list with fewer shots than
workers is limited by its longest shot. Previz is CPU-bound: on one machine extra workers
only help when cores are idle (``bench/cluster.py`` measures it).
"""

from typing import Any


class RayExecutor:
    """The pipeline's shot executor on a Ray cluster (see :func:`daotai.cluster.runner.render_shots`)."""

    def __init__(self, address: str):
        self.address = address
        # The shots placed so far, in the order they finish: the pipeline hands each to the QC
        # workers while later shots render, and keeps them in the shot cache if the run stops.
        self.finished: list = []

    def render_shots(self, plan, out_dir, settings, ctx, source, health) -> Any:
        """Yield events; return one ShotRecord per shot (workers sample their own device health)."""
        from daotai.cluster.runner import ClusterConfig, render_shots

        self.finished = []
        return render_shots(plan, out_dir, settings, ctx, source, ClusterConfig(address=self.address),
                            finished=self.finished)


def executor_for(settings: Any) -> RayExecutor | None:
    """The executor a front end passes to ``daotai.run.pipeline.run``: Ray when ``settings.cluster`` is set."""
    return RayExecutor(settings.cluster) if getattr(settings, "cluster", None) else None
