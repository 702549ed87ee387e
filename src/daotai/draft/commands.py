"""The ``daotai draft`` and ``daotai prompts`` commands (registered by daotai.cli).

Errors are DaotaiError subclasses; daotai.cli.main turns them into one-line messages and
exit codes. The drafted script is written atomically and only after it validated.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

_out = Console(highlight=False, soft_wrap=True)
_err = Console(stderr=True, highlight=False, soft_wrap=True)

_LLM_HELP = "language model: URL (OpenAI-compatible …/v1 or Ollama :11434), config profile name or a .gguf file"
_TEMPERATURE_HELP = "sampling temperature, 0..2 (default: the config's, else 0.2)"
_TOP_P_HELP = "nucleus sampling: keep the most likely tokens up to this probability mass, (0, 1] (default: the server's)"


def _sampling(temperature: Optional[float], top_p: Optional[float]):
    """This call's sampling, checked before anything is asked (OptionError names the flag)."""
    from daotai.draft.llm import Sampling, sampling_issues
    from daotai.errors import OptionError

    issues = sampling_issues(temperature, top_p, prefix="--")
    if issues:
        raise OptionError(issues)
    return Sampling(temperature=temperature, top_p=top_p)


def _client(llm: Optional[str], llm_model: Optional[str], timeout: Optional[float], retries: Optional[int]):
    """The configured chat client (LLMError naming how to configure one when there is none)."""
    from daotai.draft.llm import create_client, resolve_config

    config = resolve_config(llm, llm_model, timeout_s=timeout, retries=retries)
    return create_client(config)


def draft(
    idea: str = typer.Argument(..., help="the idea in a sentence or two, in any language"),
    output: Path = typer.Option(..., "-o", "--output", help="script JSON to write"),
    shots: Optional[int] = typer.Option(None, "--shots", min=1, max=100, help="exact number of shots"),
    duration: Optional[float] = typer.Option(None, "--duration", min=0.5, max=3600, help="total seconds"),
    style: str = typer.Option("", "--style", help="visual style, e.g. 'film noir, 35 mm'"),
    llm: Optional[str] = typer.Option(None, "--llm", help=_LLM_HELP),
    llm_model: Optional[str] = typer.Option(None, "--llm-model", help="model name on the server"),
    rounds: int = typer.Option(3, "--rounds", min=1, max=10, help="answers allowed (first try + repairs)"),
    timeout: Optional[float] = typer.Option(None, "--timeout", min=0.1, help="seconds to wait for the model"),
    retries: Optional[int] = typer.Option(None, "--retries", min=0, max=10, help="retries on transient errors"),
    show_tokens: bool = typer.Option(False, "--show-tokens", help="echo the model's answer as it streams"),
    temperature: Optional[float] = typer.Option(None, "--temperature", help=_TEMPERATURE_HELP),
    top_p: Optional[float] = typer.Option(None, "--top-p", help=_TOP_P_HELP),
) -> None:
    """Draft a valid script from a loose idea with a local language model."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from daotai.draft.drafter import Drafted, DraftOptions, RoundFailed, RoundStarted, Token, draft_events
    from daotai.files import atomic_write_text

    sampling = _sampling(temperature, top_p)
    client = _client(llm, llm_model, timeout, retries)
    options = DraftOptions(shots=shots, duration_s=duration, style=style, rounds=rounds, sampling=sampling)
    result: Drafted | None = None
    try:
        columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
        with Progress(*columns, console=_err, transient=True, disable=show_tokens) as bars:
            task = bars.add_task(f"asking {escape(client.config.describe())}", total=None)
            received = 0
            for event in draft_events(idea, client, options):
                if isinstance(event, RoundStarted):
                    received = 0
                    label = "drafting" if event.round == 1 else "repairing"
                    bars.update(task, description=f"{label} (round {event.round}/{event.rounds})")
                    if show_tokens:
                        _err.print(f"[dim]— round {event.round}/{event.rounds} —[/dim]")
                elif isinstance(event, Token):
                    received += len(event.text)
                    if show_tokens:
                        _err.file.write(event.text)
                        _err.file.flush()
                    else:
                        bars.update(task, description=f"round {event.round}/{rounds}: {received} characters")
                elif isinstance(event, RoundFailed):
                    if show_tokens:
                        _err.file.write("\n")
                    _err.print(
                        f"[yellow]round {event.round}[/yellow]: {len(event.issues)} problem"
                        f"{'s' if len(event.issues) != 1 else ''}; asking for a repair"
                    )
                elif isinstance(event, Drafted):
                    result = event
    finally:
        client.close()
    assert result is not None  # draft_events yields Drafted or raises ScriptError
    atomic_write_text(output, result.text)
    script = result.script
    total = sum(s.duration for s in script.shots)
    _out.print(
        f"[green]drafted[/green] {output}: {len(script.shots)} shots, {len(script.characters)} characters, "
        f"{total:g} s (valid after {result.rounds} round{'s' if result.rounds != 1 else ''})"
    )


def prompts(
    script: Path = typer.Argument(..., help="script file"),
    model: str = typer.Option("wan", "--model", help="prompt budget of a model family: wan | wan-vace | ltx"),
    enhance: bool = typer.Option(False, "--enhance", help="enrich each prompt with the language model"),
    llm: Optional[str] = typer.Option(None, "--llm", help=_LLM_HELP),
    llm_model: Optional[str] = typer.Option(None, "--llm-model", help="model name on the server"),
    timeout: Optional[float] = typer.Option(None, "--timeout", min=0.1, help="seconds to wait for the model"),
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of text"),
    temperature: Optional[float] = typer.Option(None, "--temperature", help="--enhance: " + _TEMPERATURE_HELP),
    top_p: Optional[float] = typer.Option(None, "--top-p", help="--enhance: " + _TOP_P_HELP),
) -> None:
    """Show the per-shot prompts and negative prompts the planner composes (optionally enriched)."""
    from daotai import catalog
    from daotai.errors import Issue, OptionError
    from daotai.plan.planner import plan_script
    from daotai.plan.prompt import budget_for, estimate_tokens, fit_prompt
    from daotai.script.load import load_script

    budgets = catalog.prompt_budgets()
    if model.lower() not in budgets:
        raise OptionError([Issue("--model", model, f"must be one of: {', '.join(budgets)}")])
    if not enhance and (temperature is not None or top_p is not None):
        raise OptionError([Issue("--temperature" if temperature is not None else "--top-p",
                                 temperature if temperature is not None else top_p,
                                 "sets how --enhance asks the language model; add --enhance")])
    plan = plan_script(load_script(script))
    budget = budget_for(model)
    enhanced: dict[str, str] = {}
    if enhance:
        from daotai.draft.enhance import enhance_plan

        sampling = _sampling(temperature, top_p)
        client = _client(llm, llm_model, timeout, None)
        try:
            with _err.status("enriching prompts"):
                enhanced = {e.shot_id: e.enhanced for e in enhance_plan(client, plan, model.lower(), sampling)}
        finally:
            client.close()
    rows = []
    for shot in plan.shots:
        if model.lower() == "h3" and not enhance:  # H3 reads a labelled prompt of its own (<Picture i> …)
            from daotai.plan.prompt import h3_prompt_for

            prompt = h3_prompt_for(plan, shot)
        elif model.lower() == "ltx2" and not enhance:  # LTX-2 makes the sound too: lines and sound in the prompt
            from daotai.plan.prompt import ltx2_prompt_for

            prompt = ltx2_prompt_for(plan, shot)
        else:
            prompt = enhanced.get(shot.shot_id) or fit_prompt(shot.prompt, budget)
        rows.append(
            {
                "shot_id": shot.shot_id,
                "prompt": prompt,
                "negative_prompt": shot.negative_prompt,
                "tokens": estimate_tokens(prompt, budget),
                "budget": budget.max_tokens,
                "trimmed": prompt != shot.prompt and not enhance and model.lower() not in ("h3", "ltx2"),
                "enhanced": enhance,
            }
        )
    if as_json:
        _out.print_json(json.dumps({"model": budget.model, "shots": rows}, ensure_ascii=False))
        return
    for row in rows:
        note = " [yellow](trimmed to fit)[/yellow]" if row["trimmed"] else ""
        _out.print(f"[bold]{row['shot_id']}[/bold]  ~{row['tokens']}/{row['budget']} tokens ({budget.model}){note}")
        _out.print(f"  prompt:   {escape(row['prompt'])}")
        _out.print(f"  negative: {escape(row['negative_prompt'])}")
