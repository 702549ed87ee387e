"""Compose an English model prompt per shot from the script's words.

Camera vocabulary always comes out in English (video models are trained on it); the
author's own words (appearance, action, names) are kept as written.
"""

from __future__ import annotations

from types import MappingProxyType

FRAMING_WORDS = MappingProxyType(
    {
        "extreme_close_up": "Extreme close-up",
        "close_up": "Close-up",
        "medium_close_up": "Medium close-up",
        "medium": "Medium shot",
        "medium_full": "Medium full shot",
        "full": "Full shot",
        "wide": "Wide shot",
        "extreme_wide": "Extreme wide shot",
    }
)

ANGLE_WORDS = MappingProxyType(
    {
        "eye_level": "eye-level angle",
        "high": "high angle looking down",
        "low": "low angle looking up",
        "birds_eye": "bird's-eye view from directly above",
        "worms_eye": "worm's-eye view from the ground",
        "dutch": "Dutch angle, tilted horizon",
    }
)

TIME_WORDS = MappingProxyType(
    {
        "dawn": "at dawn, soft pink light",
        "morning": "in the morning, fresh daylight",
        "day": "in daylight",
        "afternoon": "in the afternoon, warm light",
        "dusk": "at dusk, golden-hour light",
        "night": "at night, artificial light",
        "interior": "indoors, soft interior light",
    }
)

DEFAULT_NEGATIVE = (
    "blurry, low quality, distorted face, extra limbs, deformed hands, text, watermark, "
    "flicker, jitter, abrupt cuts"
)


def _speed(amount_per_second: float, slow: float, fast: float) -> str:
    """'slowly' / 'steadily' / 'quickly' from a rate and two thresholds."""
    if amount_per_second < slow:
        return "slowly"
    if amount_per_second > fast:
        return "quickly"
    return "steadily"


def describe_move(
    move_type: str,
    motion: tuple[float, float, float],
    rotate: tuple[float, float, float],
    orbit: float,
    fov: float,
    fov_end: float,
    shake: float,
    duration_s: float,
    subject_name: str | None,
) -> str:
    """English camera-move phrase, e.g. 'the camera slowly dollies in toward Lin'."""
    x, y, z = motion
    pan, tilt, roll = rotate
    toward = f" toward {subject_name}" if subject_name else ""
    around = f" around {subject_name}" if subject_name else ""
    d = max(duration_s, 1e-6)
    phrases: list[str] = []
    if move_type == "follow":
        phrases.append("the camera follows the subject, tracking its movement")
    if z:
        verb = "dollies in" + toward if z < 0 else "pulls back"
        if move_type == "dolly_zoom":
            verb = "performs a dolly zoom (vertigo effect), " + ("dollying in" if z < 0 else "dollying out")
        phrases.append(f"the camera {_speed(abs(z) / d, 0.3, 1.0)} {verb}")
    if x:
        phrases.append(f"the camera {_speed(abs(x) / d, 0.3, 1.2)} trucks {'right' if x > 0 else 'left'}")
    if y:
        verb = "cranes" if move_type == "crane" else "rises" if y > 0 else "lowers"
        if move_type == "crane":
            verb += " up" if y > 0 else " down"
        phrases.append(f"the camera {_speed(abs(y) / d, 0.3, 1.0)} {verb}")
    if pan:
        phrases.append(f"the camera {_speed(abs(pan) / d, 8, 30)} pans {'right' if pan > 0 else 'left'}")
    if tilt:
        phrases.append(f"the camera {_speed(abs(tilt) / d, 5, 20)} tilts {'up' if tilt > 0 else 'down'}")
    if roll:
        phrases.append(f"the camera rolls {'clockwise' if roll > 0 else 'counter-clockwise'}")
    if orbit:
        phrases.append(f"the camera {_speed(abs(orbit) / d, 10, 40)} orbits {'right' if orbit > 0 else 'left'}{around}")
    if fov_end != fov and move_type != "dolly_zoom":
        phrases.append(f"the lens {_speed(abs(fov_end - fov) / d, 5, 20)} zooms {'in' if fov_end < fov else 'out'}")
    if shake:
        phrases.append("handheld camera with natural shake")
    if not phrases:
        return "static camera, locked-off tripod shot"
    return ", ".join(phrases)


def compose_prompt(
    framing: str,
    angle: str,
    subject_name: str | None,
    subject_appearance: str,
    others: list[tuple[str, str]],
    scene_name: str,
    scene_description: str,
    time_of_day: str,
    move_phrase: str,
    action: str,
    extra: str,
) -> str:
    """The English prompt for one shot: framing, who, where, when, camera, action, extras."""
    who = ""
    if subject_name:
        who = f" of {subject_name}" + (f" ({subject_appearance})" if subject_appearance else "")
    first = [f"{FRAMING_WORDS[framing]}{who}", ANGLE_WORDS[angle]]
    if others:
        first.append("with " + ", ".join(f"{name} ({look})" if look else name for name, look in others))
    where = f"in {scene_name}" if scene_name else ""
    if scene_description:
        where = f"{where} ({scene_description})" if where else scene_description
    first.append(f"{where} {TIME_WORDS[time_of_day]}".strip())
    parts = [", ".join(first)]
    if action:
        parts.append(action.rstrip(".。 "))
    parts.append(move_phrase[0].upper() + move_phrase[1:])
    if extra:
        parts.append(extra.rstrip(".。 "))
    return ". ".join(p for p in parts if p) + "."


def compose_negative(extra: str) -> str:
    """Default negative prompt plus the shot's own negative words."""
    return f"{DEFAULT_NEGATIVE}, {extra}" if extra else DEFAULT_NEGATIVE
