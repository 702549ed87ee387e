"""Wardrobe from appearance: garment colours, hair, skin, build and accessories that a character's
``appearance`` names (English or 中文), for the previz figure to wear.

A small tokenizer (English words, Chinese by longest match over a lexicon) and the rules that tie
a colour to the garment after it ("a dark blue coat", "红衣"), or to the whole figure when none
follows ("a woman in red", "一身黑"). Apart from the staging because it reads words into looks and
places nothing; the previz backend reads it to dress its figures.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

RGB = tuple[float, float, float]

# Garment words and what they dress: "top" (shirt, sweater), "jacket" (an outer top), "coat"
# (an outer top with a long hem), "suit" (top and trousers alike), "dress" (top and skirt
# alike), "skirt", "bottom" (trousers), "jeans" (trousers, denim unless a colour is named),
# "shoes", "hat", "hair", "glasses", "sunglasses", "skin".
_GARMENTS_EN: dict[str, str] = {
    **dict.fromkeys(("shirt", "shirts", "tshirt", "tee", "blouse", "sweater", "jumper", "hoodie", "top",
                     "polo", "vest", "cardigan", "turtleneck", "sweatshirt", "tunic", "pullover"), "top"),
    **dict.fromkeys(("jacket", "blazer", "windbreaker", "bomber", "anorak"), "jacket"),
    **dict.fromkeys(("coat", "overcoat", "raincoat", "trenchcoat", "trench", "parka", "robe", "cloak",
                     "cape", "poncho", "mac"), "coat"),
    **dict.fromkeys(("suit", "uniform", "tracksuit", "jumpsuit", "overalls", "tuxedo", "scrubs"), "suit"),
    **dict.fromkeys(("dress", "gown", "cheongsam", "qipao", "sundress"), "dress"),
    **dict.fromkeys(("skirt", "miniskirt"), "skirt"),
    **dict.fromkeys(("trousers", "pants", "slacks", "shorts", "leggings", "chinos"), "bottom"),
    "jeans": "jeans",
    **dict.fromkeys(("shoes", "boots", "sneakers", "trainers", "heels", "sandals", "loafers"), "shoes"),
    **dict.fromkeys(("hat", "cap", "beanie", "helmet", "beret", "fedora"), "hat"),
    **dict.fromkeys(("hair", "haired"), "hair"),
    **dict.fromkeys(("glasses", "spectacles", "eyeglasses"), "glasses"),
    **dict.fromkeys(("sunglasses", "shades"), "sunglasses"),
    **dict.fromkeys(("skin", "skinned"), "skin"),
}
_GARMENTS_ZH: dict[str, str] = {
    **dict.fromkeys(("衬衫", "衬衣", "T恤", "t恤", "上衣", "毛衣", "卫衣", "背心", "马甲", "衣服", "衣"), "top"),
    **dict.fromkeys(("外套", "夹克", "西装外套"), "jacket"),
    **dict.fromkeys(("大衣", "风衣", "雨衣", "羽绒服", "长袍", "袍"), "coat"),
    **dict.fromkeys(("西装", "西服", "制服", "中山装", "运动服", "工作服", "校服"), "suit"),
    **dict.fromkeys(("连衣裙", "旗袍", "长裙"), "dress"),
    **dict.fromkeys(("裙子", "短裙", "半身裙", "裙"), "skirt"),
    **dict.fromkeys(("裤子", "长裤", "短裤", "裤"), "bottom"),
    "牛仔裤": "jeans",
    **dict.fromkeys(("鞋", "鞋子", "靴子", "靴", "运动鞋", "皮鞋"), "shoes"),
    **dict.fromkeys(("帽子", "帽", "头盔"), "hat"),
    **dict.fromkeys(("头发", "发"), "hair"),
    "眼镜": "glasses",
    "墨镜": "sunglasses",
    "皮肤": "skin",
}
# A single Chinese character names a garment only right after a colour ("红衣", "黑发"):
# elsewhere it is part of another word (沙发, 出发, 衣柜).
_ZH_NEEDS_COLOUR = frozenset(w for w in _GARMENTS_ZH if len(w) == 1)
# Other words that shape the figure: hair style, age (grey hair), build, a feminine figure
# (long hair unless short hair is named), skin tone.
_FLAGS: dict[str, str] = {
    **dict.fromkeys(("bald", "光头", "秃头"), "bald"),
    **dict.fromkeys(("ponytail", "长发", "马尾", "马尾辫", "辫子"), "long_hair"),
    **dict.fromkeys(("短发", "寸头"), "short_hair"),
    **dict.fromkeys(("old", "elderly", "aged", "grandfather", "grandmother", "grandpa", "grandma",
                     "老人", "老奶奶", "老爷爷", "老太太", "老头", "大爷", "大妈"), "elderly"),
    **dict.fromkeys(("heavy", "stocky", "fat", "chubby", "plump", "burly", "heavyset", "胖", "壮", "魁梧"),
                    "heavy"),
    **dict.fromkeys(("slim", "thin", "skinny", "slender", "lanky", "瘦", "苗条", "纤细"), "slim"),
    **dict.fromkeys(("woman", "women", "girl", "lady", "she", "actress", "mother", "waitress",
                     "女", "女孩", "女人", "女士", "姑娘", "妈妈", "小姐", "女生", "奶奶", "老奶奶", "老太太", "大妈"),
                    "feminine"),
    **dict.fromkeys(("blonde", "blond"), "blonde"),
    "brunette": "brunette",
    **dict.fromkeys(("redhead", "ginger"), "redhead"),
    **dict.fromkeys(("pale", "fair", "白皙"), "skin_light"),
    **dict.fromkeys(("tanned", "黝黑"), "skin_dark"),
}
# Chinese words that contain a garment or colour character but are neither.
_ZH_OTHER = ("沙发", "出发", "发现", "发生", "开发", "发展", "衣柜", "黑板", "白天", "红绿灯", "黄昏", "金属")
_BARRIERS_EN = frozenset(("and", "with", "or", "but", "while", "carrying", "holding"))
_BARRIERS_ZH = frozenset("，,、；;。.和与及跟但!！?？（）()")
_FILLERS_ZH = frozenset("的色之")
LOOK_BACK = 3  # words a colour may stand before its garment ("a blue cotton shirt")

SKIN_TONES: dict[str, RGB] = {
    "light": (0.96, 0.82, 0.72), "medium": (0.86, 0.66, 0.52), "dark": (0.52, 0.35, 0.25),
}
HAIR_COLOURS: dict[str, RGB] = {
    "blonde": (0.86, 0.72, 0.42), "brunette": (0.36, 0.22, 0.13), "redhead": (0.62, 0.25, 0.12),
    "grey": (0.70, 0.70, 0.70),
}
DENIM: RGB = (0.24, 0.34, 0.52)

# Hair named in these colours is hair-coloured, not paint-coloured ("golden hair", "金发", "red hair").
_HAIR_WORDS = {
    **dict.fromkeys(("gold", "golden", "yellow", "金", "金色", "黄", "黄色"), "blonde"),
    **dict.fromkeys(("red", "红", "红色", "orange"), "redhead"),
}


@dataclass(frozen=True)
class Wardrobe:
    """What a character's `appearance` says about the figure; None = not said (use the default).

    ``top`` is the outermost upper garment named (coat > jacket > suit or dress > shirt > a lone
    colour, "a woman in red"); ``one_piece`` means the top's colour continues below (suit, dress).
    """

    top: RGB | None = None
    bottom: RGB | None = None
    shoes: RGB | None = None
    hat: RGB | None = None
    hair: RGB | None = None
    skin: RGB | None = None
    silhouette: str = "plain"  # "plain", "coat" (long hem) or "dress" (skirt to the knee)
    skirt: bool = False  # the lower garment is a skirt
    one_piece: bool = False  # suit or dress: the bottom takes the top's colour unless named
    hat_worn: bool = False
    glasses: str | None = None  # None, "clear" or "dark"
    hair_style: str = "short"  # "short", "long" or "bald"
    build: float = 1.0  # width factor of torso and limbs (slim 0.88 … heavy 1.18)


def _shade(colour: RGB, modifier: str | None) -> RGB:
    """A colour lightened, darkened or brightened by the modifier before it."""
    c = np.asarray(colour, np.float64)
    if modifier == "light":
        c = c + (1.0 - c) * 0.45
    elif modifier == "dark":
        c = c * 0.55
    elif modifier == "bright":
        c = np.clip(c.mean() + (c - c.mean()) * 1.3, 0.0, 1.0)
    return (round(float(c[0]), 4), round(float(c[1]), 4), round(float(c[2]), 4))


def _zh_lexicon() -> dict[str, tuple[str, str]]:
    """Chinese words the appearance tokenizer knows: word -> (kind, value)."""
    from daotai.script.vocab import COLOUR_MODIFIERS, COLOUR_WORDS

    lex: dict[str, tuple[str, str]] = {w: ("other", w) for w in _ZH_OTHER}
    lex.update({w: ("colour", w) for w in COLOUR_WORDS if not w.isascii()})
    lex.update({w: ("modifier", m) for w, m in COLOUR_MODIFIERS.items() if not w.isascii()})
    lex.update({w: ("garment", g) for w, g in _GARMENTS_ZH.items()})
    lex.update({w: ("flag", f) for w, f in _FLAGS.items() if not w.isascii()})
    return lex


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, value) tokens of an appearance: colour, modifier, garment, flag, barrier or other."""
    from daotai.script.vocab import COLOUR_MODIFIERS, COLOUR_WORDS

    lex = _zh_lexicon()
    longest = max(len(w) for w in lex)
    out: list[tuple[str, str]] = []
    for m in re.finditer(r"[a-z]+|[^\sa-z0-9]", text.lower().replace("t-shirt", "tshirt")):
        word = m.group()
        if word.isascii() and word.isalpha():
            if word in COLOUR_WORDS and word not in ("blonde", "blond"):
                out.append(("colour", word))
            elif word in COLOUR_MODIFIERS:
                out.append(("modifier", COLOUR_MODIFIERS[word]))
            elif word in _GARMENTS_EN:
                out.append(("garment", _GARMENTS_EN[word]))
            elif word in _FLAGS:
                out.append(("flag", _FLAGS[word]))
            elif word in _BARRIERS_EN:
                out.append(("barrier", word))
            else:
                out.append(("other", word))
        else:
            out.append(("char", word))
    # Chinese runs: greedy longest match over the lexicon, character by character
    merged: list[tuple[str, str]] = []
    i = 0
    while i < len(out):
        if out[i][0] != "char":
            merged.append(out[i])
            i += 1
            continue
        j = i
        while j < len(out) and out[j][0] == "char":
            j += 1
        run = "".join(v for _, v in out[i:j])
        k = 0
        while k < len(run):
            for n in range(min(longest, len(run) - k), 0, -1):
                piece = run[k:k + n]
                if piece in lex:
                    kind, value = lex[piece]
                    if kind == "garment" and piece in _ZH_NEEDS_COLOUR and not (merged and merged[-1][0] == "colour"):
                        continue
                    merged.append((kind, value))
                    k += n
                    break
            else:
                ch = run[k]
                merged.append(("barrier", ch) if ch in _BARRIERS_ZH else ("filler", ch) if ch in _FILLERS_ZH
                              else ("other", ch))
                k += 1
        i = j
    return merged


_WEARING = frozenset(("in", "wearing", "dressed", "穿", "着", "身", "一身"))


def _after_wearing(tokens: list[tuple[str, str]], i: int) -> bool:
    """Whether the colour token at ``i`` follows a word of wearing ("in", "穿", "一身"), modifiers skipped."""
    j = i - 1
    while j >= 0 and tokens[j][0] in ("modifier", "filler"):
        j -= 1
    return j >= 0 and tokens[j][1] in _WEARING


def wardrobe_from_appearance(text: str) -> Wardrobe:
    """Garment colours, hair, skin, build and accessories named in an `appearance` (English or 中文)."""
    from daotai.script.vocab import COLOUR_WORDS

    tokens = _tokens(text)
    found: dict[str, RGB] = {}  # garment role -> colour named for it (first mention wins)
    words: dict[str, str] = {}  # garment role -> the colour word itself
    named: set[str] = set()  # garment roles mentioned at all
    flags: set[str] = set()
    used: set[int] = set()  # colour tokens claimed by a garment
    for i, (kind, value) in enumerate(tokens):
        if kind == "flag":
            flags.add(value)
        if kind != "garment":
            continue
        named.add(value)
        colour, modifier = None, None
        steps = 0
        for j in range(i - 1, -1, -1):
            k2, v2 = tokens[j]
            if k2 == "barrier" or (k2 == "garment" and steps > 0):
                break
            if k2 == "colour" and colour is None and j not in used:
                colour = v2
                used.add(j)
                if j > 0 and tokens[j - 1][0] == "modifier":
                    modifier = tokens[j - 1][1]
                break
            if k2 == "modifier" and value == "skin":
                modifier = v2
                break
            if k2 != "filler":
                steps += 1
            if steps >= LOOK_BACK:
                break
        if colour is not None and value not in found:
            found[value] = _shade(COLOUR_WORDS[colour], modifier)
            words[value] = colour
        elif value == "skin" and modifier is not None and "skin" not in found:
            found["skin"] = SKIN_TONES["light" if modifier == "light" else "dark"]
    loose = [  # a colour worn without a garment: "a woman in red", "一身黑", "穿着白色的"
        _shade(COLOUR_WORDS[v], tokens[i - 1][1] if i > 0 and tokens[i - 1][0] == "modifier" else None)
        for i, (k, v) in enumerate(tokens)
        if k == "colour" and i not in used and _after_wearing(tokens, i)
    ]
    top = next((found[r] for r in ("coat", "jacket", "suit", "dress", "top") if r in found), None)
    if top is None and not ({"coat", "jacket", "suit", "dress", "top"} & named) and loose:
        top = loose[0]  # "a woman in red"
    one_piece = bool({"suit", "dress"} & named)
    bottom = found.get("bottom") or found.get("jeans") or found.get("skirt")
    if bottom is None and "suit" in found:
        bottom = found["suit"]
    if bottom is None and "jeans" in named:
        bottom = DENIM
    hair = found.get("hair")
    if words.get("hair") in _HAIR_WORDS:
        hair = HAIR_COLOURS[_HAIR_WORDS[words["hair"]]]
    for word in ("blonde", "brunette", "redhead"):
        if hair is None and word in flags:
            hair = HAIR_COLOURS[word]
    if hair is None and "elderly" in flags:
        hair = HAIR_COLOURS["grey"]
    skin = found.get("skin")
    if skin is None and "skin_light" in flags:
        skin = SKIN_TONES["light"]
    if skin is None and "skin_dark" in flags:
        skin = SKIN_TONES["dark"]
    style = "short"
    if "bald" in flags:
        style = "bald"
    elif "long_hair" in flags or ("feminine" in flags and "short_hair" not in flags):
        style = "long"
    silhouette = "dress" if "dress" in named else "coat" if "coat" in named else "plain"
    build = 1.18 if "heavy" in flags else 0.88 if "slim" in flags else 1.0
    return Wardrobe(
        top=top, bottom=bottom, shoes=found.get("shoes"), hat=found.get("hat"), hair=hair, skin=skin,
        silhouette=silhouette, skirt="skirt" in named and "bottom" not in named and "jeans" not in named,
        one_piece=one_piece, hat_worn="hat" in named,
        glasses="dark" if "sunglasses" in named else "clear" if "glasses" in named else None,
        hair_style=style, build=build,
    )
