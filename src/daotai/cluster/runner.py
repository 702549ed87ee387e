"""Render the shots of a plan on a Ray cluster: warm actors, dynamic dispatch, retries.

``render_shots`` is the cluster form of the pipeline's per-shot loop. It starts one
long-lived actor per CPU slot (previz) or per GPU (neural backends), each holding a warm
backend, and hands shots to whichever actor is idle, so a long shot list keeps every
actor busy with no barrier between shots. An actor encodes a whole shot with the same
``daotai.run.shots.render_shot`` a local run uses, into a temp folder on its own machine,
and returns the file bytes through Ray's object store; the driver writes them into the
output folder atomically (temp name + rename), so partial files never appear there and
remote nodes need no shared filesystem. Everything after rendering (assembly, qc,
contact sheet, timeline, manifest) is the pipeline's own code.

Split shots: with the backend option ``gpus=N`` each actor renders its shots over N GPUs
(:mod:`daotai.render.neural.parallel`). Its N rank processes are children of the actor and
must all see the N GPUs, so the actor takes one placement group of N GPUs on one node
(``STRICT_PACK``; a single bundle holds all N, which Ray places on one node by definition)
and asks for the N GPUs itself; a cluster of 8-GPU nodes then renders 4 two-GPU shots at once.

Faults: an actor that dies mid-shot (process killed, node lost) is replaced and its shot
goes back to the queue for any idle actor, at most ``max_retries`` times per shot; each
retry is written into the shot's record (its notices reach the manifest). Cancellation
(``ctx.cancel`` or Ctrl-C) asks every busy actor to stop at its next frame, waits briefly,
then kills the actors.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generator, Iterator

from daotai.errors import BackendError, DaotaiError, DependencyMissing
from daotai.events import Event, Notice, Output
from daotai.plan.layout import RenderLayout
from daotai.render.base import RunContext

ADDRESS_HELP = "local, auto or ray://host:port"
CANCEL_GRACE_S = 10.0  # how long busy actors get to stop cleanly before they are killed


@dataclass(frozen=True)
class ClusterConfig:
    """Where to run and how many actors; 0 workers = one per CPU slot / GPU of the cluster."""

    address: str = "local"
    workers: int = 0
    max_retries: int = 2  # extra attempts per shot after a worker died
    poll_s: float = 0.2  # seconds between progress polls of busy actors


@dataclass(frozen=True)
class ActorResources:
    """What one actor asks Ray for."""

    num_cpus: float
    num_gpus: float
    memory_bytes: int  # host memory; 0 = no request
    gpus_per_shot: int = 1  # > 1: the actor splits each shot over this many GPUs of one node

    def placement(self) -> tuple[list[dict[str, float]], str] | None:
        """The placement group (bundles, strategy) a split-shot actor reserves; None for a one-GPU actor."""
        if self.gpus_per_shot <= 1:
            return None
        bundle = {"CPU": float(self.num_cpus), "GPU": float(self.num_gpus)}
        if self.memory_bytes:
            bundle["memory"] = float(self.memory_bytes)
        return [bundle], "STRICT_PACK"


def check_address(address: str) -> str:
    """The --cluster value, validated: local, auto, ray://host:port or host:port."""
    value = address.strip()
    if value in ("local", "auto"):
        return value
    rest = value[len("ray://"):] if value.startswith("ray://") else value
    host, _, port = rest.rpartition(":")
    if host and port.isdigit() and 0 < int(port) < 65536:
        return value
    raise BackendError(f"--cluster: {address!r} must be {ADDRESS_HELP}")


def actor_resources(backend: str, model: str | None, gpus: int = 1) -> ActorResources:
    """Resources per actor: one CPU slot for CPU and Apple (MLX) backends; ``gpus`` GPUs plus staged weights otherwise.

    A split shot (``gpus`` > 1) runs one rank process per GPU, each holding the whole model in
    host memory while it loads: CPUs and host memory scale with ``gpus`` too.
    """
    from daotai import catalog
    from daotai.render.registry import spec_for

    spec = spec_for(backend)
    if spec.device_class != "accelerator":  # previz (llvmpipe + x264), or MLX on the Mac's GPU / a Linux CPU
        return ActorResources(num_cpus=1, num_gpus=0, memory_bytes=0)
    name = model or spec.default_model
    row = catalog.model_row(name) if name else None
    if row is None:  # a local folder or an unknown model: just the GPUs
        return ActorResources(num_cpus=gpus, num_gpus=gpus, memory_bytes=0, gpus_per_shot=gpus)
    # bf16 weights are loaded into host memory before moving to the GPU, and the offload
    # tiers the memory planner may choose keep them there.
    return ActorResources(num_cpus=gpus, num_gpus=gpus, memory_bytes=int(row.footprint.weight_params * 2) * gpus,
                          gpus_per_shot=gpus)


def reserve_group(ray, res: ActorResources, ctx: RunContext, poll_s: float) -> Any:
    """Reserve the placement group of a split-shot actor (waiting, cancellably, while the GPUs are busy)."""
    bundles, strategy = res.placement() or ([], "")
    from ray.util.placement_group import placement_group, remove_placement_group

    group = placement_group(bundles, strategy=strategy, name=f"daotai-{res.gpus_per_shot}gpu")
    while not ray.wait([group.ready()], timeout=poll_s)[0]:
        if ctx.cancel.is_set():
            remove_placement_group(group)
            ctx.check()
    return group


def worker_count(res: ActorResources, cluster: dict[str, float], shots: int, wanted: int) -> int:
    """How many actors: what the cluster holds for the request, capped by shots and the ask."""
    slots = cluster.get("GPU", 0.0) // res.num_gpus if res.num_gpus else cluster.get("CPU", 1.0) // res.num_cpus
    count = int(slots)
    if wanted > 0:
        count = min(count, wanted) if count else 0
    count = min(count, shots)
    if count < 1:
        need = f"{res.num_gpus:g} GPU" if res.num_gpus else f"{res.num_cpus:g} CPU"
        raise BackendError(f"--cluster: the cluster has no free slot for one worker ({need} each; has {cluster})")
    return count


def connect(address: str) -> bool:
    """Join (or start) a Ray cluster; True when this call connected (so the caller disconnects after)."""
    try:
        import ray
    except ImportError:
        raise DependencyMissing("ray", "cluster", "rendering on a cluster (--cluster)") from None
    if ray.is_initialized():  # a caller (a server, a test) already holds a connection
        return False
    address = check_address(address)
    try:
        if address == "local":
            ray.init(address="local", num_cpus=os.cpu_count() or 1, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
        else:
            ray.init(address=address, log_to_driver=False, configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise BackendError(f"--cluster: cannot connect to {address!r} ({str(exc).splitlines()[0]})") from None
    return True


@dataclass
class _Slot:
    """One actor and what it is doing."""

    handle: Any
    index: int
    pid: int = 0
    host: str = ""
    shot: int | None = None  # index into plan.shots while busy
    ref: Any = None  # ObjectRef of the render call
    group: Any = None  # the placement group a split-shot actor holds (None: scheduled freely)


def render_shots(plan, out_dir: Path, settings, ctx: RunContext, source: Path | None = None,
                 config: ClusterConfig | None = None, finished: list | None = None) -> Generator[Event, None, list]:
    """Render every shot of ``plan`` on the cluster into ``out_dir``; returns records in plan order.

    ``finished``: a list each shot's record is appended to as soon as its files are placed (in the
    order shots finish), so the caller can check a shot while later ones render."""
    import ray

    from daotai.cluster.worker import ShotWorker

    config = config or ClusterConfig(address=settings.cluster or "local")
    owns = connect(config.address)
    try:
        return (yield from _render_on(ray, ShotWorker, plan, out_dir, settings, ctx, source, config,
                                      [] if finished is None else finished))
    finally:
        if owns:
            ray.shutdown()


def _render_on(ray, worker_cls, plan, out_dir: Path, settings, ctx: RunContext, source: Path | None,
               config: ClusterConfig, finished: list) -> Generator[Event, None, list]:
    """The dispatch loop of :func:`render_shots` on a connected cluster."""
    from daotai.run.settings import layout_for

    layout = layout_for(out_dir, settings)  # where the finished shots' files are placed
    res = actor_resources(settings.backend, settings.options.get("model"), int(settings.options.get("gpus") or 1))
    count = worker_count(res, ray.cluster_resources(), len(plan.shots), config.workers)
    actor_cls = ray.remote(concurrency_groups={"render": 1, "control": 1})(worker_cls)
    options: dict[str, Any] = dict(num_cpus=res.num_cpus, num_gpus=res.num_gpus, max_restarts=0, max_task_retries=0)
    if res.memory_bytes:
        options["memory"] = res.memory_bytes
    # Every actor of this run holds the same backend/model, so each shot lands on an actor
    # that already has it warm; shots are not split across models. The options were validated
    # by the pipeline; workers validate them again against the same spec.
    backend_options = dict(settings.options)
    reference_root = str(Path(source).resolve().parent) if source is not None else None
    plan_ref = ray.put(plan)
    slots: list[_Slot] = []
    spawned = 0

    def spawn() -> _Slot:
        nonlocal spawned
        placed, group = dict(options), None
        if res.placement() is not None:
            from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

            group = reserve_group(ray, res, ctx, config.poll_s)
            placed["scheduling_strategy"] = PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=0)
        handle = actor_cls.options(**placed).remote(settings.backend, backend_options, reference_root)
        ref = handle.info.options(concurrency_group="control").remote()
        # An actor waits for a free slot (another job may hold the GPUs); stay cancellable meanwhile.
        while not ray.wait([ref], timeout=config.poll_s)[0]:
            if ctx.cancel.is_set():
                ray.kill(handle)
                _release(group)
                ctx.check()
        info = ray.get(ref)
        spawned += 1
        return _Slot(handle, spawned, info["pid"], info["host"], group=group)

    records: dict[int, Any] = {}
    attempts = [0] * len(plan.shots)
    retries: dict[int, list[str]] = {}
    pending = deque(sorted(range(len(plan.shots)), key=lambda i: -plan.shots[i].frames))  # longest first
    completed = False
    try:
        for _ in range(count):
            slots.append(spawn())
        yield Notice("info", f"cluster: {count} worker{'s' if count != 1 else ''} for backend {settings.backend!r}")
        while pending or any(s.shot is not None for s in slots):
            ctx.check()
            for slot in slots:  # dynamic dispatch: every idle actor takes the next shot
                if slot.shot is None and pending:
                    index = pending.popleft()
                    attempts[index] += 1
                    slot.shot = index
                    slot.ref = slot.handle.render.options(concurrency_group="render").remote(plan_ref, index, settings)
                    shot_id = plan.shots[index].shot_id
                    yield Notice("info", f"cluster: {shot_id} attempt {attempts[index]} on worker {slot.index} "
                                         f"(host {slot.host}, pid {slot.pid})", shot_id)
            busy = [s for s in slots if s.shot is not None]
            ready, _ = ray.wait([s.ref for s in busy], num_returns=1, timeout=config.poll_s)
            yield from _poll(ray, busy)
            for slot in [s for s in busy if s.ref in ready]:
                index, slot.shot, ref, slot.ref = slot.shot, None, slot.ref, None
                shot_id = plan.shots[index].shot_id
                try:
                    result = ray.get(ref)
                except (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError):
                    # The worker process or its node died (or the finished files were lost with it).
                    reason = f"worker {slot.index} (host {slot.host}, pid {slot.pid}) died during attempt {attempts[index]}"
                    if attempts[index] > config.max_retries:
                        raise BackendError(f"{shot_id}: {reason}; gave up after {attempts[index]} attempts "
                                           f"(max_retries {config.max_retries})") from None
                    retries.setdefault(index, []).append(f"cluster: {reason}; retried")
                    yield Notice("warning", f"cluster: {shot_id}: {reason}; retrying on another worker", shot_id)
                    pending.appendleft(index)
                    _release(slot.group)  # the dead actor's GPUs go back before its replacement asks
                    slots[slots.index(slot)] = spawn()
                    continue
                except ray.exceptions.RayTaskError as exc:
                    cause = getattr(exc, "cause", None)
                    if isinstance(cause, DaotaiError):
                        raise cause from None
                    raise BackendError(f"{shot_id}: worker {slot.index} failed ({str(exc).splitlines()[0]})") from None
                yield from _place(result, layout, shot_id)
                record = result.record
                record.notices.extend(retries.get(index, []))
                record.notices.append(f"cluster: rendered on host {result.host} (pid {result.pid}), "
                                      f"attempt {attempts[index]}")
                records[index] = record
                finished.append(record)
        completed = True
    finally:
        if not completed:
            _stop(ray, slots)
        else:
            for slot in slots:  # release warm resources on the render thread that made them
                try:
                    ray.get(slot.handle.close.options(concurrency_group="render").remote(), timeout=CANCEL_GRACE_S)
                except Exception:  # noqa: BLE001 - a worker that cannot close is killed anyway
                    pass
                ray.kill(slot.handle)
        for slot in slots:
            _release(slot.group)
    return [records[i] for i in range(len(plan.shots))]


def _release(group: Any) -> None:
    """Give a split-shot actor's placement group back (nothing for an actor without one)."""
    if group is None:
        return
    from ray.util.placement_group import remove_placement_group

    try:
        remove_placement_group(group)
    except Exception:  # noqa: BLE001 - already removed, or the cluster is going away
        pass


def _poll(ray, busy: list[_Slot]) -> Iterator[Event]:
    """Progress and notices of busy actors, as the pipeline's own events."""
    refs = {s.handle.poll.options(concurrency_group="control").remote(): s for s in busy}
    if not refs:
        return
    ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=5.0)
    for ref in ready:
        try:
            events = ray.get(ref)
        except ray.exceptions.RayError:  # a dead actor surfaces through its render call
            continue
        yield from events


def _place(result, layout: RenderLayout, shot_id: str) -> Iterator[Event]:
    """Write a finished shot's files into the output folder, each atomically.

    Only the shot's own deliverables are written: a name from a worker that is not one
    (another shot's, or a path outside the folder) is an error, never a file.
    """
    from daotai.files import atomic_write_bytes

    for kind, rel in result.record.files.items():
        if layout.classify(rel) != (kind, shot_id):
            raise BackendError(f"{shot_id}: worker {result.host}:{result.pid} returned {rel!r}, "
                               f"which is not the shot's {kind} file")
        path = layout.path(kind, shot_id)
        atomic_write_bytes(path, result.blobs[rel])
        yield Output(kind, str(path), shot_id)


def _stop(ray, slots: list[_Slot]) -> None:
    """Cancel every busy actor, give it a moment to clean its temp folder, then kill all."""
    busy = [s for s in slots if s.ref is not None]
    for slot in busy:
        try:
            slot.handle.cancel.options(concurrency_group="control").remote()
        except Exception:  # noqa: BLE001 - already dead
            pass
    if busy:
        ray.wait([s.ref for s in busy], num_returns=len(busy), timeout=CANCEL_GRACE_S)
    for slot in slots:
        ray.kill(slot.handle)

