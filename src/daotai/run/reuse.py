"""The run's use of the shot cache (daotai.run.cache): each shot's key, the shots a render takes
from the cache unchanged (and those a chained backend must render again), and the finished
shots a stopped render keeps there.

The cache itself (entries, the fields of a key, eviction) knows nothing of a run's settings;
this is where the two meet, for the run, ``daotai qc DIR`` (daotai.run.recheck) and --dry-run.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from daotai.plan.layout import RenderLayout
from daotai.plan.model import Plan
from daotai.render.base import Event, Notice, Output, Progress
from daotai.run.records import ShotRecord
from daotai.run.settings import PipelineSettings, encode_settings_for, resolved_options
from daotai.run.sound import add_soundtrack_to_shots


def shot_keys(plan: Plan, settings: PipelineSettings, encode: Any, source: Path | None) -> dict[str, str]:
    """Each shot's cache key (daotai.run.cache): what determines its files."""
    from daotai.render.registry import spec_for
    from daotai.run.cache import key_fields, shot_key

    spec = spec_for(settings.backend)
    model = (settings.options.get("model") or spec.default_model) if spec.family is not None else None
    memo: dict[Path, str] = {}
    # With retakes the kept take depends on how many takes a shot may have and which checks judge
    # them, so a shot rendered once is not reused for a run asking for takes (daotai.run.retakes)
    takes = {"retakes": {"takes": settings.retakes.takes, "retake_on": sorted(settings.retakes.retake_on)}} \
        if settings.retakes.takes > 1 else {}
    options = dict(settings.options)
    chained = spec.continues_across_shots(options)
    keys: dict[str, str] = {}
    previous: str | None = None
    for shot in plan.shots:
        fields = {**key_fields(plan, shot, settings.backend, options, settings.controls, encode, source, model, memo),
                  **takes}
        if chained:
            # The shot starts on the previous shot's last frame: a change there changes this shot
            fields["continues_from"] = previous
        previous = keys[shot.shot_id] = shot_key(fields)
    return keys


def chain_cache_misses(plan: Plan, settings: PipelineSettings, cache: Any, keys: dict[str, str]) -> list[str]:
    """The shots a chained backend (one shot starting on the last frame of the shot before) must render
    again: none when every shot is cached, else all of them, since the first changed shot must start on
    a frame its predecessor makes only when rendered in the same run. Empty for other backends."""
    from daotai.render.registry import spec_for

    if cache is None or not spec_for(settings.backend).continues_across_shots(dict(settings.options)):
        return []
    if all(cache.has(keys[shot.shot_id]) for shot in plan.shots):
        return []
    return [shot.shot_id for shot in plan.shots]


def reusable_shots(plan: Plan, settings: PipelineSettings, source: Path | None = None) -> frozenset[str]:
    """The shots a render of ``plan`` with ``settings`` would take from the shot cache unchanged
    (their keys are stored and no chained backend forces them again): what an estimate counts
    as a copy, not a render. Empty without a cache."""
    if not settings.cache:
        return frozenset()
    from daotai.run.cache import ShotCache

    options = resolved_options(settings)  # the keys hold the options as run() resolves them
    if options.shots_depend_on_earlier():
        return frozenset()
    settings = replace(settings, options=options.model_dump())
    cache = ShotCache(settings.cache, settings.cache_bytes)
    keys = shot_keys(plan, settings, encode_settings_for(settings, plan.width, plan.height), source)
    rerun = set(chain_cache_misses(plan, settings, cache, keys))
    return frozenset(sid for sid, key in keys.items() if sid not in rerun and cache.has(key))


def reuse_cached_shots(plan: Plan, cache: Any, keys: dict[str, str], out_dir: Path) -> Iterator[Event]:
    """Place every cached shot whose key is unchanged into ``out_dir``; returns their records by shot id."""
    reused: dict[str, ShotRecord] = {}
    for shot in plan.shots:
        key = keys[shot.shot_id]
        found = cache.get(key, out_dir)
        if found is None:
            continue
        if "damaged" in found:
            yield Notice("warning", f"cached shot {key[:12]} was damaged ({found['damaged']}): rendering it again",
                         shot.shot_id)
            continue
        note = f"unchanged since an earlier render: reused from the cache (key {key[:12]})"
        reused[shot.shot_id] = ShotRecord(shot.shot_id, samples=found["samples"], middle=found["middle"],
                                          files=dict(found["files"]), notices=[*found["notices"], note],
                                          audio=dict(found.get("audio") or {}), key=key, reused=True)
        yield Notice("info", note, shot.shot_id)
        yield Progress("render", shot.shot_id, shot.frames, shot.frames, "reused")
        for kind, rel in found["files"].items():
            yield Output(kind, str(out_dir / rel), shot.shot_id)
    return reused


def keep_finished_shots(plan: Plan, layout: RenderLayout, finished: list[ShotRecord], soundtrack: np.ndarray | None,
                        backend: str, cache: Any, keys: dict[str, str]) -> list[str]:
    """Store the shots a stopped run finished in the shot cache (as a whole run would deliver
    them, soundtrack slice included); returns their ids. Never raises over the run's error."""
    kept: list[str] = []
    try:
        records = [r for r in finished if r.shot_id in keys and r.files]
        if not records:
            return kept
        ids = {r.shot_id for r in records}
        done = plan.model_copy(update={"shots": tuple(s for s in plan.shots if s.shot_id in ids)})
        records.sort(key=lambda r: [s.shot_id for s in done.shots].index(r.shot_id))
        for _ in add_soundtrack_to_shots(done, layout, records, soundtrack, backend):
            pass
        for record in records:
            record.key = keys[record.shot_id]
            cache.put(record.key, layout.root, record)
            kept.append(record.shot_id)
    except Exception:  # noqa: BLE001  (keeping is a favour; the run's own error is what the user must see)
        pass
    return kept
