"""What a run is doing, in words a waiting director reads: "rendering shot 3/7 (s03)",
"checking shot 2/7 (s02)", "assembling: 7 shots into the sequence", "delivering".

The pipeline's Progress events name a stage and a shot id; the shot's number comes from its
place in the plan, so every front end (the CLI's progress display, the server's job events)
says the same thing the same way. Pure: no I/O, nothing imported beyond the plan's types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from daotai.plan.model import Plan

# The stage names of Progress events (daotai.events.Progress) as the verb a person reads.
STAGE_VERBS: dict[str, str] = {
    "render": "rendering",
    "encode": "encoding",
    "enhance": "enhancing",
    "qc": "checking",
    "assemble": "assembling",
    "deliver": "delivering",
    "load": "loading",
    "denoise": "denoising",
    "decode": "decoding",
    "control": "preparing controls for",
}


@dataclass(frozen=True)
class ShotOrder:
    """The shots of a plan by their place in it (1-based), to number them in labels."""

    numbers: dict[str, int]

    @classmethod
    def of(cls, plan: Plan) -> "ShotOrder":
        return cls({shot.shot_id: i + 1 for i, shot in enumerate(plan.shots)})

    @property
    def count(self) -> int:
        return len(self.numbers)

    def shot_text(self, shot_id: str) -> str:
        """'shot 3/7 (s03)'; a shot the plan does not hold: 'shot s03'."""
        number = self.numbers.get(shot_id)
        return f"shot {shot_id}" if number is None else f"shot {number}/{self.count} ({shot_id})"

    def label(self, event: Any) -> str:
        """One line for a Progress event: its stage as a verb, its shot numbered, then its message
        unless the message only says again what the stage and shot say ("checking shot 2 of 7")."""
        verb = STAGE_VERBS.get(event.stage, event.stage)
        message = (event.message or "").strip()
        if event.shot_id is None:
            if message.startswith(verb):  # "checking the sequence" says it whole
                return message
            return f"{verb}: {message}" if message else verb
        head = f"{verb} {self.shot_text(event.shot_id)}"
        if not message or message.startswith(verb):
            return head
        return f"{head}: {message}"
