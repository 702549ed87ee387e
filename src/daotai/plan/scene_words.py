"""What the scene's and the characters' own words settle when the script leaves a field out: the time
of day a scene's name or description names, and whether a character is an animal on four legs.

Word lists and small pure functions, matched as in the rest of the planner (English as whole words
or phrases, lower case; Chinese as written). Apart from the staging because they read text, not
geometry; the planner asks them before anything is placed.
"""

from __future__ import annotations

from daotai.plan.sets import has_phrase as _has_phrase

# Words in a scene's name or description that say when it happens (used when the script gives no
# time_of_day): English whole words and phrases, Chinese as written; tried in this order, so "night
# market" is night and "sunset" beats a "day" elsewhere in the text.
TIME_WORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("night", ("night", "nighttime", "midnight", "at night", "moonlight", "moonlit", "夜", "晚上", "深夜", "午夜",
               "月光")),
    ("dusk", ("dusk", "sunset", "evening", "twilight", "golden hour", "sundown", "黄昏", "傍晚", "日落", "夕阳")),
    ("dawn", ("dawn", "sunrise", "daybreak", "first light", "黎明", "日出", "破晓", "拂晓")),
    ("morning", ("morning", "早晨", "清晨", "上午", "早上")),
    ("afternoon", ("afternoon", "下午", "午后")),
    ("day", ("noon", "midday", "daytime", "白天", "中午", "正午")),
)


def time_of_day_from_words(name: str, description: str = "") -> str | None:
    """The time of day the scene's words name (name first, then description), else None."""
    for text in (name.lower(), description.lower()):
        for time, words in TIME_WORDS:
            if any(_has_phrase(text, w) for w in words):
                return time
    return None

# Words that make a character an animal on four legs (English whole words, Chinese as written).
ANIMAL_WORDS: tuple[str, ...] = (
    "dog", "dogs", "puppy", "pup", "hound", "doggy", "cat", "kitten", "kitty", "horse", "pony", "foal", "fox", "wolf",
    "狗", "小狗", "犬", "狗狗", "猫", "小猫", "猫咪", "骏马", "小马", "马匹", "狐狸", "狼",
)


def character_kind(name: str, appearance: str, char_id: str = "") -> str:
    """'animal' when the character's appearance (else its name or id) names a four-legged animal, else 'person'."""
    for text in (appearance.lower(), name.lower(), char_id.lower().replace("_", " ")):
        if any(_has_phrase(text, w) for w in ANIMAL_WORDS):
            return "animal"
    return "person"
