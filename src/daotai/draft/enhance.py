"""Enrich the planner's per-shot prompts with a language model, within a model's budget.

The shot's structure (framing, angle, camera move, who is in it) lives in the script and
is never changed here; the enriched text must keep the planner's camera sentence, which is
put back verbatim if the model dropped it. Quoted names stay quoted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator

from daotai.draft.llm import ChatClient, LLMError, Sampling
from daotai.plan.model import Plan, ShotPlan
from daotai.plan.prompt import budget_for, estimate_tokens, fit_prompt

_CAMERA = re.compile(r"(?:^|(?<=\. ))((?:The camera|The lens|Static camera|Handheld camera)[^.]*\.)")


@dataclass(frozen=True)
class EnhancedPrompt:
    """One shot's planner prompt and its enriched version for a model."""

    shot_id: str
    original: str
    enhanced: str
    tokens: int  # estimated T5 tokens of ``enhanced``
    budget: int  # the model's token budget


def camera_sentences(prompt: str) -> list[str]:
    """The planner's camera-move sentences in a prompt (they must survive enrichment)."""
    return _CAMERA.findall(prompt)


def enhance_request(shot: ShotPlan, model: str) -> list[dict[str, str]]:
    """Chat messages asking to enrich one prompt without changing the shot."""
    words = int(budget_for(model).max_tokens / budget_for(model).tokens_per_word * 0.9)
    return [
        {
            "role": "system",
            "content": (
                "You improve prompts for a text-to-video model. Rewrite the prompt into one richer English "
                "paragraph: concrete appearance, materials, light, colour, mood and motion. Keep the framing, "
                "angle, the camera movement sentence and every character exactly as given; do not add "
                "characters, cuts or camera moves. Keep names in double quotes exactly as written. "
                f"At most {words} words. Answer with the prompt text only."
            ),
        },
        {"role": "user", "content": shot.prompt},
    ]


def enhance_prompt(client: ChatClient, shot: ShotPlan, model: str = "wan",
                   sampling: Sampling | None = None) -> EnhancedPrompt:
    """Ask the model for a richer prompt for one shot, then enforce camera words and budget."""
    text = "".join(client.chat(enhance_request(shot, model), None, sampling)).strip().strip('"').strip()
    if not text:
        raise LLMError(f"shot {shot.shot_id}: the language model returned an empty prompt")
    text = " ".join(text.split())
    for sentence in camera_sentences(shot.prompt):
        if sentence.rstrip(".").lower() not in text.lower():
            text = f"{text.rstrip('. ')}. {sentence}"
    budget = budget_for(model)
    fitted = fit_prompt(text, budget)
    return EnhancedPrompt(shot.shot_id, shot.prompt, fitted, estimate_tokens(fitted, budget), budget.max_tokens)


def enhance_plan(client: ChatClient, plan: Plan, model: str = "wan",
                 sampling: Sampling | None = None) -> Iterator[EnhancedPrompt]:
    """Enhanced prompts for every shot of a plan, one at a time (``sampling``: the language model's settings)."""
    for shot in plan.shots:
        yield enhance_prompt(client, shot, model, sampling)
