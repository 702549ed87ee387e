"""MiniMax-H3's blocks with a partial schedule: a re-render denoises only the last steps.

Imported only where a re-render runs (it imports diffusers at the top). The blocks are diffusers'
own ``MiniMaxH3Blocks`` with one step swapped in every workflow's core: the set-timesteps step,
which here may keep only the last ``partial_steps`` entries of the video schedule (and start the
video scheduler there, ``set_begin_index``). The audio rows have no clean start to noise (a
clip's sound is kept as it is, or there is none), so they get a whole schedule of their own,
``partial_steps`` forwards from pure noise, run beside the video's tail. Without
``partial_steps`` the step is the stock one, so the same blocks generate as usual.
"""

from __future__ import annotations

from typing import Any

import torch
from diffusers.modular_pipelines import MiniMaxH3Blocks
from diffusers.modular_pipelines.minimax_h3.before_denoise import MiniMaxH3SetTimestepsStep
from diffusers.modular_pipelines.modular_pipeline_utils import InputParam

__all__ = ["PARTIAL_INPUT", "PartialSetTimestepsStep", "partial_blocks", "tail"]

PARTIAL_INPUT = "partial_steps"  # the pipeline input: how many of the schedule's last forwards run


def tail(count: int, total: int) -> int:
    """Index of the first of the last ``count`` of ``total`` schedule entries (checked: 1 <= count <= total)."""
    if not 1 <= count <= total:
        raise ValueError(f"{PARTIAL_INPUT}: {count} must lie in [1, {total}] (the schedule's forwards)")
    return total - count


class PartialSetTimestepsStep(MiniMaxH3SetTimestepsStep):
    """The stock set-timesteps step, cut to the schedule's last ``partial_steps`` forwards when that is given."""

    @property
    def description(self) -> str:
        return (super().description + " With `partial_steps`, only the video schedule's last entries run (the latents "
                "come in already noised to where they start) and the audio rows get a whole schedule of that length.")

    @property
    def inputs(self) -> list[InputParam]:
        return [*super().inputs, InputParam(name=PARTIAL_INPUT, type_hint=int, default=None,
                                            description="Run only the schedule's last forwards (None: all).")]

    @torch.no_grad()
    def __call__(self, components: Any, state: Any) -> tuple[Any, Any]:
        components, state = super().__call__(components, state)
        block_state = self.get_block_state(state)
        count = getattr(block_state, PARTIAL_INPUT)
        if count is None:
            return components, state
        device = components._execution_device
        whole = state.get("timesteps")  # the stock step's outputs live on the state, not in this block's inputs
        start = tail(count, len(whole))
        timesteps = whole[start:]
        components.scheduler.set_begin_index(start)  # the Euler ratios are read from sigma index `start` on
        components.audio_scheduler.set_timesteps(count + 1, device=device)  # count + 1 sigma points: count forwards
        audio = components.audio_scheduler.timesteps
        if len(audio) != count:  # the shift may merge near-equal sigmas of a very long schedule
            raise ValueError(f"{PARTIAL_INPUT}: the audio schedule of {count} forwards holds {len(audio)}")
        block_state.timesteps, block_state.audio_timesteps = timesteps, audio
        block_state.row_timestep_plan = [
            tuple(tensor.to(device) for tensor in self.build_row_timesteps(
                block_state.video_indices, block_state.audio_indices, block_state.num_condition_video_rows,
                block_state.num_condition_audio_rows, block_state.text_indices.numel(), float(video_t),
                float(audio_t), max(float(video_t), components.keyframe_noise_aug), 1.0))
            for video_t, audio_t in zip(timesteps, audio, strict=True)
        ]
        self.set_block_state(state, block_state)
        return components, state


def partial_blocks() -> Any:
    """``MiniMaxH3Blocks`` whose every workflow sets its timesteps with :class:`PartialSetTimestepsStep`."""
    blocks = MiniMaxH3Blocks()
    for core in blocks.sub_blocks["denoise"].sub_blocks.values():
        if "set_timesteps" not in core.sub_blocks:
            raise RuntimeError(f"diffusers' {type(core).__name__} has no set_timesteps step to replace")
        core.sub_blocks["set_timesteps"] = PartialSetTimestepsStep()
    return blocks
