"""A free-text prompt read for film language, in English and Chinese, into a one-shot script.

``POST /v1/videos`` gets a prompt such as "slow push in on a woman at a night market,
close-up, low angle" or "夜市，女人，近景，推镜头，仰拍". Without a language model the
service still reads what a director would mean by it: the framing, the angle, the camera move
(with its direction, amount and speed), the time of day, the weather, the setting and the
subject, using the script's own vocabularies (:mod:`daotai.script.vocab`) and camera-phrase
reader (:mod:`daotai.script.spellings`), so a word reads here as it reads in a script.

Rules, chosen for free text rather than for a script's fields:

- A clause (text between commas, 、 or ;) that is a whole camera phrase ("pan left 20°",
  "向左摇20度", "推") is read as one. Elsewhere a move is found by its name inside the text,
  with the speed word before it and the direction and amount after it; a one-word English
  move that is also a common noun (truck, crane, roll, pan) counts only next to a direction,
  a speed, an amount or the word "shot", and a one-character Chinese move only as a clause
  of its own (推 in 推车 is a cart).
- Abbreviations (CU, MS, WS, OTS …) count only when written in capitals.
- A word read as more than one thing keeps the first reading from the left; the others are
  listed in ``ignored``.
- Everything not read stays in the script: the whole prompt is the scene's description (the
  planner dresses the set from its words) and the shot's prompt, so a neural model sees the
  words as written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from daotai.script import spellings, vocab

# Words that name a common thing as well as a camera move: a move only with company.
_NOUN_MOVES = frozenset({"truck", "crane", "roll", "pan", "track", "slide", "circle", "boom", "jib", "arc",
                         "follow", "static", "still", "fixed", "locked", "mix", "gimbal", "stabilizer",
                         "stabiliser"})
# Framing and angle spellings too common in prose to mean a shot size or an angle alone.
_PROSE_WORDS = frozenset({"eye", "level", "neutral", "top", "bust", "cowboy", "master", "establishing", "ease",
                          "smooth", "constant", "mix", "inside", "倾斜", "水平", "全身", "双人", "主镜头",
                          "detail", "insert", "subjective", "主观", "插入"})
# Spellings of three letters or fewer that are words, not abbreviations: read in any case.
_SHORT_WORDS = frozenset({"low", "high", "day", "fog", "sea", "pan", "jib", "arc"})
_CLAUSE = re.compile(r"[,，、;；。!！?？\n]+")
_WORD = re.compile(r"[a-z0-9°º]+(?:[-'’][a-z]+)*")
_FOLLOWERS = ("shot", "camera", "move")

WEATHER_WORDS: Mapping[str, str] = {
    **dict.fromkeys(("rain", "rainy", "raining", "drizzle", "downpour", "雨", "下雨", "雨中", "细雨", "大雨"), "rain"),
    **dict.fromkeys(("snow", "snowy", "snowing", "blizzard", "雪", "下雪", "大雪", "雪中"), "snow"),
    **dict.fromkeys(("fog", "foggy", "mist", "misty", "haze", "hazy", "雾", "大雾", "薄雾", "雾中"), "fog"),
    **dict.fromkeys(("storm", "stormy", "thunderstorm", "lightning", "暴风雨", "雷雨", "闪电"), "storm"),
    **dict.fromkeys(("wind", "windy", "gust", "风", "大风", "狂风"), "wind"),
    **dict.fromkeys(("sunny", "sunlight", "sunshine", "clear sky", "晴", "晴天", "阳光"), "sun"),
}
# Places a prompt names; the scene's description carries the words, the reading names the first.
SETTING_WORDS: tuple[str, ...] = (
    "night market", "food stalls", "market", "bazaar", "street", "alley", "road", "crossroads", "city", "rooftop",
    "office", "room", "bedroom", "living room", "kitchen", "bathroom", "cafe", "café", "coffee shop", "diner",
    "restaurant", "bar", "park", "garden", "forest", "woods", "beach", "sea", "lake", "river", "mountain", "desert",
    "field", "station", "platform", "train", "subway", "car", "bus", "classroom", "school", "library", "hospital",
    "church", "temple", "shop", "store", "warehouse", "factory", "stage", "corridor", "hallway", "lobby",
    "夜市", "集市", "市场", "菜市场", "小吃街", "庙会", "街道", "街头", "街", "小巷", "巷子", "路口", "城市", "屋顶",
    "天台", "办公室", "房间", "卧室", "客厅", "厨房", "浴室", "咖啡馆", "咖啡厅", "餐厅", "饭店", "酒吧", "公园",
    "花园", "森林", "树林", "海滩", "海边", "湖边", "河边", "山顶", "沙漠", "田野", "车站", "站台", "火车", "地铁",
    "教室", "学校", "图书馆", "医院", "寺庙", "教堂", "商店", "仓库", "工厂", "舞台", "走廊", "大厅",
)
# Who the shot is about: the first named becomes the shot's one character.
SUBJECT_WORDS: tuple[str, ...] = (
    "old woman", "old man", "young woman", "young man", "little girl", "little boy", "woman", "man", "girl", "boy",
    "lady", "gentleman", "child", "kid", "baby", "teenager", "person", "couple", "family", "crowd", "detective",
    "soldier", "dancer", "chef", "doctor", "nurse", "student", "teacher", "worker", "driver", "vendor", "musician",
    "singer", "runner", "cyclist", "astronaut", "robot", "dog", "cat", "horse", "bird",
    "老太太", "老奶奶", "老爷爷", "老人", "女人", "女子", "女孩", "姑娘", "女士", "男人", "男子", "男孩", "小伙子",
    "先生", "小孩", "孩子", "婴儿", "少年", "少女", "情侣", "一家人", "人群", "侦探", "士兵", "舞者", "厨师", "医生",
    "护士", "学生", "老师", "工人", "司机", "摊贩", "小贩", "歌手", "乐手", "机器人", "宇航员", "狗", "猫", "马", "鸟",
)
_CUT_AT = re.compile(r"\s(?:at|on|in the|inside|by|near|under|through|during|while)\s")


@dataclass(frozen=True)
class Found:
    """One reading: the canonical value (or camera fields) and the words it was read from."""

    value: Any
    words: str


@dataclass(frozen=True)
class PromptReading:
    """What a prompt says in film language; None where it says nothing (the script's default holds)."""

    prompt: str
    framing: Found | None = None
    angle: Found | None = None
    camera: Found | None = None  # value: the camera's fields, e.g. {"type": "dolly", "direction": "in"}
    time_of_day: Found | None = None
    weather: Found | None = None
    setting: Found | None = None
    subject: Found | None = None  # value: the subject's words ("woman", "a woman in a red coat")
    ignored: tuple[str, ...] = field(default=())  # words read a second time, and why they were left

    def as_record(self) -> dict[str, Any]:
        """The reading as JSON for the job: per field its value and the words it came from."""
        found = {name: {"value": item.value, "words": item.words}
                 for name in ("framing", "angle", "camera", "time_of_day", "weather", "setting", "subject")
                 if (item := getattr(self, name)) is not None}
        return {"read": found, "ignored": list(self.ignored)}

    def script(self, seconds: float, size: str, reference: bool = False) -> dict[str, Any]:
        """The one-shot script the prompt stands for (its fields as a script writes them)."""
        subject: dict[str, Any] = {"id": "subject", "appearance": self.prompt[:2000]}
        if self.subject is not None:
            subject["name"] = str(self.subject.words)[:80]
            subject["appearance"] = str(self.subject.value)[:2000]
        if reference:
            subject["reference_images"] = ["reference.png"]
        scene: dict[str, Any] = {"description": self.prompt[:4000]}
        if self.setting is not None:
            scene["name"] = str(self.setting.value)[:120]
        if self.time_of_day is not None:
            scene["time_of_day"] = self.time_of_day.value
        shot: dict[str, Any] = {"shot_id": "s01", "duration": seconds, "subject": "subject",
                                "action": self.prompt, "prompt": self.prompt}
        for name in ("framing", "angle"):
            if (item := getattr(self, name)) is not None:
                shot[name] = item.value
        if self.camera is not None:
            shot["camera"] = dict(self.camera.value)
        return {"title": self.prompt[:200] or "video", "size": size, "scene": scene, "characters": [subject],
                "shots": [shot]}


# ------------------------------------------------------------------ matching


@dataclass(frozen=True)
class _Hit:
    start: int
    end: int
    kind: str
    value: Any
    words: str


def _phrase_pattern(key: str) -> re.Pattern[str]:
    """A folded alias ('close_up') as a pattern over prose: its words apart by spaces, hyphens, dots or nothing."""
    words = [w for w in key.split("_") if w]
    # an apostrophe may sit inside a word ("bird's eye" for birds_eye): folded aliases have none
    body = r"[\s\-_.]*".join("['’]?".join(re.escape(c) for c in w) for w in words)
    return re.compile(r"(?<![a-z0-9])" + body + r"(?![a-z0-9])")


def _table_hits(text: str, original: str, kind: str, table: Mapping[str, Any]) -> list[_Hit]:
    """Every place an alias of ``table`` occurs (English by words, Chinese as a substring)."""
    hits = []
    for key, value in table.items():
        canonical = value[0] if isinstance(value, tuple) else value
        if key in _PROSE_WORDS:
            continue
        if key.isascii():
            short = len(key.replace("_", "")) <= 3 and key not in _SHORT_WORDS
            if short:  # an abbreviation: only in capitals, as a word of its own
                for m in re.finditer(r"(?<![A-Za-z0-9])" + re.escape(key.upper()) + r"(?![A-Za-z0-9])", original):
                    hits.append(_Hit(m.start(), m.end(), kind, canonical, original[m.start():m.end()]))
                continue
            for m in _phrase_pattern(key).finditer(text):
                hits.append(_Hit(m.start(), m.end(), kind, canonical, original[m.start():m.end()]))
        else:
            for m in re.finditer(re.escape(key), text):
                hits.append(_Hit(m.start(), m.end(), kind, canonical, key))
    return hits


def _clause_spans(text: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for m in _CLAUSE.finditer(text):
        spans.append((start, m.start()))
        start = m.end()
    spans.append((start, len(text)))
    return [(a, b) for a, b in spans if text[a:b].strip()]


def _camera_in_clause(clause: str, offset: int, original: str, notes: list[str]) -> list[_Hit]:
    """Camera moves in one clause: the whole clause as a phrase, else each move name with the
    speed word before it and the direction and amount after it."""
    stripped = clause.strip()
    lead = offset + clause.index(stripped) if stripped else offset
    try:
        fields = spellings.read_camera(stripped) if len(stripped) <= 40 else None
    except ValueError:
        fields = None
    if fields is not None:
        return [_Hit(lead, lead + len(stripped), "camera", fields, original[lead:lead + len(stripped)])]
    hits = []
    for hit in _table_hits(clause, original[offset:offset + len(clause)], "camera", vocab.CAMERA_ALIASES):
        word = clause[hit.start:hit.end]
        if not word.isascii() and len(word) == 1:
            continue  # 推 in 推车: a one-character move only as a clause of its own
        before = clause[:hit.start].split()
        after_text = clause[hit.end:]
        after = after_text.split()
        start, end = hit.start, hit.end
        speed = before[-1] if before and before[-1] in spellings.SPEED_WORDS else ""
        if not word.isascii():  # Chinese: speed words written just before the move
            speed = next((w for w in sorted(spellings.SPEED_WORDS, key=len, reverse=True)
                          if not w.isascii() and clause[:hit.start].endswith(w)), "")
        if speed:
            start = clause.rindex(speed, 0, hit.start)
        tail = ""
        if word.isascii():
            m = re.match(r"\s+((?:left|right|up|down|in|out|forward|backward)\b)?\s*"
                         r"((?:[+-]?[0-9]+(?:\.[0-9]+)?)\s*(?:°|º|degrees?|deg|m|metres?|meters?|cm|ft|feet)?)?",
                         after_text)
            if m and (m.group(1) or m.group(2)):
                tail = m.group(0).rstrip()
                end = hit.end + len(tail)
        lone = word.isascii() and vocab.normalise_word(word) in _NOUN_MOVES
        if lone and not (speed or tail or (after and after[0] in _FOLLOWERS)):
            continue
        phrase = clause[start:end]
        try:
            fields = spellings.read_camera_phrase(phrase)
        except ValueError as exc:
            try:
                fields = spellings.read_camera(word)
            except ValueError:
                continue
            start, end = hit.start, hit.end  # the move alone; why the rest was left is said
            notes.append(f"{original[offset:offset + len(clause)].strip()!r} {exc}: read as {word!r}")
        hits.append(_Hit(offset + start, offset + end, "camera", fields, original[offset + start:offset + end]))
    return hits


def _word_hits(text: str, original: str, kind: str, words: Mapping[str, str] | tuple[str, ...]) -> list[_Hit]:
    table = words if isinstance(words, Mapping) else {w: w for w in words}
    hits = []
    for word, value in table.items():
        pattern = (r"(?<![a-z])" + re.escape(word) + r"(?![a-z])") if word.isascii() else re.escape(word)
        for m in re.finditer(pattern, text):
            hits.append(_Hit(m.start(), m.end(), kind, value, original[m.start():m.end()]))
    return hits


def _subject_phrase(text: str, hit: _Hit, taken: list[_Hit]) -> str:
    """The words about the subject: its clause without the film words read there, from the
    article before the noun up to where the setting begins ('a woman in a red coat')."""
    spans = _clause_spans(text)
    a, b = next(((a, b) for a, b in spans if a <= hit.start < b), (hit.start, hit.end))
    chars = list(text[a:b])
    for other in taken:
        if other.kind in ("camera", "framing", "angle", "time_of_day") and a <= other.start and other.end <= b:
            for i in range(other.start - a, other.end - a):
                chars[i] = " "
    phrase = re.sub(r"\s+", " ", "".join(chars)).strip()
    if hit.words.isascii():
        noun = phrase.find(hit.words.lower())
        head = phrase[:noun]
        article = max(head.rfind(" a "), head.rfind(" an "), head.rfind(" the "), head.rfind(" one "))
        begin = article + 1 if article >= 0 else (0 if re.match(r"(a|an|the|one) ", head) else noun)
        cut = _CUT_AT.search(phrase, noun + len(hit.words))
        phrase = phrase[begin: cut.start() if cut else len(phrase)]
    return phrase.strip(" .") or hit.words


def read_prompt(prompt: str) -> PromptReading:
    """Read a free-text prompt for film language (see the module notes for the rules)."""
    original = prompt.strip()
    text = original.lower()
    hits: list[_Hit] = []
    ignored: list[str] = []
    for a, b in _clause_spans(text):
        hits += _camera_in_clause(text[a:b], a, original, ignored)
    hits += _table_hits(text, original, "framing", vocab.FRAMING_ALIASES)
    hits += _table_hits(text, original, "angle", vocab.ANGLE_ALIASES)
    hits += _table_hits(text, original, "time_of_day", vocab.TIME_OF_DAY_ALIASES)
    hits += _word_hits(text, original, "weather", WEATHER_WORDS)
    hits += _word_hits(text, original, "setting", SETTING_WORDS)
    hits += _word_hits(text, original, "subject", SUBJECT_WORDS)
    # Longer readings first where they overlap ("night market" over "market", "push in" over "in"),
    # except that a time word inside a place ("夜" in "夜市", "night" in "night market") still counts.
    hits.sort(key=lambda h: (h.start, -(h.end - h.start)))
    taken: list[_Hit] = []
    for hit in sorted(hits, key=lambda h: (-(h.end - h.start), h.start)):
        overlaps = [t for t in taken if hit.start < t.end and t.start < hit.end]
        if all(t.kind == "setting" and hit.kind == "time_of_day" for t in overlaps):
            taken.append(hit)
    chosen: dict[str, Found] = {}
    for hit in sorted(taken, key=lambda h: h.start):
        if hit.kind in chosen:
            if chosen[hit.kind].value != hit.value:
                ignored.append(f"{hit.words!r}: the {hit.kind.replace('_', ' ')} was already read from "
                               f"{chosen[hit.kind].words!r}")
            continue
        value = hit.value
        if hit.kind == "subject":
            value = _subject_phrase(text, hit, taken)
            value = original[text.find(value):text.find(value) + len(value)] if value in text else value
        chosen[hit.kind] = Found(value, hit.words)
    return PromptReading(prompt=original, ignored=tuple(ignored), **chosen)
