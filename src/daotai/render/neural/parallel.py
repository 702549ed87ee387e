"""One shot rendered by N processes on one host: context parallelism through torch.distributed.

Each rank is a spawned process holding the whole pipeline on its own device (``cuda:i`` with
NCCL, or the CPU with gloo). The transformer's token sequence is split across the ranks by
diffusers' context-parallel hooks (Ulysses attention: an all-to-all swaps sequence shards for
head shards around each attention, so every rank still sees every token). Everything outside
the transformer — text encoder, scheduler, noise from the seeded CPU generator — runs the
same on every rank, so the ranks stay in lockstep without exchanging latents.

The process that asked (the CLI, the server's worker) is the supervisor: it holds no model,
sends each shot's call to every rank, relays rank 0's step progress, and gets back rank 0's
decoded frames as (F, H, W, 3) uint8 (the other ranks skip the VAE decode). Only the
supervisor encodes and writes, through the usual atomic writes, so a failure anywhere leaves
no partial file. A rank that raises reports its error and exits; a rank that dies without a
word (killed, out of host memory) is seen through its process sentinel; either way every rank
is stopped and the shot fails with a one-line :class:`BackendError` naming the rank. Ranks
ignore SIGINT: Ctrl-C reaches the supervisor, which stops them all; a rank whose supervisor
vanished exits by itself. Cancelling between steps is agreed by all ranks (an all-reduce of
the flag each step), so they all stop at the same step and no collective is left waiting.

Context-parallel plans: diffusers ships ``_cp_plan`` for ``WanTransformer3DModel`` and
``LTXVideoTransformer3DModel``; :data:`PLANS` adds one for ``WanVACETransformer3DModel`` and
extends LTX's with the per-token timesteps of its keyframe-conditioned pipeline.
"""

from __future__ import annotations

import os
import queue
import signal
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from daotai.errors import BackendError
from daotai.runtime.cores import usable_cores

POLL_S = 0.2  # how often the supervisor looks at its ranks while waiting (a dead rank is noticed this fast)
PEER_DEATH_WAIT_S = 1.0  # after a rank's error, how long to look for a killed peer that caused it
STOP_GRACE_S = 5.0  # a rank asked to stop gets this long before it is terminated, then killed
PARENT_WATCH_S = 1.0  # a rank checks this often that its supervisor is still there


@dataclass(frozen=True)
class RankSetup:
    """What every rank needs to build its share of the group (picklable: it crosses to spawned processes)."""

    world: int
    port: int
    family: str
    options: dict[str, Any]  # the backend's DiffusersOptions as a mapping (gpus, device and offload replaced)
    options_type: type  # the backend's options class, to validate ``options`` again in the rank
    default_model: str
    device_kind: str  # cuda | cpu
    first_device: int  # cuda index of rank 0 (rank i uses first_device + i)
    sdpa: str | None  # SDPA kernel forced around the denoise loop (None: PyTorch's choice)
    # (setup, device) -> (pipeline on device, resolved model): a module-level function, so it pickles by name
    load: Callable[[RankSetup, Any], tuple[Any, Any]]


# ---------------------------------------------------------------- context-parallel plans


def vace_plan() -> dict[str, Any]:
    """``_cp_plan`` for WanVACETransformer3DModel: the VACE control blocks split along the same sequence.

    The VACE blocks run before the main blocks, each taking the patchified video tokens and the
    control tokens (both (B, S, C), the control zero-padded to S) and returning a hint per
    block that is added to the main blocks' tokens. Splitting both inputs of ``vace_blocks.0``
    and the input of ``blocks.0`` along S gives every rank the same slice of both streams, so
    the hints line up with the main tokens shard for shard; RoPE is split where it is made, the
    output projection is gathered. The text (cross-attention keys) stays whole on every rank.
    """
    from diffusers.models._modeling_parallel import ContextParallelInput, ContextParallelOutput

    return {
        "rope": {
            0: ContextParallelInput(split_dim=1, expected_dims=4, split_output=True),
            1: ContextParallelInput(split_dim=1, expected_dims=4, split_output=True),
        },
        "vace_blocks.0": {
            "hidden_states": ContextParallelInput(split_dim=1, expected_dims=3, split_output=False),
            "control_hidden_states": ContextParallelInput(split_dim=1, expected_dims=3, split_output=False),
        },
        "blocks.0": {
            "hidden_states": ContextParallelInput(split_dim=1, expected_dims=3, split_output=False),
        },
        "proj_out": ContextParallelOutput(gather_dim=1, expected_dims=3),
    }


class SharedMaskLTXProcessor:
    """LTX attention whose text mask is shared by all heads, so Ulysses can hand each rank a slice of the heads.

    diffusers' LTX processor repeats the padding mask once per head, (B, H, 1, S_text); after
    Ulysses' all-to-all a rank holds H/N heads and that mask no longer broadcasts. The mask is
    the same for every head, so here it stays (B, 1, 1, S_text): the attention is unchanged.
    """

    _attention_backend = None
    _parallel_config = None

    def __call__(self, attn: Any, hidden_states: Any, encoder_hidden_states: Any = None, attention_mask: Any = None,
                 image_rotary_emb: Any = None) -> Any:
        from diffusers.models.attention_dispatch import dispatch_attention_fn
        from diffusers.models.transformers.transformer_ltx import apply_rotary_emb

        batch = hidden_states.shape[0]
        source = hidden_states if encoder_hidden_states is None else encoder_hidden_states
        if attention_mask is not None:  # (B, S_text) of 0/1 or additive → (B, 1, 1, S_text), one for every head
            prepared = attn.prepare_attention_mask(attention_mask, source.shape[1], batch)  # (B*H, 1, S_text)
            attention_mask = prepared.view(batch, attn.heads, -1, prepared.shape[-1])[:, :1]
        query, key = attn.norm_q(attn.to_q(hidden_states)), attn.norm_k(attn.to_k(source))
        value = attn.to_v(source)
        if image_rotary_emb is not None:
            query, key = apply_rotary_emb(query, image_rotary_emb), apply_rotary_emb(key, image_rotary_emb)
        query, key, value = (x.unflatten(2, (attn.heads, -1)) for x in (query, key, value))  # (B, S, H, D)
        out = dispatch_attention_fn(query, key, value, attn_mask=attention_mask, dropout_p=0.0, is_causal=False,
                                    backend=self._attention_backend, parallel_config=self._parallel_config)
        out = out.flatten(2, 3).to(query.dtype)  # (B, S, H*D)
        return attn.to_out[1](attn.to_out[0](out))


def share_masks_across_heads(module: Any) -> None:
    """Give an LTX transformer's attention layers :class:`SharedMaskLTXProcessor` (other models: unchanged)."""
    if type(module).__name__ != "LTXVideoTransformer3DModel":
        return
    for sub in module.modules():
        if type(getattr(sub, "processor", None)).__name__ == "LTXVideoAttnProcessor":
            sub.set_processor(SharedMaskLTXProcessor())


def ltx_plan() -> dict[str, Any]:
    """diffusers' LTX plan plus the per-token timesteps (B, S) that LTXConditionPipeline passes, split with the tokens.

    A conditioned frame is denoised on its own schedule, so its tokens carry their own
    timestep; left whole, each rank would apply the whole sequence's modulation to its shard.
    Plain LTXPipeline passes one timestep per video (B,), which the hook leaves whole.
    """
    from diffusers import LTXVideoTransformer3DModel
    from diffusers.models._modeling_parallel import ContextParallelInput

    plan = dict(LTXVideoTransformer3DModel._cp_plan)
    plan[""] = {**plan[""], "timestep": ContextParallelInput(split_dim=1, expected_dims=2, split_output=False)}
    return plan


PLANS: dict[str, Callable[[], dict[str, Any]]] = {
    "WanVACETransformer3DModel": vace_plan,
    "LTXVideoTransformer3DModel": ltx_plan,
}


def plan_for(module: Any) -> dict[str, Any]:
    """The context-parallel plan of a transformer: ours for the classes in PLANS, else the model's own."""
    name = type(module).__name__
    if name in PLANS:
        return PLANS[name]()
    plan = getattr(module, "_cp_plan", None)
    if not plan:
        raise BackendError(f"gpus: {name} has no context-parallel plan, so one shot cannot be split across "
                           "processes; render it with gpus=1")
    return plan


def check_divisible(module: Any, world: int) -> None:
    """Ulysses attention splits the heads across the ranks: their number must divide evenly."""
    heads = getattr(module.config, "num_attention_heads", None)
    if heads is not None and heads % world:
        raise BackendError(f"gpus: {world} does not divide {type(module).__name__}'s {heads} attention heads; "
                           f"use a divisor of {heads}")


def enable_context_parallel(module: Any, world: int, rank: int, device: Any) -> None:
    """Split ``module``'s sequence across the ``world`` ranks of the default process group (Ulysses).

    On accelerators this is diffusers' ``enable_parallelism``. That call derives the device as
    ``rank % accelerator count``, which divides by zero on a CPU-only host, so on the CPU the
    same steps are taken here: a CPU device mesh, the config recorded on the model and its
    attention processors, and the plan's split/gather hooks.
    """
    import torch
    from diffusers import ContextParallelConfig

    check_divisible(module, world)
    share_masks_across_heads(module)
    plan = plan_for(module)
    config = ContextParallelConfig(ulysses_degree=world)
    if device.type != "cpu":
        module.enable_parallelism(config=config, cp_plan=plan)
        return
    from diffusers.hooks.context_parallel import apply_context_parallel
    from diffusers.models._modeling_parallel import ParallelConfig

    parallel = ParallelConfig(context_parallel_config=config)
    mesh = torch.distributed.device_mesh.init_device_mesh("cpu", config.mesh_shape,
                                                          mesh_dim_names=config.mesh_dim_names)
    parallel.setup(rank, world, device, mesh=mesh)
    module._parallel_config = parallel
    for sub in module.modules():
        processor = getattr(sub, "processor", None)
        if processor is not None and hasattr(processor, "_parallel_config"):
            processor._parallel_config = parallel
    apply_context_parallel(module, config, plan)


# ---------------------------------------------------------------- the supervisor


def free_port() -> int:
    """A TCP port on the loopback that nothing listens on now (the ranks' rendezvous)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def check_world(world: int, device_kind: str, first_device: int) -> None:
    """Refuse a group the host cannot hold before spawning anything."""
    if device_kind == "mps":
        raise BackendError(f"gpus: {world} processes need CUDA GPUs or the CPU; Apple's Metal has one device")
    if device_kind == "cuda":
        import torch

        visible = torch.cuda.device_count()
        if first_device + world > visible:
            raise BackendError(f"gpus: {world} GPUs from cuda:{first_device} asked for, but {visible} are visible; "
                               f"use gpus={max(1, visible - first_device)} or fewer")


class StepState:
    """What the step callback sees as its ``pipe``: setting ``_interrupt`` asks every rank to stop."""

    def __init__(self) -> None:
        self._interrupt = False


class RankGroup:
    """N spawned ranks holding one pipeline each, driven shot by shot from this process."""

    def __init__(self, setup: RankSetup):
        self.setup = setup
        self.processes: list[Any] = []
        self.commands: list[Any] = []
        self.results: Any = None
        self.cancel: Any = None
        self.resolved: Any = None  # rank 0's resolved model (path, hashes) for notices and the manifest
        self.pipeline_class = ""  # the class name of the ranks' pipeline (e.g. LTXConditionPipeline)
        self.peaks: dict[int, int] = {}  # per rank, the last call's peak bytes (GPU memory; host RSS on the CPU)
        self.broken = False

    def start(self) -> None:
        """Spawn the ranks and wait until every one has loaded its pipeline (or one has failed)."""
        import torch.multiprocessing as mp

        context = mp.get_context("spawn")
        self.results = context.Queue()
        self.cancel = context.Event()
        for rank in range(self.setup.world):
            commands = context.Queue()
            process = context.Process(target=rank_main, name=f"daotai-rank-{rank}", daemon=True,
                                      args=(rank, self.setup, commands, self.results, self.cancel, os.getpid()))
            process.start()
            self.commands.append(commands)
            self.processes.append(process)
        ready = self._collect("ready", lambda message: None)
        self.resolved, self.pipeline_class = ready[0]

    def run(self, kwargs: dict[str, Any], seed: int, callback: Callable) -> Any:
        """One pipeline call on every rank; rank 0's frames as (F, H, W, 3) uint8.

        ``callback(state, step, None, {})`` is called per finished step with rank 0's count;
        when it sets ``state._interrupt`` the ranks are asked to stop at the next step.
        """
        if self.broken:
            raise BackendError("gpus: the process group failed on an earlier shot")
        self.cancel.clear()
        for commands in self.commands:
            commands.put(("run", kwargs, seed))
        state = StepState()

        def on_message(message: tuple) -> None:
            if message[0] == "step":
                callback(state, message[1], None, {})
                if state._interrupt:
                    self.cancel.set()

        done = self._collect("done", on_message)
        self.peaks = {rank: peak for rank, (_, peak) in done.items()}
        return done[0][0]

    def _collect(self, kind: str, on_message: Callable[[tuple], None]) -> dict[int, Any]:
        """Wait for ``(kind, rank, value)`` from every rank, passing other messages on; fail on any rank's error."""
        answers: dict[int, Any] = {}
        while len(answers) < self.setup.world:
            try:
                message = self.results.get(timeout=POLL_S)
            except queue.Empty:
                self._check_alive()
                continue
            if message[0] == kind:
                answers[message[1]] = message[2]
            elif message[0] == "error":
                self._fail_for(message[1], message[2])
            else:
                on_message(message)
        return answers

    def _fail_for(self, rank: int, error: str) -> None:
        """Fail on a rank's reported error, naming a killed peer first when that is what it tripped over.

        When one rank is killed its peers' collectives fail ("connection reset"), often before
        the killed rank's exit is seen: a peer killed by a signal within the grace time is the cause.
        """
        deadline = time.monotonic() + PEER_DEATH_WAIT_S
        while time.monotonic() < deadline:
            for other, process in enumerate(self.processes):
                if other != rank and process.exitcode is not None and process.exitcode < 0:
                    self._fail(f"rank {other} of {self.setup.world} stopped unexpectedly "
                               f"({describe_exit(process.exitcode)}); rank {rank} then failed: {error}")
            time.sleep(POLL_S / 4)
        self._fail(f"rank {rank} of {self.setup.world} failed: {error}")

    def _check_alive(self) -> None:
        """A rank that exited without reporting an error is a rank that was killed or crashed."""
        exited = [(rank, p.exitcode) for rank, p in enumerate(self.processes) if p.exitcode is not None]
        if not exited:
            return
        killed = [(rank, code) for rank, code in exited if code < 0]
        if killed:  # killed by a signal: the cause, whatever its peers reported after it
            rank, code = killed[0]
            self._fail(f"rank {rank} of {self.setup.world} stopped unexpectedly ({describe_exit(code)}); "
                       "the other ranks were stopped")
        try:  # a rank that raised reported its error just before exiting: prefer that message
            while True:
                message = self.results.get(timeout=POLL_S)
                if message[0] == "error":
                    self._fail(f"rank {message[1]} of {self.setup.world} failed: {message[2]}")
        except queue.Empty:
            pass
        rank, code = exited[0]
        self._fail(f"rank {rank} of {self.setup.world} stopped unexpectedly ({describe_exit(code)}); "
                   "the other ranks were stopped")

    def _fail(self, message: str) -> None:
        self.broken = True
        self.close()
        raise BackendError(message)

    def close(self) -> None:
        """Ask every rank to stop; terminate, then kill, those that do not within the grace time."""
        if self.cancel is not None:
            self.cancel.set()  # ranks busy with a shot stop together at its next step
        for commands in self.commands:
            try:
                commands.put(("stop",))
            except (OSError, ValueError):  # the queue is already closed
                pass
        deadline = time.monotonic() + STOP_GRACE_S
        for process in self.processes:
            process.join(timeout=max(0.0, deadline - time.monotonic()))
        for process in self.processes:
            if process.is_alive():
                process.terminate()
                process.join(timeout=STOP_GRACE_S)
            if process.is_alive():
                process.kill()
                process.join()
        self.processes = []
        self.commands = []


def describe_exit(code: int) -> str:
    """A process exit code in words: 'exit code 3' or 'killed by SIGKILL'."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


# ---------------------------------------------------------------- one rank


def rank_main(rank: int, setup: RankSetup, commands: Any, results: Any, cancel: Any, supervisor: int) -> None:
    """A rank's whole life: join the group, load, then run the calls it is sent until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the supervisor's to handle
    threading.Thread(target=_exit_without_supervisor, args=(supervisor,), daemon=True).start()
    try:
        pipe, device, resolved = _join_and_load(rank, setup)
        results.put(("ready", rank, (resolved, type(pipe).__name__) if rank == 0 else None))
        while True:
            command = commands.get()
            if command[0] == "stop":
                break
            _, kwargs, seed = command
            results.put(("done", rank, _run(pipe, device, rank, setup, kwargs, seed, results, cancel)))
    except BaseException as exc:  # noqa: BLE001  (reported to the supervisor, which fails the shot)
        text = str(exc).splitlines()[0] if str(exc) else ""
        results.put(("error", rank, f"{type(exc).__name__}: {text}"))
        results.close()
        results.join_thread()
        os._exit(1)  # skip destroying a process group whose peers may be gone
    _leave()


def _exit_without_supervisor(supervisor: int) -> None:
    """Exit when the supervisor has gone (killed, so it could not stop us)."""
    while True:
        time.sleep(PARENT_WATCH_S)
        if os.getppid() != supervisor:
            os._exit(1)


def _join_and_load(rank: int, setup: RankSetup) -> tuple[Any, Any, Any]:
    """Join the process group, load the pipeline on this rank's device and split its transformers."""
    import torch
    import torch.distributed as dist

    if setup.device_kind == "cuda":
        device = torch.device("cuda", setup.first_device + rank)
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        device = torch.device("cpu")
        # The host's cores are shared by the ranks: more threads than cores makes every rank crawl.
        torch.set_num_threads(max(1, usable_cores() // setup.world))
        backend = "gloo"
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{setup.port}", rank=rank,
                            world_size=setup.world, device_id=device if backend == "nccl" else None)
    pipe, resolved = setup.load(setup, device)
    for name in ("transformer", "transformer_2"):
        module = getattr(pipe, name, None)
        if module is not None:
            enable_context_parallel(module, setup.world, rank, device)
    return pipe, device, resolved


def _run(pipe: Any, device: Any, rank: int, setup: RankSetup, kwargs: dict[str, Any], seed: int,
         results: Any, cancel: Any) -> tuple[Any, int]:
    """One pipeline call: (frames, peak bytes); rank 0's frames are (F, H, W, 3) uint8, the others' None (no decode)."""
    import torch
    import torch.distributed as dist

    from daotai.render.neural.retime import to_uint8
    from daotai.render.neural.stepping import step_callback_kwargs
    from daotai.render.speed import SpeedConfig, denoise_context
    from daotai.runtime.device import generator_for

    def on_step_end(state: Any, step: int, timestep: Any, tensors: dict) -> dict:
        # Every rank must stop at the same step, or the others would wait in a collective forever.
        flag = torch.tensor([1 if cancel.is_set() else 0], device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        if rank == 0:
            results.put(("step", step))
        if int(flag.item()):
            state._interrupt = True
        return tensors

    call = {**kwargs, "output_type": "pt" if rank == 0 else "latent"}
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    with denoise_context(SpeedConfig(sdpa=setup.sdpa)):
        output = pipe(**call, generator=generator_for(seed), **step_callback_kwargs(on_step_end))
    frames = to_uint8(output.frames) if rank == 0 else None
    return frames, peak_bytes(device)


def peak_bytes(device: Any) -> int:
    """This process's peak memory: the GPU's since the last reset, or the host's resident set on the CPU."""
    import torch

    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux reports KiB


def _leave() -> None:
    """Leave the process group cleanly after the supervisor's stop."""
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
