"""Canonical film vocabulary and the aliases people write (English abbreviations, 中文).

Every alias table maps a lower-cased, space/hyphen-normalised spelling to one canonical
value. Lookups never guess: an unknown word is an error that lists the canonical names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Mapping


class Framing(str, Enum):
    """Shot size, from tightest to widest (CameraBench-style canonical names)."""

    extreme_close_up = "extreme_close_up"
    close_up = "close_up"
    medium_close_up = "medium_close_up"
    medium = "medium"
    medium_full = "medium_full"
    full = "full"
    wide = "wide"
    extreme_wide = "extreme_wide"
    # Two-person shot types (not sizes): the planner stages both characters in them.
    over_the_shoulder = "over_the_shoulder"
    two_shot = "two_shot"
    # Shots placed by what the subject sees or holds (daotai.plan.viewpoint): through its eyes, or
    # a close detail of its hands or of the point the camera's aim names (a prop).
    pov = "pov"
    insert = "insert"


class Angle(str, Enum):
    """Vertical camera angle relative to the subject (dutch adds a roll)."""

    eye_level = "eye_level"
    high = "high"
    low = "low"
    birds_eye = "birds_eye"
    worms_eye = "worms_eye"
    dutch = "dutch"


class CameraType(str, Enum):
    """Camera move shorthand; it fills defaults that explicit fields override."""

    static = "static"
    pan = "pan"
    tilt = "tilt"
    roll = "roll"
    dolly = "dolly"
    truck = "truck"
    pedestal = "pedestal"
    crane = "crane"
    orbit = "orbit"
    zoom = "zoom"
    dolly_zoom = "dolly_zoom"
    handheld = "handheld"
    follow = "follow"
    steadicam = "steadicam"  # follows the subject as follow does, with a slow float (daotai.plan.steadicam)


class Easing(str, Enum):
    linear = "linear"
    ease_in = "ease_in"
    ease_out = "ease_out"
    ease_in_out = "ease_in_out"


class TimeOfDay(str, Enum):
    dawn = "dawn"
    morning = "morning"
    day = "day"
    afternoon = "afternoon"
    dusk = "dusk"
    night = "night"
    interior = "interior"


class TransitionKind(str, Enum):
    cut = "cut"
    crossfade = "crossfade"
    fade = "fade"
    # A wipe's name says where its edge travels: in a wipe_right the edge crosses the frame
    # from the left side to the right, uncovering the incoming shot behind it.
    wipe_left = "wipe_left"
    wipe_right = "wipe_right"
    wipe_up = "wipe_up"
    wipe_down = "wipe_down"


# Which way each wipe's edge travels across the frame (the direction in its name).
WIPE_DIRECTIONS: Mapping[str, str] = MappingProxyType(
    {"wipe_left": "left", "wipe_right": "right", "wipe_up": "up", "wipe_down": "down"}
)
# Transitions in which the incoming shot overlaps the end of the outgoing one (the sequence is
# that many frames shorter than its shots): the crossfade blends over the overlap, a wipe
# uncovers the incoming shot behind a moving edge. A fade overlaps nothing (it dips to black).
OVERLAPPING_TRANSITIONS: tuple[str, ...] = ("crossfade", *WIPE_DIRECTIONS)


class SetPieceKind(str, Enum):
    box = "box"
    cylinder = "cylinder"
    sphere = "sphere"


class SetKit(str, Enum):
    """A dressed set the previz builds all round the action (``scene.set``; daotai.plan.sets.KITS)."""

    office = "office"
    living_room = "living_room"
    kitchen = "kitchen"
    bedroom = "bedroom"
    diner = "diner"
    bar = "bar"
    classroom = "classroom"
    shop = "shop"
    car = "car"
    street = "street"
    alley = "alley"
    night_market = "night_market"
    park = "park"
    forest = "forest"
    beach = "beach"
    rooftop = "rooftop"
    platform = "platform"
    default = "default"


def normalise_word(text: str) -> str:
    """Lower-case, trim, and fold spaces/hyphens/apostrophes so 'Medium-Shot' == 'medium_shot'."""
    folded = text.strip().lower().replace("'", "").replace("’", "")
    for sep in (" ", "-", "."):
        folded = folded.replace(sep, "_")
    while "__" in folded:
        folded = folded.replace("__", "_")
    return folded


def _table(pairs: dict[str, list[str]]) -> Mapping[str, str]:
    table: dict[str, str] = {}
    for canonical, aliases in pairs.items():
        for spelling in [canonical, *aliases]:
            key = normalise_word(spelling)
            if key in table and table[key] != canonical:
                raise ValueError(f"alias {spelling!r} maps to both {table[key]} and {canonical}")
            table[key] = canonical
    return MappingProxyType(table)


FRAMING_ALIASES = _table(
    {
        "extreme_close_up": ["ECU", "XCU", "BCU", "VCU", "extreme_closeup", "big_close_up", "大特写", "极特写"],
        "close_up": ["CU", "closeup", "close_shot", "特写"],
        "medium_close_up": ["MCU", "bust", "bust_shot", "medium_closeup", "近景"],
        "medium": ["MS", "medium_shot", "mid_shot", "waist_shot", "中景"],
        "medium_full": [
            "MFS", "MLS", "medium_full_shot", "medium_long_shot", "cowboy", "cowboy_shot",
            "american_shot", "中全景",
        ],
        "full": ["FS", "full_shot", "full_body", "全景", "全身"],
        "wide": ["WS", "LS", "wide_shot", "long_shot", "establishing", "master", "master_shot", "远景", "主镜头"],
        "extreme_wide": ["EWS", "ELS", "XLS", "XWS", "extreme_long_shot", "extreme_wide_shot", "大远景", "极远景"],
        "over_the_shoulder": ["OTS", "OS", "over_shoulder", "over_the_shoulder_shot", "过肩", "过肩镜头", "过肩拍"],
        "two_shot": ["2S", "twoshot", "two_person_shot", "双人镜头", "双人", "两人镜头"],
        "pov": ["point_of_view", "point_of_view_shot", "pov_shot", "subjective", "subjective_shot", "主观镜头",
                "主观视角", "主观"],
        "insert": ["insert_shot", "detail", "detail_shot", "insert_close_up", "插入镜头", "插入", "细节镜头"],
    }
)

ANGLE_ALIASES = _table(
    {
        "eye_level": ["eye", "eye_level_shot", "level", "neutral", "平视", "平拍", "水平"],
        "high": ["high_angle", "down_angle", "俯拍", "俯视", "俯角"],
        "low": ["low_angle", "up_angle", "仰拍", "仰视", "仰角"],
        "birds_eye": ["birdseye", "bird_eye", "birds_eye_view", "overhead", "top_down", "top", "鸟瞰", "顶拍", "俯瞰"],
        "worms_eye": ["wormseye", "worm_eye", "worms_eye_view", "ground_level", "虫视", "极低角度"],
        "dutch": ["dutch_angle", "dutch_tilt", "canted", "oblique", "荷兰角", "斜角", "倾斜"],
    }
)

EASING_ALIASES = _table(
    {
        "linear": ["constant", "匀速", "线性"],
        "ease_in": ["easein", "accelerate", "缓入", "渐快"],
        "ease_out": ["easeout", "decelerate", "缓出", "渐慢"],
        "ease_in_out": ["easeinout", "smooth", "ease", "缓入缓出", "平滑"],
    }
)

TIME_OF_DAY_ALIASES = _table(
    {
        "dawn": ["sunrise", "daybreak", "黎明", "日出", "破晓"],
        "morning": ["早晨", "清晨", "上午", "早上"],
        "day": ["daytime", "noon", "midday", "白天", "中午", "正午"],
        "afternoon": ["下午", "午后"],
        "dusk": ["sunset", "evening", "golden_hour", "twilight", "黄昏", "傍晚", "日落"],
        "night": ["midnight", "夜晚", "夜", "晚上", "深夜"],
        "interior": ["indoor", "indoors", "inside", "室内", "内景"],
    }
)

TRANSITION_ALIASES = _table(
    {
        "cut": ["hard_cut", "straight_cut", "切", "硬切", "直切"],
        "crossfade": ["dissolve", "cross_dissolve", "mix", "叠化", "交叉淡化", "溶"],
        "fade": ["fade_to_black", "dip_to_black", "淡入淡出", "淡出", "渐隐"],
        # a plain wipe travels the way a page is read: left to right
        "wipe_right": ["wipe", "wipe_to_right", "划像", "划变", "右划像", "向右划像"],
        "wipe_left": ["wipe_to_left", "左划像", "向左划像"],
        "wipe_up": ["wipe_to_top", "上划像", "向上划像"],
        "wipe_down": ["wipe_to_bottom", "下划像", "向下划像"],
    }
)

SET_KIT_ALIASES = _table(
    {
        "office": ["办公室", "会议室"],
        "living_room": ["room", "living", "lounge", "home", "apartment", "客厅", "房间", "家"],
        "kitchen": ["厨房"],
        "bedroom": ["卧室", "睡房"],
        "diner": ["restaurant", "cafe", "café", "coffee shop", "canteen", "餐厅", "餐馆", "饭馆", "咖啡馆", "食堂"],
        "bar": ["pub", "tavern", "酒吧", "酒馆"],
        "classroom": ["school", "教室", "课堂"],
        "shop": ["store", "supermarket", "商店", "超市", "便利店"],
        "car": ["car interior", "in car", "车里", "车内", "汽车"],
        "street": ["road", "街道", "街", "马路"],
        "alley": ["lane", "小巷", "巷子", "胡同"],
        "night_market": ["market", "夜市", "市场", "集市"],
        "park": ["garden", "公园", "花园"],
        "forest": ["woods", "森林", "树林"],
        "beach": ["seaside", "海滩", "沙滩", "海边"],
        "rooftop": ["roof", "屋顶", "天台", "楼顶"],
        "platform": ["station", "station platform", "站台", "月台"],
        "default": ["stage", "neutral", "舞台"],
    }
)

SET_PIECE_ALIASES = _table(
    {
        "box": ["cube", "block", "crate", "方块", "箱"],
        "cylinder": ["column", "pillar", "pole", "圆柱", "柱"],
        "sphere": ["ball", "orb", "球"],
    }
)

class PropType(str, Enum):
    """Furniture and props the planner places and the previz draws as proxies (scene.props)."""

    table = "table"
    desk = "desk"
    counter = "counter"
    bar_counter = "bar_counter"
    chair = "chair"
    stool = "stool"
    sofa = "sofa"
    bench = "bench"
    bed = "bed"
    door = "door"
    window = "window"
    lamp = "lamp"
    car = "car"


# The nouns that name a prop, in a script's `scene.props[].type` and in the scene's and the
# actions' words alike (English singular and plural as whole words, Chinese as written).
PROP_ALIASES = _table(
    {
        "table": ["tables", "kitchen_table", "dining_table", "coffee_table", "桌子", "桌", "餐桌", "饭桌", "茶几"],
        "desk": ["desks", "writing_desk", "书桌", "办公桌", "写字台"],
        "counter": ["counters", "worktop", "kitchen_counter", "柜台", "台面", "灶台", "收银台"],
        "bar_counter": ["bar", "bar_top", "吧台"],
        "chair": ["chairs", "armchair", "椅子", "椅", "扶手椅"],
        "stool": ["stools", "bar_stool", "凳子", "凳", "板凳", "高脚凳"],
        "sofa": ["sofas", "couch", "settee", "沙发"],
        "bench": ["benches", "长椅", "长凳"],
        "bed": ["beds", "床", "床铺"],
        "door": ["doors", "doorway", "门", "门口", "房门"],
        "window": ["windows", "窗", "窗户", "窗口", "窗边", "窗前"],
        "lamp": ["lamps", "floor_lamp", "table_lamp", "灯", "台灯", "落地灯"],
        "car": ["cars", "auto", "automobile", "vehicle", "汽车", "车", "轿车"],
    }
)
# Props a person sits on; a character who sits with none of these near gets a chair.
SEATING_PROPS: tuple[str, ...] = ("chair", "stool", "sofa", "bench", "bed")


# A camera alias names a type and may preset its direction ("推" is a dolly *in*, "拉" a
# dolly *out*). The amount stays the type's default; explicit fields in the script win.
CameraPreset = tuple[str, Mapping[str, object]]


@dataclass(frozen=True)
class MoveAmount:
    """The part of a camera spec that says how far a move goes (its defining component).

    ``field`` is ``motion`` / ``rotate`` (with ``axis``), ``orbit``, ``fov_end`` (read as the change
    ``fov_end - fov``) or ``shake``; ``unit`` is what a phrase's number is in ("angle": degrees,
    "distance": metres), or None where a phrase cannot give the amount.
    """

    field: str
    axis: int | None = None
    unit: str | None = None


@dataclass(frozen=True)
class CameraMove:
    """Every fact about one camera move, in one row: a new move is a row here plus its tests.

    The schema checks directions and amounts with it, phrases ("pan left 20°") set its amount,
    the planner fills its defaults and signs, prompts and the contact sheet word it.
    """

    type: str  # a CameraType value
    # Amounts when the script only names the move ("motion", "rotate", "orbit", "shake"); amounts
    # that depend on the subject's distance (dolly, crane, truck) are filled by the planner.
    defaults: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))
    amount: MoveAmount | None = None  # None: the move has no size of its own (static, follow)
    # Which directions the move understands and the sign each gives its amount (empty: none).
    signs: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    # Words for a negative and a positive amount (None: the directions of ``signs``, negative first).
    ways: tuple[str, str] | None = None
    # The prompt's phrase for a negative and a positive amount; {speed} is slowly/steadily/quickly,
    # {toward} and {around} name the subject. A phrase starting "the camera " joins the others.
    prompt: tuple[str, str] | None = None
    speed: tuple[float, float] | None = None  # amount per second under which it is slow, over which fast
    lead: str | None = None  # a phrase of the move itself, before any amount's (follow, steadicam)
    label: str = ""  # the contact sheet's words: {way}, {amount}, {fov}, {fov_end}, {shake} (default: the type)
    zooms: bool = False  # its lens change belongs to the move (a dolly zoom): no zoom phrase of its own
    # It holds the subject's size (a dolly zoom) or goes where the subject goes (follow, steadicam):
    # the planner never lands it on a framing as it does a push.
    holds_subject: bool = False
    # spelling → the fields it presets
    aliases: Mapping[str, Mapping[str, object]] = field(default_factory=lambda: MappingProxyType({}))

    def way(self, value: float) -> str:
        """The word for an amount's sense: 'left' / 'right', 'in' / 'out' …; a zero amount reads negative."""
        if self.ways is not None:
            negative, positive = self.ways
        else:
            negative = next(d for d, sign in self.signs.items() if sign < 0)
            positive = next(d for d, sign in self.signs.items() if sign > 0)
        return positive if value > 0 else negative


def _move(type_: str, *, aliases: dict[str, dict[str, object]] | None = None, defaults: dict | None = None,
          signs: dict[str, int] | None = None, **facts: object) -> CameraMove:
    frozen = {k: MappingProxyType(dict(v)) for k, v in (aliases or {}).items()}
    return CameraMove(type_, MappingProxyType(dict(defaults or {})), signs=MappingProxyType(dict(signs or {})),
                      aliases=MappingProxyType(frozen), **facts)  # type: ignore[arg-type]


_LR = {"left": -1, "right": 1}
_UD = {"up": 1, "down": -1}
_IO = {"in": -1, "out": 1}
_DOLLY_ZOOM = "the camera {speed} performs a dolly zoom (vertigo effect), "

# One row per camera move (CameraType), in the type's order.
CAMERA_MOVES: Mapping[str, CameraMove] = MappingProxyType({row.type: row for row in (
    _move("static", label="static", aliases={
        "fixed": {}, "locked": {}, "locked_off": {}, "still": {}, "固定": {}, "固定镜头": {}, "定": {}}),
    _move("pan", defaults={"rotate": (30.0, 0.0, 0.0)}, amount=MoveAmount("rotate", 0, "angle"), signs=_LR,
          prompt=("the camera {speed} pans left", "the camera {speed} pans right"), speed=(8, 30), label="pan {way}",
          aliases={"pan_right": {"direction": "right"}, "pan_left": {"direction": "left"}, "摇": {}, "横摇": {},
                   "左摇": {"direction": "left"}, "右摇": {"direction": "right"},
                   "pan_follow": {"follow": True}, "follow_pan": {"follow": True}, "panning_follow": {"follow": True},
                   "摇跟": {"follow": True}, "跟摇": {"follow": True}}),
    _move("tilt", defaults={"rotate": (0.0, 15.0, 0.0)}, amount=MoveAmount("rotate", 1, "angle"), signs=_UD,
          prompt=("the camera {speed} tilts down", "the camera {speed} tilts up"), speed=(5, 20), label="tilt {way}",
          aliases={"tilt_up": {"direction": "up"}, "tilt_down": {"direction": "down"}, "竖摇": {},
                   "上摇": {"direction": "up"}, "下摇": {"direction": "down"}}),
    _move("roll", defaults={"rotate": (0.0, 0.0, 15.0)}, amount=MoveAmount("rotate", 2, "angle"), signs=_LR,
          ways=("counter-clockwise", "clockwise"),
          prompt=("the camera rolls counter-clockwise", "the camera rolls clockwise"), label="roll {way}",
          aliases={"dutch_roll": {}, "旋转": {}, "横滚": {}}),
    # A push-in covers a third of the way to the subject (the planner's rule)
    _move("dolly", amount=MoveAmount("motion", 2, "distance"), signs=_IO,
          prompt=("the camera {speed} dollies in{toward}", "the camera {speed} pulls back"), speed=(0.3, 1.0),
          label="dolly {way}",
          aliases={"push_in": {"direction": "in"}, "dolly_in": {"direction": "in"}, "pull_out": {"direction": "out"},
                   "pull_back": {"direction": "out"}, "dolly_out": {"direction": "out"},
                   "推": {"direction": "in"}, "推进": {"direction": "in"}, "推镜头": {"direction": "in"},
                   "拉": {"direction": "out"}, "拉远": {"direction": "out"}, "拉镜头": {"direction": "out"}}),
    _move("truck", defaults={"motion": (1.0, 0.0, 0.0)}, amount=MoveAmount("motion", 0, "distance"), signs=_LR,
          prompt=("the camera {speed} trucks left", "the camera {speed} trucks right"), speed=(0.3, 1.2),
          label="truck {way}",
          aliases={"track": {}, "tracking": {}, "slide": {}, "truck_right": {"direction": "right"},
                   "truck_left": {"direction": "left"}, "移": {}, "横移": {}, "移镜头": {},
                   "左移": {"direction": "left"}, "右移": {"direction": "right"}}),
    _move("pedestal", defaults={"motion": (0.0, 0.5, 0.0)}, amount=MoveAmount("motion", 1, "distance"), signs=_UD,
          prompt=("the camera {speed} lowers", "the camera {speed} rises"), speed=(0.3, 1.0),
          label="pedestal {way}",
          aliases={"pedestal_up": {"direction": "up"}, "pedestal_down": {"direction": "down"}}),
    # its tilt follows from the rise (the planner's resolve_move)
    _move("crane", defaults={"motion": (0.0, 1.5, 0.0)}, amount=MoveAmount("motion", 1, "distance"), signs=_UD,
          prompt=("the camera {speed} cranes down", "the camera {speed} cranes up"), speed=(0.3, 1.0),
          label="crane {way}",
          aliases={"boom": {}, "jib": {}, "crane_up": {"direction": "up"}, "crane_down": {"direction": "down"},
                   "升降": {}, "升": {"direction": "up"}, "降": {"direction": "down"},
                   "上升": {"direction": "up"}, "下降": {"direction": "down"}}),
    _move("orbit", defaults={"orbit": 45.0}, amount=MoveAmount("orbit", None, "angle"), signs=_LR,
          prompt=("the camera {speed} orbits left{around}", "the camera {speed} orbits right{around}"),
          speed=(10, 40), label="orbit {amount:+g}°",
          aliases={"arc": {}, "circle": {}, "orbit_left": {"direction": "left"}, "orbit_right": {"direction": "right"},
                   "环绕": {}, "环拍": {}, "绕拍": {}}),
    _move("zoom", amount=MoveAmount("fov_end"), signs=_IO,
          prompt=("the lens {speed} zooms in", "the lens {speed} zooms out"), speed=(5, 20),
          label="zoom {way} {fov:g}→{fov_end:g}",
          aliases={"zoom_in": {"direction": "in"}, "zoom_out": {"direction": "out"}, "变焦": {},
                   "拉近": {"direction": "in"}}),
    _move("dolly_zoom", amount=MoveAmount("motion", 2, "distance"), signs=_IO, zooms=True, holds_subject=True,
          prompt=(_DOLLY_ZOOM + "dollying in", _DOLLY_ZOOM + "dollying out"), speed=(0.3, 1.0),
          label="dolly zoom {way}",
          aliases={"vertigo": {}, "zolly": {}, "希区柯克变焦": {}, "滑动变焦": {}}),
    _move("handheld", defaults={"shake": 1.0}, amount=MoveAmount("shake"),
          prompt=("handheld camera with natural shake", "handheld camera with natural shake"),
          label="handheld ±{shake:g}°", aliases={"shaky": {}, "hand_held": {}, "手持": {}, "晃动": {}}),
    _move("follow", lead="the camera follows the subject, tracking its movement", label="follow", holds_subject=True,
          aliases={"follow_shot": {}, "跟": {}, "跟拍": {}, "跟随": {}}),
    # follows the subject as follow does, with a slow float drawn on top (daotai.plan.steadicam)
    _move("steadicam", lead="a steadicam glides after the subject, floating gently", label="steadicam",
          holds_subject=True,
          aliases={"steady_cam": {}, "stabilizer": {}, "stabiliser": {}, "gimbal": {}, "斯坦尼康": {},
                   "斯坦尼康跟拍": {}, "稳定器": {}}),
)})


def _camera_table() -> Mapping[str, CameraPreset]:
    """Every spelling of a move (its name and its aliases) → (type, the fields it presets)."""
    table: dict[str, CameraPreset] = {}
    for row in CAMERA_MOVES.values():
        table[normalise_word(row.type)] = (row.type, MappingProxyType({}))
    for row in CAMERA_MOVES.values():
        for spelling, preset in row.aliases.items():
            key = normalise_word(spelling)
            if key in table and table[key][0] != row.type:
                raise ValueError(f"camera alias {spelling!r} names both {table[key][0]} and {row.type}")
            table[key] = (row.type, preset)
    return MappingProxyType(table)


CAMERA_ALIASES: Mapping[str, CameraPreset] = _camera_table()


class Direction(str, Enum):
    """Which way a move goes when its amount is left to the type's default."""

    left = "left"
    right = "right"
    up = "up"
    down = "down"
    in_ = "in"
    out = "out"


# Which directions each move understands, and the sign each gives its defining component.
DIRECTION_SIGNS: Mapping[str, Mapping[str, int]] = MappingProxyType(
    {row.type: row.signs for row in CAMERA_MOVES.values() if row.signs}
)

DIRECTION_ALIASES = _table(
    {"left": ["左"], "right": ["右"], "up": ["上"], "down": ["下"], "in": ["in_", "forward", "进", "推"], "out": ["back", "backward", "出", "拉"]}
)


class CameraSide(str, Enum):
    """Where the camera stands around its subject, seen from the subject (its own left and right)."""

    front = "front"
    left = "left"
    right = "right"
    back = "back"


# Degrees around the subject from its front, positive toward the subject's own left (about +y).
CAMERA_SIDE_DEG: Mapping[str, float] = MappingProxyType({"front": 0.0, "left": 90.0, "right": -90.0, "back": 180.0})

CAMERA_SIDE_ALIASES = _table(
    {"front": ["前", "前面", "正面", "frontal"], "left": ["左", "左边", "左侧"], "right": ["右", "右边", "右侧"],
     "back": ["behind", "rear", "后", "后面", "背面", "背后"]}
)


class Sensor(str, Enum):
    """Camera sensor (film gate) a focal length is read on; its width sets the horizontal view."""

    super35 = "super35"
    full_frame = "full_frame"
    aps_c = "aps_c"
    micro_four_thirds = "micro_four_thirds"
    super16 = "super16"
    large_format = "large_format"


# Sensor widths in millimetres (Super 35: 24.89 mm; large format: a 65 mm camera's 54.12 mm gate).
SENSOR_WIDTH_MM: Mapping[str, float] = MappingProxyType(
    {"super35": 24.89, "full_frame": 36.0, "aps_c": 23.6, "micro_four_thirds": 17.3, "super16": 12.52,
     "large_format": 54.12}
)

SENSOR_ALIASES = _table(
    {"super35": ["s35", "super_35", "super35mm", "35mm"], "full_frame": ["ff", "fullframe", "vista_vision", "全画幅"],
     "aps_c": ["apsc", "aps", "半画幅"], "micro_four_thirds": ["m43", "mft", "micro_4/3", "4/3"],
     "super16": ["s16", "super_16", "16mm"], "large_format": ["lf", "65mm", "alexa_65", "大画幅"]}
)


class Pose(str, Enum):
    """What a character's body does in a shot (walking is set by blocking; run by a fast walk or asked)."""

    stand = "stand"
    walk = "walk"
    run = "run"
    sit = "sit"
    talk = "talk"
    point = "point"
    lean = "lean"
    lie = "lie"
    kneel = "kneel"
    hold = "hold"


POSE_ALIASES = _table(
    {"stand": ["standing", "stands", "站", "站着", "站立"], "walk": ["walking", "walks", "走", "走路", "步行"],
     "run": ["running", "runs", "sprint", "跑", "奔跑", "跑步"], "sit": ["sitting", "sits", "seated", "坐", "坐着", "坐下"],
     "talk": ["talking", "talks", "speak", "speaking", "说话", "讲话", "交谈"],
     "point": ["pointing", "points", "指", "指着"],
     "lean": ["leaning", "leans", "靠", "靠着", "倚", "倚着"], "lie": ["lying", "lies", "lie_down", "躺", "躺着", "卧"],
     "kneel": ["kneeling", "kneels", "跪", "跪着"], "hold": ["holding", "holds", "拿", "拿着", "握着"]}
)

# Verbs in a shot's `action` that choose the subject's pose, English as whole words, Chinese as
# written; tried in this order (a runner who talks runs). "look"/"turn" words aim the head or
# turn the body toward the character named after them (else a look holds, a turn is half a turn).
ACTION_POSE_WORDS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "run": ("run", "runs", "running", "ran", "sprint", "sprints", "sprinting", "dash", "dashes", "chase",
                "chases", "chasing", "flee", "flees", "races", "跑", "奔", "冲", "追", "逃"),
        "sit": ("sit", "sits", "sitting", "seated", "sat", "坐"),
        "point": ("point", "points", "pointing", "指"),
        "talk": ("talk", "talks", "talking", "say", "says", "saying", "speak", "speaks", "speaking", "tell", "tells",
                 "chat", "chats", "argue", "argues", "arguing", "explain", "explains", "asks", "answers", "replies",
                 "whispers", "shouts", "说", "讲", "聊", "谈", "问", "答", "喊", "吵", "解释", "告诉"),
    }
)
LOOK_WORDS: tuple[str, ...] = ("look", "looks", "looking", "watch", "watches", "watching", "glance", "glances",
                               "stare", "stares", "staring", "gaze", "gazes", "看", "望", "盯", "瞧", "注视")
# Changes of pose within a shot: into a seat from standing, or up out of it.
SIT_DOWN_WORDS: tuple[str, ...] = ("sits down", "sit down", "sitting down", "takes a seat", "坐下", "落座")
STAND_UP_WORDS: tuple[str, ...] = ("stands up", "stand up", "standing up", "gets up", "get up", "rises from", "站起",
                                   "起身")
# Held poses of the body besides sitting, English as whole words or phrases, Chinese as written.
# "lie" needs a word of where or how ("lies on", "lies down"), so "she lies to him" is no pose;
# 靠 only as 靠着/靠在 (靠近 is "comes near"), 卧 only as 卧在/卧着/仰卧/侧卧 (卧室 is a bedroom).
HELD_POSE_WORDS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "lean": ("lean", "leans", "leaning", "leaned", "leant", "lean on", "leans on", "leaning on", "leans against",
                 "leaning against", "靠着", "靠在", "倚着", "倚在", "斜靠", "倚"),
        "lie": ("lies on", "lie on", "lying on", "lay on", "lies in", "lie in", "lying in", "lies down", "lie down",
                "lying down", "lay down", "lies back", "lying back", "lies flat", "lying flat", "lies across",
                "lying across", "stretches out on", "躺", "卧在", "卧着", "仰卧", "侧卧", "睡在"),
        "kneel": ("kneel", "kneels", "kneeling", "knelt", "kneeled", "on his knees", "on her knees", "on their knees",
                  "on one knee", "跪"),
    }
)
# Words that put something in a character's hand; the thing held is the first HAND_PROPS word after
# the verb in the sentence (no such word: no held pose, so "holds his gaze" or "hold on" are none).
HOLD_WORDS: tuple[str, ...] = ("hold", "holds", "holding", "held", "grips", "gripping", "clutches", "clutching",
                               "carries", "carrying", "拿着", "握着", "端着", "捧着", "举着", "拿", "握")
# Words that empty the hand: the held thing is put down.
RELEASE_WORDS: tuple[str, ...] = ("puts down", "put down", "sets down", "set down", "puts away", "drops", "lets go",
                                  "hands over", "放下", "放回", "扔掉", "递给", "交给")
# Things held in the hand (drawn at the figure's hand), with the words that name them.
HAND_PROPS = _table(
    {
        "cup": ["cups", "mug", "mugs", "coffee", "tea", "杯", "杯子", "茶杯", "咖啡", "茶"],
        "glass": ["wine_glass", "wine_glasses", "wine", "drink", "drinks", "酒杯", "玻璃杯", "酒"],
        "phone": ["phones", "cellphone", "smartphone", "mobile", "手机", "电话"],
        "book": ["books", "notebook", "letter", "note", "paper", "papers", "document", "file", "书", "本子", "信",
                 "纸", "文件"],
        "bag": ["bags", "briefcase", "suitcase", "purse", "包", "袋子", "箱子", "公文包"],
        "bottle": ["bottles", "瓶", "瓶子"],
        "umbrella": ["umbrellas", "伞", "雨伞"],
        "flowers": ["flower", "bouquet", "花", "花束"],
        "knife": ["knives", "刀"],
        "gun": ["pistol", "revolver", "枪", "手枪"],
        "object": ["something", "东西"],
    }
)
TURN_WORDS: tuple[str, ...] = ("turn", "turns", "turning", "turned", "spin", "spins", "转身", "回头", "转向", "转过")


# Field names that may also be written another way (the schema accepts either, never both).
KEY_ALIASES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {"dialogue": ("对白", "台词"), "sound": ("音效",), "soundtrack": ("配乐", "音乐")}
)


def canonical_names(enum: type[Enum]) -> str:
    """Comma-separated canonical names of an enum, for error messages."""
    return ", ".join(member.value for member in enum)  # type: ignore[attr-defined]


def lookup(table: Mapping[str, str], text: str) -> str | None:
    """Canonical value for an alias, or None when the word is unknown."""
    return table.get(normalise_word(text))


# Colour words people write in `appearance` ("blue shirt", "红色外套"), as display RGB in 0..1.
# English words are matched as whole words, Chinese ones as written; a modifier right before a
# colour ("dark blue", "浅蓝") lightens or darkens it. Values are chosen to read as the named
# colour under the previz's lighting, not as colour-science references.
COLOUR_WORDS: Mapping[str, tuple[float, float, float]] = MappingProxyType(
    {
        "red": (0.80, 0.16, 0.14), "crimson": (0.72, 0.08, 0.16), "scarlet": (0.88, 0.16, 0.10),
        "maroon": (0.45, 0.08, 0.10), "burgundy": (0.47, 0.09, 0.16), "wine": (0.45, 0.10, 0.18),
        "pink": (0.93, 0.55, 0.66), "orange": (0.93, 0.47, 0.13), "yellow": (0.95, 0.80, 0.18),
        "gold": (0.85, 0.66, 0.22), "golden": (0.85, 0.66, 0.22), "beige": (0.83, 0.75, 0.60),
        "khaki": (0.70, 0.64, 0.45), "camel": (0.70, 0.53, 0.33), "tan": (0.72, 0.56, 0.38),
        "brown": (0.45, 0.29, 0.17), "green": (0.20, 0.58, 0.27), "olive": (0.42, 0.45, 0.20),
        "teal": (0.10, 0.50, 0.50), "turquoise": (0.20, 0.72, 0.70), "blue": (0.18, 0.36, 0.78),
        "navy": (0.11, 0.15, 0.35), "denim": (0.24, 0.34, 0.52), "purple": (0.48, 0.25, 0.62),
        "violet": (0.55, 0.33, 0.75), "lavender": (0.70, 0.62, 0.86), "white": (0.92, 0.92, 0.90),
        "cream": (0.93, 0.89, 0.78), "ivory": (0.93, 0.91, 0.82), "grey": (0.52, 0.52, 0.54),
        "gray": (0.52, 0.52, 0.54), "silver": (0.72, 0.73, 0.76), "charcoal": (0.22, 0.23, 0.25),
        "black": (0.09, 0.09, 0.10), "blonde": (0.86, 0.72, 0.42), "blond": (0.86, 0.72, 0.42),
        "红": (0.80, 0.16, 0.14), "红色": (0.80, 0.16, 0.14), "大红": (0.85, 0.12, 0.10),
        "酒红": (0.45, 0.10, 0.18), "粉": (0.93, 0.55, 0.66), "粉色": (0.93, 0.55, 0.66),
        "粉红": (0.93, 0.55, 0.66), "粉红色": (0.93, 0.55, 0.66), "橙": (0.93, 0.47, 0.13),
        "橙色": (0.93, 0.47, 0.13), "橘色": (0.93, 0.47, 0.13), "黄": (0.95, 0.80, 0.18),
        "黄色": (0.95, 0.80, 0.18), "金": (0.85, 0.66, 0.22), "金色": (0.85, 0.66, 0.22),
        "米色": (0.83, 0.75, 0.60), "卡其": (0.70, 0.64, 0.45), "卡其色": (0.70, 0.64, 0.45),
        "棕": (0.45, 0.29, 0.17), "棕色": (0.45, 0.29, 0.17), "褐色": (0.45, 0.29, 0.17),
        "咖啡色": (0.40, 0.27, 0.18), "绿": (0.20, 0.58, 0.27), "绿色": (0.20, 0.58, 0.27),
        "墨绿": (0.10, 0.30, 0.20), "军绿": (0.33, 0.38, 0.22), "青": (0.10, 0.50, 0.50),
        "青色": (0.10, 0.50, 0.50), "蓝": (0.18, 0.36, 0.78), "蓝色": (0.18, 0.36, 0.78),
        "藏青": (0.11, 0.15, 0.35), "藏蓝": (0.11, 0.15, 0.35), "海军蓝": (0.11, 0.15, 0.35),
        "天蓝": (0.45, 0.68, 0.90), "天蓝色": (0.45, 0.68, 0.90), "紫": (0.48, 0.25, 0.62),
        "紫色": (0.48, 0.25, 0.62), "白": (0.92, 0.92, 0.90), "白色": (0.92, 0.92, 0.90),
        "灰": (0.52, 0.52, 0.54), "灰色": (0.52, 0.52, 0.54), "银": (0.72, 0.73, 0.76),
        "银色": (0.72, 0.73, 0.76), "黑": (0.09, 0.09, 0.10), "黑色": (0.09, 0.09, 0.10),
    }
)

# Words right before a colour that shift it: toward white ("light") or toward black ("dark").
COLOUR_MODIFIERS: Mapping[str, str] = MappingProxyType(
    {
        "light": "light", "pale": "light", "pastel": "light", "soft": "light",
        "dark": "dark", "deep": "dark", "bright": "bright", "vivid": "bright",
        "浅": "light", "淡": "light", "深": "dark", "暗": "dark", "亮": "bright",
    }
)
