"""Wipes in the editorial timelines: an OTIO transition, an FCP XML Edge Wipe, an EDL wipe event.

OTIO has no wipe type of its own; its CMX 3600 adapter reads an EDL's ``W###`` events as
transitions of type ``SMPTE_Wipe``, so the timeline uses that name. The FCP XML adapter writes
a transition's effect from its ``fcp_xml`` metadata, so a wipe becomes FCP's Edge Wipe there.
The EDL adapter writes every transition as a dissolve (``D``); :func:`edl_wipe_codes` turns the
wipes' events back into wipes with their SMPTE wipe code, which names the pattern (001: a
horizontal edge, 002: a vertical one), not its direction; the direction stays in the clip's
locator (``wipe_left into s02``) and in the .otio's metadata.
"""

from __future__ import annotations

import re

import opentimelineio as otio

from daotai.script.vocab import WIPE_DIRECTIONS

SMPTE_WIPE = "SMPTE_Wipe"  # the transition type OTIO's EDL reader gives a W### event
# SMPTE wipe codes: 001 moves a vertical edge across the frame (left/right), 002 a horizontal one (up/down).
WIPE_CODES = {"left": 1, "right": 1, "up": 2, "down": 2}
# The adapter's dissolve event: edit number, reel, channel, then "D" and the length in frames.
_DISSOLVE_EVENT = re.compile(r"^(\d{3}  \S.{7} \S.{4} )D (\d{3})    ", re.MULTILINE)


def wipe_transition(kind: str, shot_id: str, frames: int, rate: float) -> otio.schema.Transition:
    """The OTIO transition of a ``frames``-long wipe into ``shot_id``, centred on the cut like a dissolve."""
    direction = WIPE_DIRECTIONS[kind]
    return otio.schema.Transition(
        name=f"{kind} into {shot_id}",
        transition_type=SMPTE_WIPE,
        in_offset=otio.opentime.RationalTime(frames // 2, rate),
        out_offset=otio.opentime.RationalTime(frames - frames // 2, rate),
        metadata={
            "daotai": {"transition": kind, "direction": direction, "smpte_wipe_code": WIPE_CODES[direction]},
            "fcp_xml": {"effect": {"name": "Edge Wipe", "effectid": "Edge Wipe", "effectcategory": "Wipe",
                                   "effecttype": "transition", "mediatype": "video"}},
        },
    )


def edl_wipe_codes(text: str, timeline: otio.schema.Timeline) -> str:
    """The CMX 3600 text with each wipe's dissolve event written as a wipe (``W001`` / ``W002``).

    The adapter writes one dissolve event per transition of the video track, in order, so the
    n-th ``D`` event is the n-th transition."""
    video = next((t for t in timeline.tracks if t.kind == otio.schema.TrackKind.Video), None)
    if video is None:
        return text
    transitions = [item for item in video if isinstance(item, otio.schema.Transition)]
    events = iter(transitions)

    def rewrite(match: re.Match[str]) -> str:
        transition = next(events, None)
        if transition is None or transition.transition_type != SMPTE_WIPE:
            return match.group(0)
        code = transition.metadata["daotai"]["smpte_wipe_code"]
        return f"{match.group(1)}W{code:03d} {match.group(2)} "

    return _DISSOLVE_EVENT.sub(rewrite, text)
