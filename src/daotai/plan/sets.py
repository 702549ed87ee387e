"""Dressed set kits: what stands round the action in an office, a kitchen, a street, a beach …

A kit is data: props (a few primitives each, in the prop's own frame: origin on the ground,
+z toward the action), rows that lay copies of a prop along one side of the action area (the
box around every place a character stands during the script), and a surround that closes the
set beyond the rows and beyond every camera (walls and a ceiling, or dressing and a horizon
all round: ``daotai.plan.surround``). Colours are roles the kit's palette names; counts and
some colours are drawn from the script's seed, so the same script always gets the same set.
``daotai.plan.set_pieces.dress_set`` lays a kit out; a prop of a row is left out when it stands
where a character walks, where a camera is, or between a camera and its subject.

The scene's ``set`` (alias ``kit``) names a kit; without it the scene's name, then its
description, picks one by its words (English whole words, Chinese as written), else the neutral
``default``. Kit names are the script's ``SetKit`` vocabulary (a test keeps the two equal).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

from daotai.plan.surround import Band, Horizon, PropPart, Surround

RGB = tuple[float, float, float]


@dataclass(frozen=True)
class Row:
    """Copies of ``prop`` in a row along one side of the action area, facing it."""

    prop: str
    side: str  # "back" (-z), "front" (+z), "left" (-x), "right" (+x) or "over" (above the action, along x)
    offset: float  # metres from the action area's edge to the props' origin line
    spacing: float  # metres between neighbours
    count: tuple[int, int]  # fewest and most, drawn from the seed
    extend: float = 0.0  # spread the row at least this much wider than the action area


@dataclass(frozen=True)
class Kit:
    """A dressed set: the words that choose it, its props, palette, layout and what surrounds it."""

    name: str
    words: tuple[str, ...]  # whole English words or phrases, Chinese as written
    props: Mapping[str, tuple[PropPart, ...]]
    palette: Mapping[str, tuple[RGB, ...]]  # role -> colours; each prop copy draws one from the seed
    rows: tuple[Row, ...]
    surround: Surround

    @property
    def interior(self) -> bool:
        return self.surround.interior


def _box(x: float, y: float, z: float, w: float, h: float, d: float, role: str) -> PropPart:
    return ("box", (x, y, z), (w, h, d), role)


def _cyl(x: float, y: float, z: float, w: float, h: float, role: str) -> PropPart:
    return ("cylinder", (x, y, z), (w, h, w), role)


def _ball(x: float, y: float, z: float, w: float, h: float, role: str) -> PropPart:
    return ("sphere", (x, y, z), (w, h, w), role)


_BOOTH: tuple[PropPart, ...] = (  # two benches facing across a table, the row runs along the wall
    _box(0.0, 0.0, 0.0, 0.8, 0.74, 1.0, "table"),
    _box(-0.75, 0.0, 0.0, 0.5, 0.45, 1.2, "seat"),
    _box(-1.05, 0.0, 0.0, 0.14, 1.15, 1.2, "seat"),
    _box(0.75, 0.0, 0.0, 0.5, 0.45, 1.2, "seat"),
    _box(1.05, 0.0, 0.0, 0.14, 1.15, 1.2, "seat"),
)
_STALL: tuple[PropPart, ...] = (
    _box(0.0, 0.0, 0.0, 1.8, 0.85, 0.7, "stall"),
    _cyl(-0.85, 0.0, -0.35, 0.06, 2.3, "pole"), _cyl(0.85, 0.0, -0.35, 0.06, 2.3, "pole"),
    _cyl(-0.85, 0.0, 0.45, 0.06, 2.2, "pole"), _cyl(0.85, 0.0, 0.45, 0.06, 2.2, "pole"),
    _box(0.0, 2.2, 0.05, 2.1, 0.08, 1.3, "awning"),
    _box(0.0, 2.28, 0.7, 2.1, 0.3, 0.04, "awning"),  # the awning's valance
    _box(-0.5, 0.85, 0.0, 0.35, 0.22, 0.3, "goods"), _box(0.05, 0.85, 0.05, 0.3, 0.3, 0.3, "goods"),
    _ball(0.55, 0.85, 0.0, 0.32, 0.26, "goods"),
    _ball(-0.85, 1.75, 0.65, 0.34, 0.4, "lantern"), _ball(0.85, 1.75, 0.65, 0.34, 0.4, "lantern"),
)
_DESK: tuple[PropPart, ...] = (  # a desk with its monitor, the chair on the action side
    _box(0.0, 0.70, 0.0, 1.4, 0.04, 0.7, "desk"),
    _box(-0.66, 0.0, 0.0, 0.05, 0.70, 0.66, "desk"), _box(0.66, 0.0, 0.0, 0.05, 0.70, 0.66, "desk"),
    _box(0.0, 0.74, -0.18, 0.08, 0.16, 0.08, "dark"),
    _box(0.0, 0.88, -0.17, 0.58, 0.36, 0.04, "dark"),
    _box(0.0, 0.90, -0.145, 0.52, 0.30, 0.01, "screen"),
    _cyl(0.0, 0.0, 0.6, 0.07, 0.44, "dark"),
    _box(0.0, 0.44, 0.6, 0.5, 0.08, 0.5, "chair"),
    _box(0.0, 0.5, 0.86, 0.48, 0.55, 0.06, "chair"),
)
_TREE: tuple[PropPart, ...] = (_cyl(0.0, 0.0, 0.0, 0.32, 2.3, "trunk"), _ball(0.0, 1.6, 0.0, 2.6, 2.4, "leaves"))
_LAMP_POST: tuple[PropPart, ...] = (_cyl(0.0, 0.0, 0.0, 0.12, 4.0, "pole"), _ball(0.0, 3.95, 0.0, 0.4, 0.45, "lamp"))
_CAR: tuple[PropPart, ...] = (  # parked along the kerb, length across the frame
    _box(0.0, 0.25, 0.0, 4.2, 0.75, 1.8, "car"),
    _box(-0.2, 1.0, 0.0, 2.2, 0.55, 1.6, "glass"),
    _box(-1.3, 0.0, 0.85, 0.62, 0.6, 0.2, "tyre"), _box(1.3, 0.0, 0.85, 0.62, 0.6, 0.2, "tyre"),
    _box(-1.3, 0.0, -0.85, 0.62, 0.6, 0.2, "tyre"), _box(1.3, 0.0, -0.85, 0.62, 0.6, 0.2, "tyre"),
)

_BENCH: tuple[PropPart, ...] = (
    _box(0.0, 0.40, 0.0, 1.6, 0.07, 0.45, "bench"), _box(0.0, 0.5, -0.2, 1.6, 0.4, 0.05, "bench"),
    _box(-0.7, 0.0, 0.0, 0.08, 0.40, 0.45, "iron"), _box(0.7, 0.0, 0.0, 0.08, 0.40, 0.45, "iron"),
)
_PENDANT: tuple[PropPart, ...] = (_cyl(0.0, 2.45, 0.0, 0.02, 0.75, "chrome"), _ball(0.0, 2.2, 0.0, 0.34, 0.3, "lamp"))

# ---------------------------------------------------------------- what closes each set
#
# Wall fixtures: z = 0 is the wall's inner face, +z into the room. Facades and trees of an
# exterior's bands: their front on the surround line, their bulk behind it (-z).

_WINDOW: tuple[PropPart, ...] = (  # glass in four panes: a mullion and a transom, a sill below
    _box(0.0, 0.9, 0.0, 1.8, 1.4, 0.06, "glass"), _box(0.0, 0.84, 0.02, 2.0, 0.06, 0.14, "trim"),
    _box(0.0, 0.9, 0.02, 0.06, 1.4, 0.06, "trim"), _box(0.0, 1.57, 0.02, 1.8, 0.06, 0.06, "trim"),
)
_DOOR: tuple[PropPart, ...] = (_box(0.0, 0.0, 0.0, 0.95, 2.1, 0.08, "door"),
                               _box(0.33, 1.0, 0.05, 0.06, 0.06, 0.06, "trim"))
_PICTURE: tuple[PropPart, ...] = (_box(0.0, 1.35, 0.0, 0.9, 0.65, 0.05, "picture"),)
_BOARD: tuple[PropPart, ...] = (_box(0.0, 0.9, 0.0, 3.6, 1.2, 0.06, "board"),
                                _box(0.0, 0.86, 0.04, 3.6, 0.05, 0.1, "trim"))
_WALL_SHELF: tuple[PropPart, ...] = (_box(0.0, 0.0, 0.2, 1.8, 2.0, 0.4, "shelf"),
                                     _box(0.0, 0.5, 0.41, 1.6, 0.3, 0.02, "goods"),
                                     _box(0.0, 1.2, 0.41, 1.6, 0.3, 0.02, "goods"))
_SHOPFRONT: tuple[PropPart, ...] = (_box(0.0, 0.1, 0.0, 3.2, 2.3, 0.06, "glass"),
                                    _box(0.0, 2.5, 0.02, 3.4, 0.45, 0.1, "sign"))
_CAR_WINDOW: tuple[PropPart, ...] = (_box(0.0, 0.85, 0.0, 0.9, 0.5, 0.04, "glass"),)
_FACADE: tuple[PropPart, ...] = (
    _box(0.0, 0.0, -3.0, 6.0, 9.0, 6.0, "building"), _box(-1.5, 0.0, 0.02, 1.2, 2.3, 0.06, "door"),
    _box(1.3, 0.6, 0.02, 2.4, 1.6, 0.06, "glass"),
    _box(-1.5, 3.5, 0.02, 1.2, 1.4, 0.06, "glass"), _box(1.3, 3.5, 0.02, 2.4, 1.4, 0.06, "glass"),
    _box(-1.5, 6.2, 0.02, 1.2, 1.4, 0.06, "glass"), _box(1.3, 6.2, 0.02, 2.4, 1.4, 0.06, "glass"),
)
_BRICK_FACADE: tuple[PropPart, ...] = (
    _box(0.0, 0.0, -2.0, 4.0, 12.0, 4.0, "brick"), _box(-0.9, 0.0, 0.02, 1.0, 2.2, 0.06, "door"),
    _box(0.9, 3.4, 0.02, 1.0, 1.3, 0.06, "glass"), _box(-0.9, 6.4, 0.02, 1.0, 1.3, 0.06, "glass"),
    _box(0.6, 2.9, 0.35, 1.8, 0.06, 0.7, "iron"),  # a fire escape landing
    _cyl(-1.8, 0.0, 0.1, 0.12, 12.0, "iron"),  # a drainpipe
    _ball(-0.9, 2.45, 0.15, 0.26, 0.26, "lamp"),
)
_MARKET_FACADE: tuple[PropPart, ...] = (
    _box(0.0, 0.0, -2.5, 6.5, 7.5, 5.0, "building"), _box(0.0, 0.0, 0.02, 4.0, 2.5, 0.06, "glass"),
    _box(0.0, 3.0, 0.06, 3.0, 0.9, 0.1, "sign"), _box(-2.0, 4.6, 0.02, 1.4, 1.3, 0.06, "glass"),
    _box(2.0, 4.6, 0.02, 1.4, 1.3, 0.06, "glass"),
)
_RING_TREE: tuple[PropPart, ...] = (_cyl(0.0, 0.0, -1.3, 0.32, 2.6, "trunk"), _ball(0.0, 1.7, -1.3, 2.8, 2.8, "leaves"))
_FOREST_TREE: tuple[PropPart, ...] = (_cyl(0.0, 0.0, -1.0, 0.4, 4.0, "trunk"), _ball(0.0, 2.6, -1.0, 2.4, 5.0, "leaves"))
_PALM: tuple[PropPart, ...] = (_cyl(0.0, 0.0, -1.0, 0.28, 4.6, "trunk"), _ball(0.0, 4.2, -1.0, 3.0, 0.9, "leaves"))
_DUNE: tuple[PropPart, ...] = (_ball(0.0, 0.0, -3.5, 8.0, 3.0, "sand"),)
_SEA: tuple[PropPart, ...] = (_box(0.0, 0.0, -150.0, 600.0, 0.08, 300.0, "sea"),)
_PARAPET: tuple[PropPart, ...] = (_box(0.0, 0.0, -0.15, 4.0, 1.1, 0.3, "parapet"),
                                  _box(0.0, 1.1, -0.15, 4.0, 0.06, 0.38, "trim"))
_TRAIN: tuple[PropPart, ...] = (
    _box(0.0, 0.3, -1.9, 19.6, 3.3, 3.0, "train"), _box(0.0, 1.5, -0.38, 18.0, 0.9, 0.06, "glass"),
    _box(-6.0, 0.35, -0.38, 1.3, 2.1, 0.08, "door"), _box(6.0, 0.35, -0.38, 1.3, 2.1, 0.08, "door"),
)
_STATION_WALL: tuple[PropPart, ...] = (
    _box(0.0, 0.0, -0.2, 8.0, 4.6, 0.4, "wall"), _box(-2.0, 1.1, 0.02, 1.6, 1.1, 0.05, "poster"),
    _box(2.0, 1.1, 0.02, 1.6, 1.1, 0.05, "poster"), _box(0.0, 2.9, 0.04, 2.4, 0.5, 0.08, "sign"),
)
_COLUMN: tuple[PropPart, ...] = (_cyl(0.0, 0.0, -0.3, 0.4, 4.4, "column"),)
_FLAT: tuple[PropPart, ...] = (_box(0.0, 0.0, -0.1, 4.0, 3.6, 0.2, "flat"), _box(-1.9, 0.0, -0.45, 0.1, 3.4, 0.5, "brace"))

_ROOM_LIGHT = {"ceiling": ((0.93, 0.92, 0.90),), "lamp": ((1.0, 0.95, 0.85),), "trim": ((0.92, 0.92, 0.90),),
               "glass": ((0.62, 0.76, 0.88),), "door": ((0.50, 0.36, 0.25), (0.80, 0.80, 0.78)),
               "picture": ((0.30, 0.45, 0.62), (0.72, 0.52, 0.30), (0.45, 0.60, 0.40))}
_SKYLINE = Horizon("skyline", (14.0, 45.0))
_CITY = {"skyline": ((0.46, 0.48, 0.55), (0.52, 0.52, 0.56), (0.42, 0.44, 0.50))}


def _room(reach: float, bands: tuple[Band, ...], wall: tuple[RGB, ...], height: float = 2.9,
          **colours: tuple[RGB, ...]) -> Surround:
    """Four walls and a ceiling ``reach`` beyond the action, with ``bands`` of fixtures on them."""
    return Surround(reach, True, height, bands, MappingProxyType({**_ROOM_LIGHT, "wall": wall, **colours}))


def _open(reach: float, bands: tuple[Band, ...], horizon: Horizon | None, canopy: float | None = None,
          **colours: tuple[RGB, ...]) -> Surround:
    """Bands of dressing on every side ``reach`` beyond the action and a far horizon ring."""
    return Surround(reach, False, canopy, bands, MappingProxyType({**_ROOM_LIGHT, **colours}), horizon)


KITS: dict[str, Kit] = {
    "diner": Kit(
        "diner",
        ("diner", "cafe", "café", "coffee shop", "restaurant", "canteen", "cafeteria", "bistro",
         "餐厅", "餐馆", "饭馆", "饭店", "咖啡馆", "咖啡店", "食堂", "快餐店", "面馆", "茶餐厅"),
        {
            "counter": (_box(0.0, 0.0, 0.0, 4.2, 1.0, 0.65, "counter"), _box(0.0, 1.0, 0.0, 4.3, 0.06, 0.8, "chrome"),
                        _box(0.0, 0.0, -1.3, 4.2, 1.6, 0.5, "counter"),  # back bar with shelves
                        _box(0.0, 2.15, -1.45, 3.0, 0.5, 0.06, "neon")),
            "stool": (_cyl(0.0, 0.0, 0.0, 0.07, 0.68, "chrome"), _cyl(0.0, 0.68, 0.0, 0.42, 0.09, "seat")),
            "booth": _BOOTH,
            "pendant": _PENDANT,
        },
        {
            "counter": ((0.78, 0.16, 0.14),),
            "chrome": ((0.82, 0.83, 0.85),), "seat": ((0.80, 0.15, 0.15), (0.15, 0.50, 0.55)),
            "table": ((0.90, 0.90, 0.88),), "lamp": ((1.0, 0.88, 0.55),), "neon": ((0.95, 0.35, 0.65),),
        },
        (
            Row("counter", "back", 1.9, 4.0, (1, 1)),
            Row("stool", "back", 1.3, 0.8, (4, 5)),
            Row("pendant", "back", 1.9, 1.4, (3, 3)),
            Row("booth", "left", 1.5, 2.6, (2, 2)),
            Row("booth", "right", 1.5, 2.6, (1, 2)),
        ),
        _room(3.6, (Band("window", _WINDOW, 2.6, ("front", "right")), Band("door", _DOOR, 100.0, ("left",)),
                    Band("picture", _PICTURE, 2.2, ("back",))),
              wall=((0.93, 0.88, 0.78),), height=3.0),
    ),
    "bar": Kit(
        "bar",
        ("bar", "pub", "tavern", "saloon", "nightclub", "cocktail bar", "酒吧", "酒馆", "夜店"),
        {
            "bar": (_box(0.0, 0.0, 0.0, 4.2, 1.05, 0.6, "counter"), _box(0.0, 1.05, 0.0, 4.3, 0.05, 0.75, "wood"),
                    _box(0.0, 0.0, -1.3, 4.2, 1.0, 0.45, "counter"),
                    _box(0.0, 1.45, -1.42, 4.0, 0.04, 0.25, "wood"), _box(0.0, 1.49, -1.42, 3.8, 0.28, 0.12, "bottles"),
                    _box(0.0, 1.9, -1.42, 4.0, 0.04, 0.25, "wood"), _box(0.0, 1.94, -1.42, 3.8, 0.28, 0.12, "bottles"),
                    _box(0.0, 2.4, -1.5, 2.4, 0.4, 0.06, "neon")),
            "stool": (_cyl(0.0, 0.0, 0.0, 0.07, 0.74, "chrome"), _cyl(0.0, 0.74, 0.0, 0.4, 0.08, "seat")),
            "pendant": _PENDANT,
            "high_table": (_cyl(0.0, 0.0, 0.0, 0.5, 0.03, "chrome"), _cyl(0.0, 0.0, 0.0, 0.1, 1.05, "chrome"),
                           _cyl(0.0, 1.05, 0.0, 0.7, 0.04, "wood")),
        },
        {
            "counter": ((0.30, 0.20, 0.14), (0.22, 0.22, 0.25)), "wood": ((0.50, 0.34, 0.20),),
            "bottles": ((0.35, 0.55, 0.35), (0.70, 0.50, 0.25)), "chrome": ((0.78, 0.79, 0.80),),
            "seat": ((0.55, 0.15, 0.12), (0.15, 0.15, 0.17)), "lamp": ((1.0, 0.80, 0.50),),
            "neon": ((0.30, 0.70, 0.95), (0.95, 0.30, 0.55)),
        },
        (
            Row("bar", "back", 1.9, 4.5, (1, 1)),
            Row("stool", "back", 1.3, 0.8, (4, 5)),
            Row("pendant", "back", 1.9, 1.4, (3, 3)),
            Row("high_table", "left", 1.6, 2.2, (2, 2)),
            Row("high_table", "right", 1.6, 2.2, (1, 2)),
        ),
        _room(3.6, (Band("picture", _PICTURE, 2.4, ("back", "front", "right")), Band("door", _DOOR, 100.0, ("left",))),
              wall=((0.36, 0.25, 0.18), (0.24, 0.26, 0.30)), height=3.0, ceiling=((0.18, 0.16, 0.15),),
              lamp=((1.0, 0.80, 0.50),)),
    ),
    "night_market": Kit(
        "night_market",
        ("night market", "market", "bazaar", "stalls", "food stalls", "夜市", "集市", "市场", "菜市场", "小吃街", "庙会"),
        {
            "stall": _STALL,
            "lantern": (_ball(0.0, 3.1, 0.0, 0.42, 0.5, "lantern"),),
        },
        {
            "stall": ((0.55, 0.40, 0.28), (0.45, 0.33, 0.25)), "pole": ((0.22, 0.22, 0.24),),
            "awning": ((0.85, 0.20, 0.16), (0.95, 0.72, 0.18), (0.20, 0.45, 0.75), (0.25, 0.60, 0.35),
                       (0.92, 0.92, 0.90)),
            "goods": ((0.90, 0.55, 0.20), (0.55, 0.75, 0.30), (0.85, 0.30, 0.35), (0.95, 0.85, 0.55)),
            "lantern": ((0.95, 0.25, 0.15), (1.0, 0.55, 0.15)),
        },
        (
            Row("stall", "back", 1.0, 2.4, (4, 6), extend=3.0),
            Row("stall", "front", 1.6, 2.4, (3, 5), extend=3.0),
            Row("lantern", "over", 0.0, 1.3, (6, 8), extend=2.0),
        ),
        _open(4.6, (Band("building", _MARKET_FACADE, 7.0, fill=True),), _SKYLINE,
              building=((0.42, 0.40, 0.44), (0.50, 0.45, 0.40)), glass=((0.55, 0.50, 0.40),),
              sign=((0.95, 0.35, 0.30), (0.30, 0.80, 0.85), (0.98, 0.85, 0.30)), **_CITY),
    ),
    "street": Kit(
        "street",
        ("street", "road", "avenue", "town", "city", "downtown", "sidewalk", "crossroads", "intersection",
         "街", "街道", "马路", "路口", "城市", "老城区", "街头", "小镇"),
        {
            "lamp_post": _LAMP_POST,
            "car": _CAR,
            "bin": (_cyl(0.0, 0.0, 0.0, 0.5, 0.9, "bin"),),
        },
        {
            "glass": ((0.45, 0.58, 0.70),), "pole": ((0.24, 0.24, 0.27),),
            "lamp": ((1.0, 0.92, 0.70),), "car": ((0.70, 0.12, 0.12), (0.15, 0.30, 0.60), (0.85, 0.85, 0.85),
                                                  (0.20, 0.20, 0.22)),
            "tyre": ((0.08, 0.08, 0.09),), "bin": ((0.25, 0.40, 0.30),),
        },
        (
            Row("lamp_post", "back", 1.6, 6.0, (2, 3), extend=2.0),
            Row("car", "back", 2.9, 5.2, (1, 2)),
            Row("bin", "left", 1.4, 1.0, (1, 1)),
        ),
        _open(5.0, (Band("building", _FACADE, 6.6, fill=True),), _SKYLINE,
              building=((0.66, 0.60, 0.55), (0.56, 0.57, 0.62), (0.72, 0.66, 0.56), (0.60, 0.52, 0.48)),
              door=((0.35, 0.25, 0.20),), glass=((0.45, 0.58, 0.70),), **_CITY),
    ),
    "alley": Kit(
        "alley",
        ("alley", "alleyway", "back alley", "lane", "巷", "小巷", "巷子", "胡同", "弄堂"),
        {
            "dumpster": (_box(0.0, 0.0, 0.0, 1.6, 1.2, 0.9, "bin"), _box(0.0, 1.2, 0.0, 1.65, 0.06, 0.95, "dark")),
            "crates": (_box(0.0, 0.0, 0.0, 0.6, 0.5, 0.6, "crate"), _box(0.1, 0.5, 0.0, 0.5, 0.45, 0.5, "crate")),
        },
        {"bin": ((0.20, 0.35, 0.25), (0.30, 0.30, 0.32)), "dark": ((0.12, 0.12, 0.13),),
         "crate": ((0.55, 0.42, 0.28), (0.45, 0.35, 0.25))},
        (
            Row("dumpster", "back", 0.9, 3.0, (1, 1)),
            Row("crates", "left", 0.8, 1.1, (1, 2)),
            Row("crates", "right", 0.8, 1.1, (1, 1)),
        ),
        _open(2.2, (Band("building", _BRICK_FACADE, 4.2, fill=True),), Horizon("skyline", (20.0, 50.0), 60.0),
              brick=((0.50, 0.28, 0.22), (0.42, 0.30, 0.26), (0.55, 0.50, 0.46)), door=((0.25, 0.22, 0.20),),
              glass=((0.35, 0.42, 0.50),), iron=((0.16, 0.16, 0.17),), lamp=((1.0, 0.85, 0.55),), **_CITY),
    ),
    "office": Kit(
        "office",
        ("office", "workplace", "cubicle", "cubicles", "open plan", "meeting room", "boardroom",
         "办公室", "办公", "公司", "写字楼", "会议室", "工位"),
        {
            "desk": _DESK,
            "shelf": (_box(0.0, 0.0, 0.0, 1.8, 2.0, 0.4, "shelf"), _box(0.0, 0.4, 0.21, 1.6, 0.25, 0.02, "books"),
                      _box(0.0, 1.1, 0.21, 1.6, 0.25, 0.02, "books")),
            "plant": (_cyl(0.0, 0.0, 0.0, 0.4, 0.42, "pot"), _ball(0.0, 0.35, 0.0, 0.75, 0.9, "plant")),
        },
        {
            "desk": ((0.78, 0.72, 0.62),),
            "dark": ((0.16, 0.16, 0.18),), "screen": ((0.30, 0.55, 0.80),), "chair": ((0.20, 0.22, 0.26),),
            "shelf": ((0.48, 0.37, 0.28),), "books": ((0.70, 0.30, 0.25), (0.25, 0.40, 0.60)),
            "pot": ((0.85, 0.85, 0.82),), "plant": ((0.25, 0.55, 0.30),),
        },
        (
            Row("desk", "back", 1.3, 1.8, (3, 4), extend=1.0),
            Row("shelf", "back", 3.4, 2.4, (1, 2), extend=4.0),
            Row("desk", "left", 1.3, 1.8, (2, 2)),
            Row("desk", "right", 1.3, 1.8, (1, 2)),
            Row("plant", "back", 3.2, 7.0, (2, 2), extend=6.0),
        ),
        _room(3.8, (Band("window", _WINDOW, 2.6, ("back", "left")), Band("door", _DOOR, 100.0, ("right",)),
                    Band("picture", _PICTURE, 3.0, ("front",))),
              wall=((0.86, 0.87, 0.88),), height=3.0),
    ),
    "classroom": Kit(
        "classroom",
        ("classroom", "school", "lecture hall", "lecture room", "教室", "学校", "课堂", "讲堂"),
        {
            "teacher_desk": (_box(0.0, 0.0, 0.0, 1.4, 0.76, 0.7, "wood"), _box(0.0, 0.76, 0.0, 1.45, 0.04, 0.75, "wood")),
            "school_desk": (_box(0.0, 0.70, 0.0, 0.7, 0.04, 0.5, "desk"), _box(-0.32, 0.0, 0.0, 0.04, 0.70, 0.45, "iron"),
                            _box(0.32, 0.0, 0.0, 0.04, 0.70, 0.45, "iron"), _box(0.0, 0.44, 0.55, 0.42, 0.04, 0.4, "chair"),
                            _box(0.0, 0.46, 0.76, 0.42, 0.4, 0.04, "chair")),
        },
        {"wood": ((0.55, 0.40, 0.28),), "desk": ((0.80, 0.70, 0.52),), "iron": ((0.25, 0.27, 0.30),),
         "chair": ((0.30, 0.45, 0.65), (0.75, 0.55, 0.25))},
        (
            Row("teacher_desk", "back", 1.6, 3.0, (1, 1)),
            Row("school_desk", "left", 1.2, 1.3, (2, 3)),
            Row("school_desk", "right", 1.2, 1.3, (2, 3)),
            Row("school_desk", "front", 1.5, 1.2, (3, 4)),
        ),
        _room(3.6, (Band("board", _BOARD, 100.0, ("back",)), Band("window", _WINDOW, 2.6, ("left",)),
                    Band("door", _DOOR, 100.0, ("right",)), Band("picture", _PICTURE, 2.0, ("front",))),
              wall=((0.90, 0.88, 0.80), (0.82, 0.88, 0.86)), height=3.2, board=((0.16, 0.30, 0.24),)),
    ),
    "shop": Kit(
        "shop",
        ("shop", "store", "supermarket", "grocery", "convenience store", "boutique", "bookshop", "bookstore",
         "商店", "超市", "便利店", "小卖部", "店铺", "书店"),
        {
            "till": (_box(0.0, 0.0, 0.0, 1.6, 0.95, 0.6, "counter"), _box(0.4, 0.95, 0.0, 0.35, 0.25, 0.3, "dark"),
                     _box(0.4, 1.2, -0.05, 0.3, 0.2, 0.04, "screen")),
            "gondola": (_box(0.0, 0.0, 0.0, 1.8, 1.5, 0.6, "shelf"),
                        _box(0.0, 0.35, 0.31, 1.7, 0.25, 0.02, "goods"), _box(0.0, 0.85, 0.31, 1.7, 0.25, 0.02, "goods"),
                        _box(0.0, 0.35, -0.31, 1.7, 0.25, 0.02, "goods"), _box(0.0, 0.85, -0.31, 1.7, 0.25, 0.02, "goods")),
        },
        {"counter": ((0.85, 0.85, 0.82),), "dark": ((0.15, 0.15, 0.16),), "screen": ((0.30, 0.55, 0.80),),
         "shelf": ((0.80, 0.80, 0.78), (0.55, 0.42, 0.30)),
         "goods": ((0.90, 0.45, 0.20), (0.30, 0.55, 0.80), (0.85, 0.25, 0.30), (0.45, 0.70, 0.30))},
        (
            Row("till", "back", 1.6, 3.0, (1, 1)),
            Row("gondola", "left", 1.4, 2.0, (2, 3)),
            Row("gondola", "right", 1.4, 2.0, (2, 3)),
        ),
        _room(3.0, (Band("shelf", _WALL_SHELF, 2.0, ("back", "left", "right")), Band("shopfront", _SHOPFRONT, 3.6, ("front",))),
              wall=((0.92, 0.92, 0.90),), height=3.0, shelf=((0.80, 0.80, 0.78),),
              goods=((0.90, 0.45, 0.20), (0.30, 0.55, 0.80), (0.85, 0.25, 0.30), (0.45, 0.70, 0.30)),
              sign=((0.85, 0.20, 0.18), (0.20, 0.50, 0.30))),
    ),
    "car": Kit(
        "car",
        ("car interior", "inside the car", "inside a car", "in the car", "in a car", "in his car", "in her car",
         "back seat", "front seat", "driver's seat", "taxi", "车里", "车内", "汽车里", "出租车", "驾驶座", "副驾驶"),
        {"rear_seat": (_box(0.0, 0.0, 0.0, 1.3, 0.45, 0.5, "upholstery"),
                       _box(0.0, 0.0, -0.3, 1.3, 0.95, 0.15, "upholstery"))},
        {"upholstery": ((0.22, 0.22, 0.24), (0.45, 0.38, 0.30))},
        (Row("rear_seat", "back", 0.3, 1.5, (1, 1)),),
        _room(0.8, (Band("window", _CAR_WINDOW, 1.0),), wall=((0.28, 0.28, 0.30),), height=1.5,
              ceiling=((0.55, 0.53, 0.50),), glass=((0.55, 0.66, 0.74),)),
    ),
    "kitchen": Kit(
        "kitchen",
        ("kitchen", "kitchenette", "厨房"),
        {
            "counter": (_box(0.0, 0.0, 0.0, 3.0, 0.88, 0.6, "cabinet"), _box(0.0, 0.88, 0.0, 3.1, 0.05, 0.65, "worktop"),
                        _box(0.7, 0.93, 0.0, 0.6, 0.02, 0.5, "dark"), _box(-0.7, 0.9, 0.0, 0.5, 0.04, 0.4, "chrome"),
                        _box(0.0, 1.5, -0.12, 3.0, 0.7, 0.36, "cabinet")),
            "fridge": (_box(0.0, 0.0, 0.0, 0.8, 1.85, 0.7, "appliance"), _box(0.3, 0.9, 0.36, 0.04, 0.5, 0.04, "chrome")),
            "shelf": (_box(0.0, 0.0, 0.0, 1.2, 1.8, 0.35, "wood"), _box(0.0, 0.9, 0.18, 1.0, 0.25, 0.02, "jars")),
        },
        {"cabinet": ((0.85, 0.83, 0.78), (0.55, 0.65, 0.62), (0.78, 0.62, 0.45)),
         "worktop": ((0.35, 0.35, 0.37), (0.90, 0.90, 0.88)), "dark": ((0.12, 0.12, 0.13),),
         "chrome": ((0.80, 0.81, 0.82),), "appliance": ((0.90, 0.90, 0.90), (0.75, 0.76, 0.78)),
         "wood": ((0.58, 0.45, 0.32),), "jars": ((0.80, 0.50, 0.30),)},
        (
            Row("counter", "back", 2.4, 3.2, (1, 2)),
            Row("fridge", "right", 2.2, 1.0, (1, 1)),
            Row("shelf", "left", 2.3, 1.4, (1, 1)),
        ),
        _room(3.0, (Band("window", _WINDOW, 2.6, ("left", "front")), Band("door", _DOOR, 100.0, ("right",)),
                    Band("picture", _PICTURE, 3.0, ("back",))),
              wall=((0.94, 0.92, 0.86), (0.86, 0.90, 0.88)), height=2.8),
    ),
    "bedroom": Kit(
        "bedroom",
        ("bedroom", "dorm", "dormitory", "卧室", "睡房", "宿舍"),
        {
            "bed": (_box(0.0, 0.0, 0.0, 1.6, 0.45, 2.0, "bedframe"), _box(0.0, 0.45, 0.0, 1.5, 0.15, 1.9, "linen"),
                    _box(0.0, 0.6, -0.7, 1.2, 0.12, 0.35, "linen"), _box(0.0, 0.0, -1.0, 1.7, 1.1, 0.08, "bedframe"),
                    _box(0.0, 0.6, 0.35, 1.55, 0.05, 1.1, "blanket")),
            "nightstand": (_box(0.0, 0.0, 0.0, 0.5, 0.55, 0.4, "wood"), _cyl(0.0, 0.55, 0.0, 0.06, 0.25, "dark"),
                           _cyl(0.0, 0.8, 0.0, 0.3, 0.25, "lamp")),
            "wardrobe": (_box(0.0, 0.0, 0.0, 1.0, 2.1, 0.6, "wood"), _box(0.0, 0.1, 0.31, 0.02, 1.9, 0.02, "dark")),
        },
        {"bedframe": ((0.50, 0.36, 0.25), (0.30, 0.30, 0.33)), "linen": ((0.93, 0.93, 0.90),),
         "blanket": ((0.35, 0.45, 0.65), (0.70, 0.45, 0.45), (0.50, 0.60, 0.45)), "wood": ((0.58, 0.45, 0.32),),
         "dark": ((0.15, 0.15, 0.16),), "lamp": ((0.98, 0.90, 0.72),)},
        (
            Row("bed", "back", 1.6, 3.0, (1, 1)),
            Row("nightstand", "back", 0.8, 2.6, (2, 2)),
            Row("wardrobe", "left", 2.3, 1.2, (1, 1)),
        ),
        _room(3.0, (Band("window", _WINDOW, 2.6, ("left", "front")), Band("door", _DOOR, 100.0, ("right",)),
                    Band("picture", _PICTURE, 2.4, ("back",))),
              wall=((0.88, 0.84, 0.80), (0.80, 0.84, 0.90)), height=2.8),
    ),
    "living_room": Kit(
        "living_room",
        ("room", "living room", "sitting room", "apartment", "flat", "home", "house", "lounge", "hotel room",
         "房间", "客厅", "公寓", "家里", "家中", "酒店房间"),
        {
            "sofa": (_box(0.0, 0.0, 0.0, 2.1, 0.42, 0.9, "sofa"), _box(0.0, 0.0, -0.37, 2.1, 0.85, 0.18, "sofa"),
                     _box(-0.97, 0.0, 0.0, 0.18, 0.62, 0.9, "sofa"), _box(0.97, 0.0, 0.0, 0.18, 0.62, 0.9, "sofa"),
                     _box(0.0, 0.0, 1.0, 1.1, 0.42, 0.55, "wood")),
            "lamp": (_cyl(0.0, 0.0, 0.0, 0.05, 1.45, "dark"), _cyl(0.0, 1.4, 0.0, 0.42, 0.32, "shade")),
            "shelf": (_box(0.0, 0.0, 0.0, 1.2, 1.9, 0.35, "wood"), _box(0.0, 0.9, 0.18, 1.0, 0.25, 0.02, "books")),
            "tv": (_box(0.0, 0.0, 0.0, 1.6, 0.5, 0.4, "wood"), _box(0.0, 0.55, -0.05, 1.2, 0.7, 0.06, "dark")),
        },
        {
            "sofa": ((0.40, 0.45, 0.60), (0.55, 0.35, 0.32), (0.45, 0.52, 0.40)), "wood": ((0.58, 0.45, 0.32),),
            "dark": ((0.15, 0.15, 0.16),), "shade": ((0.95, 0.90, 0.75),), "books": ((0.70, 0.30, 0.25),),
        },
        (
            Row("sofa", "back", 1.9, 3.0, (1, 1)),
            Row("lamp", "back", 2.4, 3.4, (1, 1), extend=3.4),
            Row("shelf", "right", 1.8, 2.0, (1, 1)),
            Row("tv", "left", 2.0, 2.0, (1, 1)),
        ),
        _room(3.0, (Band("window", _WINDOW, 3.2, ("back", "front")), Band("door", _DOOR, 100.0, ("left",)),
                    Band("picture", _PICTURE, 2.6, ("right",))),
              wall=((0.86, 0.82, 0.74), (0.80, 0.84, 0.82)), height=2.8),
    ),
    "park": Kit(
        "park",
        ("park", "garden", "field", "meadow", "lawn", "playground", "公园", "花园", "草地", "草坪", "广场"),
        {
            "tree": _TREE,
            "bench": _BENCH,
            "bush": (_ball(0.0, 0.0, 0.0, 1.2, 0.8, "bush"),),
            "lamp_post": _LAMP_POST,
        },
        {
            "trunk": ((0.42, 0.30, 0.20),), "leaves": ((0.25, 0.55, 0.28), (0.20, 0.48, 0.24), (0.32, 0.58, 0.26)),
            "bench": ((0.55, 0.38, 0.24),), "iron": ((0.15, 0.15, 0.16),), "bush": ((0.22, 0.46, 0.22),),
            "pole": ((0.20, 0.22, 0.20),), "lamp": ((1.0, 0.93, 0.72),),
        },
        (
            Row("tree", "back", 3.5, 4.2, (3, 4), extend=6.0),
            Row("tree", "left", 3.0, 4.5, (1, 2)),
            Row("tree", "right", 3.0, 4.5, (1, 2)),
            Row("bench", "back", 1.4, 3.0, (1, 2)),
            Row("bush", "back", 2.4, 2.2, (2, 3), extend=3.0),
            Row("lamp_post", "right", 1.8, 5.0, (1, 1)),
        ),
        _open(6.0, (Band("tree", _RING_TREE, 4.5, fill=True), Band("tree", _RING_TREE, 4.5, inset=3.0, stagger=0.5,
                                                                     fill=True)),
              Horizon("hill", (5.0, 14.0)),
              trunk=((0.42, 0.30, 0.20),), leaves=((0.25, 0.55, 0.28), (0.20, 0.48, 0.24), (0.32, 0.58, 0.26)),
              hill=((0.36, 0.48, 0.36), (0.40, 0.50, 0.42))),
    ),
    "forest": Kit(
        "forest",
        ("forest", "woods", "woodland", "jungle", "森林", "树林", "丛林", "林间"),
        {
            "tree": (_cyl(0.0, 0.0, 0.0, 0.4, 4.0, "trunk"), _ball(0.0, 2.6, 0.0, 2.4, 5.0, "leaves")),
            "bush": (_ball(0.0, 0.0, 0.0, 1.2, 0.8, "bush"),),
            "log": (_box(0.0, 0.0, 0.0, 2.2, 0.4, 0.45, "trunk"),),
            "rock": (_ball(0.0, 0.0, 0.0, 1.0, 0.6, "rock"),),
        },
        {"trunk": ((0.36, 0.26, 0.18),), "leaves": ((0.16, 0.38, 0.20), (0.20, 0.42, 0.22), (0.14, 0.34, 0.22)),
         "bush": ((0.18, 0.40, 0.20),), "rock": ((0.50, 0.50, 0.48),)},
        (
            Row("tree", "back", 2.0, 3.0, (3, 4), extend=4.0),
            Row("tree", "left", 2.0, 3.0, (1, 2)),
            Row("tree", "right", 2.0, 3.0, (1, 2)),
            Row("tree", "front", 3.0, 3.5, (1, 2)),
            Row("bush", "back", 1.2, 2.0, (2, 3)),
            Row("log", "left", 1.2, 2.0, (1, 1)),
            Row("rock", "right", 1.4, 2.0, (1, 1)),
        ),
        _open(3.0, (Band("tree", _FOREST_TREE, 3.2, fill=True),
                    Band("tree", _FOREST_TREE, 3.2, inset=2.6, stagger=0.5, fill=True),
                    Band("tree", _FOREST_TREE, 3.2, inset=5.2, stagger=0.25, fill=True)),
              Horizon("treeline", (10.0, 18.0), 70.0),
              trunk=((0.36, 0.26, 0.18),), leaves=((0.16, 0.38, 0.20), (0.20, 0.42, 0.22), (0.14, 0.34, 0.22)),
              treeline=((0.14, 0.30, 0.18), (0.16, 0.33, 0.20))),
    ),
    "beach": Kit(
        "beach",
        ("beach", "seaside", "shore", "seashore", "coast", "海滩", "沙滩", "海边", "海岸"),
        {
            "umbrella": (_cyl(0.0, 0.0, 0.0, 0.05, 2.1, "pole"), _ball(0.0, 1.9, 0.0, 2.0, 0.5, "canvas")),
            "lounger": (_box(0.0, 0.0, 0.0, 0.65, 0.35, 1.8, "lounger"), _box(0.0, 0.35, -0.7, 0.65, 0.5, 0.12, "lounger")),
        },
        {"pole": ((0.85, 0.85, 0.82),), "canvas": ((0.90, 0.30, 0.25), (0.25, 0.50, 0.85), (0.95, 0.80, 0.25)),
         "lounger": ((0.92, 0.92, 0.90), (0.40, 0.60, 0.75))},
        (
            Row("umbrella", "left", 1.6, 3.0, (1, 2)),
            Row("umbrella", "right", 1.6, 3.0, (1, 2)),
            Row("lounger", "left", 2.6, 1.0, (1, 2)),
            Row("lounger", "right", 2.6, 1.0, (1, 2)),
        ),
        # the sea behind the action (where a master looks), palms and dunes on the other sides
        _open(4.0, (Band("sea", _SEA, 1000.0, ("back",)), Band("palm", _PALM, 5.0, ("front", "left", "right"), fill=True),
                    Band("dune", _DUNE, 7.0, ("front", "left", "right"), inset=3.0, fill=True)),
              Horizon("headland", (3.0, 12.0), 110.0),
              sea=((0.16, 0.42, 0.62), (0.18, 0.46, 0.64)), trunk=((0.50, 0.40, 0.28),),
              leaves=((0.25, 0.55, 0.28),), sand=((0.86, 0.78, 0.58),), headland=((0.40, 0.45, 0.40),)),
    ),
    "rooftop": Kit(
        "rooftop",
        ("rooftop", "roof", "roof terrace", "屋顶", "天台", "楼顶", "房顶"),
        {
            "ac_unit": (_box(0.0, 0.0, 0.0, 1.0, 0.9, 0.8, "metal"), _cyl(0.0, 0.9, 0.0, 0.6, 0.05, "dark")),
            "water_tank": (_box(-0.6, 0.0, -0.6, 0.1, 1.2, 0.1, "iron"), _box(0.6, 0.0, -0.6, 0.1, 1.2, 0.1, "iron"),
                           _box(-0.6, 0.0, 0.6, 0.1, 1.2, 0.1, "iron"), _box(0.6, 0.0, 0.6, 0.1, 1.2, 0.1, "iron"),
                           _cyl(0.0, 1.2, 0.0, 1.8, 2.0, "tank")),
            "vent": (_cyl(0.0, 0.0, 0.0, 0.35, 1.4, "metal"),),
        },
        {"metal": ((0.70, 0.71, 0.72),), "dark": ((0.15, 0.15, 0.16),), "iron": ((0.25, 0.25, 0.27),),
         "tank": ((0.55, 0.42, 0.30), (0.70, 0.70, 0.72))},
        (
            Row("ac_unit", "back", 1.6, 1.4, (2, 3)),
            Row("water_tank", "left", 2.4, 3.0, (1, 1)),
            Row("vent", "right", 1.6, 1.5, (1, 2)),
        ),
        _open(4.0, (Band("parapet", _PARAPET, 4.0, fill=True),), Horizon("skyline", (10.0, 55.0), 70.0),
              parapet=((0.62, 0.60, 0.58),), trim=((0.50, 0.50, 0.50),), **_CITY),
    ),
    "platform": Kit(
        "platform",
        ("platform", "station platform", "train station", "railway station", "subway", "metro", "subway station",
         "metro station", "站台", "月台", "地铁站", "火车站", "车站"),
        {
            "edge": (_box(0.0, 0.0, 0.0, 14.0, 0.02, 0.3, "stripe"),),
            "bench": _BENCH,
            "sign_post": (_cyl(0.0, 0.0, 0.0, 0.08, 2.6, "pole"), _box(0.0, 2.3, 0.0, 1.4, 0.4, 0.08, "sign")),
        },
        {"stripe": ((0.95, 0.80, 0.15),), "bench": ((0.55, 0.38, 0.24),), "iron": ((0.15, 0.15, 0.16),),
         "pole": ((0.25, 0.25, 0.27),), "sign": ((0.15, 0.35, 0.65),)},
        (
            Row("edge", "back", 1.2, 14.0, (1, 1)),
            Row("bench", "left", 1.4, 2.0, (1, 1)),
            Row("bench", "front", 1.6, 3.5, (1, 2)),
            Row("sign_post", "right", 1.6, 2.0, (1, 1)),
        ),
        # a train along the platform's edge, the station wall behind, columns holding the canopy
        _open(2.5, (Band("train", _TRAIN, 20.0, ("back",), fill=True),
                    Band("station wall", _STATION_WALL, 8.0, ("front",), fill=True),
                    Band("column", _COLUMN, 6.0, ("left", "right"), fill=True)),
              _SKYLINE, canopy=4.4,
              train=((0.75, 0.75, 0.78), (0.20, 0.45, 0.35)), glass=((0.30, 0.36, 0.42),), door=((0.60, 0.15, 0.12),),
              wall=((0.70, 0.68, 0.64),), poster=((0.85, 0.55, 0.25), (0.30, 0.55, 0.75)),
              sign=((0.15, 0.35, 0.65),), column=((0.55, 0.56, 0.58),), ceiling=((0.45, 0.46, 0.48),), **_CITY),
    ),
    "default": Kit(
        "default",
        (),
        {
            "block": (_box(0.0, 0.0, 0.0, 1.0, 1.0, 1.0, "block"),),
            "wide_block": (_box(0.0, 0.0, 0.0, 2.0, 1.6, 1.0, "block"),),
            "column": (_cyl(0.0, 0.0, 0.0, 0.6, 2.6, "block"),),
        },
        {"block": ((0.62, 0.62, 0.66), (0.58, 0.60, 0.64), (0.66, 0.64, 0.60))},
        (
            Row("block", "back", 2.0, 4.4, (2, 2), extend=2.0),
            Row("wide_block", "back", 4.6, 5.0, (1, 2)),
            Row("column", "right", 2.0, 3.0, (1, 1)),
        ),
        # a neutral stage: grey flats all round, distant grey hills
        _open(6.0, (Band("flat", _FLAT, 4.05, fill=True),), Horizon("hill", (6.0, 14.0)),
              flat=((0.70, 0.70, 0.72), (0.64, 0.65, 0.68)), brace=((0.45, 0.45, 0.47),), hill=((0.55, 0.56, 0.60),)),
    ),
}
# Kits tried in this order; the first whose words appear in the scene's name (else its
# description) is used: the more specific place first ("night market" before "street", "coffee
# shop" before "shop", "city park" is a park, "the kitchen of the flat" a kitchen).
KIT_ORDER: tuple[str, ...] = ("night_market", "car", "platform", "rooftop", "bar", "diner", "shop", "classroom",
                              "kitchen", "bedroom", "office", "living_room", "beach", "forest", "park", "alley",
                              "street")


def has_phrase(text: str, phrase: str) -> bool:
    """Whether ``phrase`` occurs in ``text`` as whole words (English) or as written (Chinese)."""
    if phrase.isascii():
        return re.search(rf"(?<![a-z]){re.escape(phrase)}(?![a-z])", text) is not None
    return phrase in text


@dataclass(frozen=True)
class KitChoice:
    """The kit a scene gets and why: ``given`` (scene.set), the ``word`` that picked it, or neither."""

    kit: Kit
    word: str | None = None  # the scene's word that chose the kit
    where: str | None = None  # "name" or "description": where that word stands
    given: bool = False  # the script named the kit (scene.set)

    def notice(self) -> str:
        """One line for the user: the kit chosen, why, and how to choose another."""
        others = ", ".join(k for k in KITS if k != self.kit.name)
        if self.given:
            why = "as scene.set names it"
        elif self.word is not None:
            why = f"from the word {self.word!r} in the scene's {self.where}"
        else:
            why = "no word in the scene's name or description names a place"
        return f"set: {self.kit.name} ({why}); set scene.set to build another: {others}"


def choose_kit(name: str, description: str = "", given: str | None = None) -> KitChoice:
    """The kit a scene gets: the one ``given`` (scene.set), else the first whose words the name, then the
    description holds, else the neutral default."""
    if given is not None:
        return KitChoice(KITS[given], given=True)
    for where, text in (("name", name.lower()), ("description", description.lower())):
        for key in KIT_ORDER:
            word = next((w for w in KITS[key].words if has_phrase(text, w)), None)
            if word is not None:
                return KitChoice(KITS[key], word, where)
    return KitChoice(KITS["default"])


def kit_for_scene(name: str, description: str = "") -> Kit:
    """The set kit the scene's words pick: its name first, then its description; else the neutral default."""
    return choose_kit(name, description).kit
