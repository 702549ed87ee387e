"""Unit primitives and the figure rig (a low-poly mannequin), as plain numpy arrays.

Every primitive is a non-indexed triangle list of interleaved (position, normal) float32
vertices with counter-clockwise outward winding, so one model matrix per instance (scale,
rotate, translate) places it anywhere. The generic ones fit the cube [-0.5, 0.5]^3; the two
torso meshes ("chest", "hips") are lofted in the figure's own height units. Figures are built
in units of their height and scaled uniformly, so proportions follow ``height_m``.

The mannequin: an egg-shaped head with two eyes, a nose and a mouth on the face and hair over
the crown and back (so which way it looks reads from any side, at any size where a face is
more than a few pixels), neck, lofted chest and hips, shoulders, upper and lower arms with
elbows, block hands, thighs and shins with knees, block feet. About 2,300 triangles; the old
cylinder-and-ball proxy had about 2,750. Parts are coloured by role (top, bottom, shoes, skin,
hair …) from the figure's ``Look``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import numpy as np

from daotai.render.previz.scene import DEFAULT_TROUSERS, Figure, Look, SetPiece

PRIMITIVES: tuple[str, ...] = (
    "box", "cylinder", "frustum", "sphere", "ball", "cone", "limb", "joint", "head", "hem", "chest", "hips", "rod",
)


def _orient(tris: np.ndarray, normals: np.ndarray) -> np.ndarray:
    """Interleave triangles with normals, flipping any triangle wound against its normals."""
    # tris, normals: (T, 3, 3) float64 -> (T * 3, 6) float32
    face = np.cross(tris[:, 1] - tris[:, 0], tris[:, 2] - tris[:, 0])
    flip = np.einsum("ij,ij->i", face, normals.sum(axis=1)) < 0.0
    tris = tris.copy()
    normals = normals.copy()
    tris[flip] = tris[flip][:, ::-1]
    normals[flip] = normals[flip][:, ::-1]
    return np.concatenate([tris, normals], axis=2).reshape(-1, 6).astype(np.float32)


def box_mesh() -> np.ndarray:
    """Unit cube centred on the origin with flat face normals: (36, 6) float32."""
    tris, norms = [], []
    for axis in range(3):
        for sign in (-1.0, 1.0):
            n = np.zeros(3)
            n[axis] = sign
            u = np.zeros(3)
            u[(axis + 1) % 3] = 0.5
            v = np.zeros(3)
            v[(axis + 2) % 3] = 0.5
            c = n * 0.5
            quad = [c - u - v, c + u - v, c + u + v, c - u + v]
            for a, b, d in ((0, 1, 2), (0, 2, 3)):
                tris.append([quad[a], quad[b], quad[d]])
                norms.append([n, n, n])
    return _orient(np.array(tris), np.array(norms))


def frustum_mesh(segments: int = 24, bottom_radius: float = 0.5, top_radius: float = 0.5) -> np.ndarray:
    """Capped cylinder (or cone frustum) along y in [-0.5, 0.5]: (T * 3, 6) float32."""
    a = np.linspace(0.0, 2.0 * math.pi, segments + 1)
    ca, sa = np.cos(a), np.sin(a)
    r0, r1 = bottom_radius, top_radius
    slope = (r0 - r1) / 1.0  # radial change per unit height sets the side normals' y tilt
    side_n = np.stack([ca, np.full_like(ca, slope), sa], axis=1)
    side_n /= np.linalg.norm(side_n, axis=1, keepdims=True)
    lo = np.stack([r0 * ca, np.full_like(ca, -0.5), r0 * sa], axis=1)
    hi = np.stack([r1 * ca, np.full_like(ca, 0.5), r1 * sa], axis=1)
    tris, norms = [], []
    up, down = np.array([0.0, 1.0, 0.0]), np.array([0.0, -1.0, 0.0])
    for i in range(segments):
        j = i + 1
        tris += [[lo[i], hi[i], hi[j]], [lo[i], hi[j], lo[j]]]
        norms += [[side_n[i], side_n[i], side_n[j]], [side_n[i], side_n[j], side_n[j]]]
        if r1 > 0.0:
            tris.append([np.array([0.0, 0.5, 0.0]), hi[j], hi[i]])
            norms.append([up, up, up])
        if r0 > 0.0:
            tris.append([np.array([0.0, -0.5, 0.0]), lo[i], lo[j]])
            norms.append([down, down, down])
    return _orient(np.array(tris), np.array(norms))


def cone_mesh(segments: int = 16) -> np.ndarray:
    """Cone along y: base disc radius 0.5 at y = -0.5, apex at y = +0.5: (T * 3, 6) float32."""
    a = np.linspace(0.0, 2.0 * math.pi, segments + 1)
    ca, sa = np.cos(a), np.sin(a)
    side_n = np.stack([ca, np.full_like(ca, 0.5), sa], axis=1)
    side_n /= np.linalg.norm(side_n, axis=1, keepdims=True)
    base = np.stack([0.5 * ca, np.full_like(ca, -0.5), 0.5 * sa], axis=1)
    apex = np.array([0.0, 0.5, 0.0])
    down = np.array([0.0, -1.0, 0.0])
    tris, norms = [], []
    for i in range(segments):
        j = i + 1
        mid = side_n[i] + side_n[j]
        tris.append([base[i], apex, base[j]])
        norms.append([side_n[i], mid / np.linalg.norm(mid), side_n[j]])
        tris.append([np.array([0.0, -0.5, 0.0]), base[j], base[i]])
        norms.append([down, down, down])
    return _orient(np.array(tris), np.array(norms))


def sphere_mesh(rings: int = 16, segments: int = 24) -> np.ndarray:
    """UV sphere of diameter 1 centred on the origin with smooth normals: (T * 3, 6) float32."""
    th = np.linspace(0.0, math.pi, rings + 1)  # polar angle from +y
    ph = np.linspace(0.0, 2.0 * math.pi, segments + 1)
    t, p = np.meshgrid(th, ph, indexing="ij")  # (rings + 1, segments + 1)
    n = np.stack([np.sin(t) * np.cos(p), np.cos(t), np.sin(t) * np.sin(p)], axis=-1)
    tris, norms = [], []
    for i in range(rings):
        for j in range(segments):
            a, b, c, d = n[i, j], n[i + 1, j], n[i + 1, j + 1], n[i, j + 1]
            if i != 0:
                tris.append([a, b, d])
                norms.append([a, b, d])
            if i != rings - 1:
                tris.append([b, c, d])
                norms.append([b, c, d])
    nn = np.array(norms)
    return _orient(np.array(tris) * 0.5, nn)


def loft_mesh(rings: list[tuple[float, float, float, float]], segments: int = 16) -> np.ndarray:
    """A closed body of elliptical rings (y, half-width, half-depth, z centre), smooth normals: (T * 3, 6) float32."""
    r = np.asarray(rings, np.float64)  # (R, 4)
    a = np.linspace(0.0, 2.0 * math.pi, segments + 1)[:-1]
    ca, sa = np.cos(a), np.sin(a)  # (S,)
    pts = np.stack([r[:, None, 1] * ca, np.broadcast_to(r[:, None, 0], (len(r), segments)),
                    r[:, None, 3] + r[:, None, 2] * sa], axis=-1)  # (R, S, 3)
    # normals: the ring's outward ellipse normal, tilted by how the radii change along y
    dy = np.gradient(r[:, 0])
    slope_w, slope_d = np.gradient(r[:, 1]) / dy, np.gradient(r[:, 2]) / dy
    nx = ca[None, :] / r[:, None, 1]
    nz = sa[None, :] / r[:, None, 2]
    ny = -(ca[None, :] ** 2 * slope_w[:, None] / r[:, None, 1] + sa[None, :] ** 2 * slope_d[:, None] / r[:, None, 2])
    nrm = np.stack([nx, ny, nz], axis=-1)
    nrm /= np.linalg.norm(nrm, axis=-1, keepdims=True)
    tris, norms = [], []
    for i in range(len(r) - 1):
        for j in range(segments):
            k = (j + 1) % segments
            tris += [[pts[i, j], pts[i + 1, j], pts[i + 1, k]], [pts[i, j], pts[i + 1, k], pts[i, k]]]
            norms += [[nrm[i, j], nrm[i + 1, j], nrm[i + 1, k]], [nrm[i, j], nrm[i + 1, k], nrm[i, k]]]
    for i, sign in ((0, -1.0), (len(r) - 1, 1.0)):  # flat caps
        c = np.array([0.0, r[i, 0], r[i, 3]])
        n = np.array([0.0, sign, 0.0])
        for j in range(segments):
            tris.append([c, pts[i, j], pts[i, (j + 1) % segments]])
            norms.append([n, n, n])
    return _orient(np.array(tris), np.array(norms))


# Torso cross-sections in height units: (y, half-width, half-depth, z centre), bottom to top.
CHEST_RINGS: list[tuple[float, float, float, float]] = [
    (0.585, 0.080, 0.056, 0.000),  # waist
    (0.640, 0.086, 0.060, 0.004),
    (0.700, 0.097, 0.066, 0.008),  # chest
    (0.755, 0.108, 0.066, 0.006),
    (0.795, 0.113, 0.060, 0.000),  # shoulder line
    (0.825, 0.096, 0.052, -0.004),
    (0.848, 0.048, 0.038, -0.004),  # neck base
]
HIPS_RINGS: list[tuple[float, float, float, float]] = [
    (0.455, 0.060, 0.045, 0.000),  # crotch
    (0.480, 0.092, 0.058, 0.000),
    (0.530, 0.097, 0.062, -0.004),  # hips
    (0.575, 0.089, 0.059, 0.000),
    (0.605, 0.083, 0.057, 0.000),  # tucked under the chest's waist
]


def primitive_meshes() -> dict[str, np.ndarray]:
    """Every primitive the renderer instances, by name; each (V, 6) float32 position+normal."""
    return {
        "box": box_mesh(),
        "cylinder": frustum_mesh(24, 0.5),
        "frustum": frustum_mesh(24, 0.5 * 0.8),
        "sphere": sphere_mesh(16, 24),
        "ball": sphere_mesh(8, 12),  # small set-piece spheres: a coarse sphere is enough
        "cone": cone_mesh(16),
        "limb": frustum_mesh(10, 0.5 * 0.8),  # upper and lower arms and legs, tapering 80 %
        "joint": sphere_mesh(6, 10),  # shoulders, elbows, knees
        "head": sphere_mesh(12, 16),  # head and hair
        "hem": frustum_mesh(16, 0.5, 0.36),  # skirt of a dress or coat, flaring downward
        "chest": loft_mesh(CHEST_RINGS),
        "hips": loft_mesh(HIPS_RINGS),
        "rod": frustum_mesh(8, 0.5),  # thin set-piece cylinders: poles, legs, cords
    }


# ---------------------------------------------------------------- transforms (float64)


def translate(x: float, y: float, z: float) -> np.ndarray:
    """4x4 translation."""
    m = np.eye(4)
    m[:3, 3] = (x, y, z)
    return m


def scale(x: float, y: float, z: float) -> np.ndarray:
    """4x4 axis scale."""
    return np.diag([x, y, z, 1.0])


def rot_x(rad: float) -> np.ndarray:
    """4x4 rotation about +x (right-handed)."""
    c, s = math.cos(rad), math.sin(rad)
    m = np.eye(4)
    m[1, 1], m[1, 2], m[2, 1], m[2, 2] = c, -s, s, c
    return m


def rot_y(rad: float) -> np.ndarray:
    """4x4 rotation about +y (right-handed): yaw 90 deg turns +z into +x."""
    c, s = math.cos(rad), math.sin(rad)
    m = np.eye(4)
    m[0, 0], m[0, 2], m[2, 0], m[2, 2] = c, s, -s, c
    return m


def rot_z(rad: float) -> np.ndarray:
    """4x4 rotation about +z (right-handed)."""
    c, s = math.cos(rad), math.sin(rad)
    m = np.eye(4)
    m[0, 0], m[0, 1], m[1, 0], m[1, 1] = c, -s, s, c
    return m


@dataclass(frozen=True)
class Part:
    """One instanced primitive: which mesh, where (4x4 float64) and in what colour."""

    primitive: str
    model: np.ndarray
    colour: tuple[float, float, float]


SMALL_SPHERE_M = 0.6  # set-piece spheres below this size use the coarse "ball" mesh
THIN_CYLINDER_M = 0.15  # ... and cylinders thinner than this the 8-sided "rod"


def set_piece_parts(piece: SetPiece) -> Part:
    """The instance that draws a set piece (its base centre sits at ``position``)."""
    w, h, d = piece.size
    x, y, z = piece.position
    prim = {"box": "box", "cylinder": "cylinder", "sphere": "sphere"}[piece.kind]
    if prim == "sphere" and max(piece.size) < SMALL_SPHERE_M:
        prim = "ball"
    if prim == "cylinder" and max(w, d) < THIN_CYLINDER_M:
        prim = "rod"
    model = translate(x, y + 0.5 * h, z) @ rot_y(math.radians(piece.yaw_deg)) @ scale(w, h, d)
    return Part(prim, model, piece.colour)




# ---------------------------------------------------------------- the figure rig
# Proportions in units of body height (an adult of ~7.5 heads); the figure faces +z, its
# left side is +x. Bones pivot at the joints; a limb hangs along -y from its bone.

HEAD_C = (0.0, 0.928, 0.006)  # head centre; the skull's crown is at 0.996, the hair's at ~1.0
HEAD_R = (0.048, 0.068, 0.058)  # head half-sizes (x, y, z)
EYE_Y = 0.934
EYE_X = 0.019
SHOULDER_X = 0.104
SHOULDER_Y = 0.805
UPPER_ARM = 0.175
FOREARM = 0.15
HAND_L = 0.085
HIP_X = 0.052
HIP_Y = 0.50  # leg pivot
THIGH = 0.23
SHIN = 0.23
FOOT_H = 0.04  # ankle height above the sole; HIP_Y - THIGH - SHIN
FOOT_L = 0.15
FOOT_FWD = 0.035  # the foot reaches forward of the ankle
LEG_SWING_RAD = math.radians(26.0)  # thigh swing either side of vertical at a walk
ARM_SWING_RAD = math.radians(20.0)
KNEE_SWING_RAD = math.radians(35.0)  # knee bend of the leg swinging through
ELBOW_REST_RAD = math.radians(10.0)
ARM_OUT_RAD = math.radians(6.0)

# bones, each a (4, 4) transform in height units: the root, then per side (left, right)
# hip, knee, foot (flat, at the ankle), shoulder and elbow
_BONES = ("root", "hip_l", "knee_l", "foot_l", "shoulder_l", "elbow_l",
          "hip_r", "knee_r", "foot_r", "shoulder_r", "elbow_r", "head")
_ROLES = ("top", "bottom", "shoes", "skin", "hair", "eyes", "lips", "hat", "lens")


def _face_z(x: float, y: float) -> float:
    """z of the head's front surface at (x, y), height units."""
    cx, cy, cz = HEAD_C
    rx, ry, rz = HEAD_R
    return cz + rz * math.sqrt(max(0.0, 1.0 - ((x - cx) / rx) ** 2 - ((y - cy) / ry) ** 2))


def _parts(look: Look) -> list[tuple[str, str, np.ndarray, str]]:
    """(primitive, bone, local 4x4 relative to the bone, colour role) of every part of a figure."""
    b = look.build
    hx, hy, hz = HEAD_C
    rx, ry, rz = HEAD_R
    lower = "top" if look.one_piece and look.silhouette == "dress" else "bottom"
    parts: list[tuple[str, str, np.ndarray, str]] = [
        ("hips", "root", scale(b, 1.0, b), lower),
        ("chest", "root", scale(b, 1.0, b), "top"),
        ("limb", "root", translate(0, 0.862, -0.004) @ scale(0.056, 0.06, 0.056), "skin"),  # neck
        ("head", "head", translate(hx, hy, hz) @ scale(2 * rx, 2 * ry, 2 * rz), "skin"),
        ("box", "head", translate(0, 0.917, _face_z(0, 0.917) + 0.002) @ rot_x(-0.25) @ scale(0.016, 0.026, 0.016),
         "skin"),  # nose
        ("box", "head", translate(0, 0.893, _face_z(0, 0.893) - 0.001) @ scale(0.022, 0.005, 0.006), "lips"),
    ]
    eye_z = _face_z(EYE_X, EYE_Y)
    for side in (1.0, -1.0):
        parts.append(("joint", "head", translate(side * EYE_X, EYE_Y, eye_z - 0.001) @ scale(0.014, 0.008, 0.008),
                      "eyes"))
    if look.glasses is not None:
        lens_z = eye_z + 0.004
        for side in (1.0, -1.0):
            parts.append(("box", "head", translate(side * EYE_X, EYE_Y, lens_z) @ scale(0.027, 0.019, 0.003), "lens"))
            if sum(look.glasses) >= 1.2:  # clear lenses: the eye shows through
                parts.append(("joint", "head", translate(side * EYE_X, EYE_Y, lens_z + 0.002)
                              @ scale(0.012, 0.007, 0.003), "eyes"))
        parts.append(("box", "head", translate(0, EYE_Y + 0.004, lens_z) @ scale(0.012, 0.004, 0.003), "lens"))
    if look.hair_style != "bald":
        # a cap over the crown and the back of the head leaves the face clear
        parts.append(("head", "head", translate(hx, hy + 0.006, hz - 0.008) @ scale(2.14 * rx, 2.13 * ry, 2.14 * rz),
                      "hair"))
    if look.hair_style == "long":
        parts.append(("limb", "head", translate(0, 0.872, -0.036) @ scale(0.104, 0.15, 0.06), "hair"))
    if look.hat is not None:
        parts.append(("cylinder", "head", translate(0, 0.978, 0.004) @ scale(0.16, 0.008, 0.15), "hat"))  # brim
        parts.append(("cylinder", "head", translate(0, 1.004, -0.004) @ scale(0.104, 0.052, 0.118), "hat"))
    if look.silhouette == "dress":
        parts.append(("hem", "root", translate(0, 0.45, 0.0) @ scale(0.26 * b, 0.30, 0.20 * b), "top"))
    elif look.silhouette == "coat":
        parts.append(("hem", "root", translate(0, 0.49, 0.0) @ scale(0.25 * b, 0.22, 0.18 * b), "top"))
    if look.skirt and look.silhouette != "dress":
        parts.append(("hem", "root", translate(0, 0.43, 0.0) @ scale(0.26 * b, 0.26, 0.20 * b), "bottom"))
    for s in ("l", "r"):
        parts += [
            ("joint", f"shoulder_{s}", scale(0.068 * b, 0.066, 0.066 * b), "top"),
            ("limb", f"shoulder_{s}", translate(0, -UPPER_ARM / 2, 0) @ scale(0.066 * b, UPPER_ARM, 0.066 * b), "top"),
            ("joint", f"elbow_{s}", scale(0.054 * b, 0.054, 0.054 * b), "top"),
            ("limb", f"elbow_{s}", translate(0, -FOREARM / 2, 0) @ scale(0.054 * b, FOREARM, 0.054 * b), "top"),
            ("box", f"elbow_{s}", translate(0, -FOREARM - HAND_L / 2 + 0.005, 0.004) @ scale(0.024, HAND_L, 0.04),
             "skin"),
            ("limb", f"hip_{s}", translate(0, -THIGH / 2, 0) @ scale(0.10 * b, THIGH, 0.10 * b), "bottom"),
            ("joint", f"knee_{s}", scale(0.074 * b, 0.074, 0.074 * b), "bottom"),
            ("limb", f"knee_{s}", translate(0, -SHIN / 2, 0) @ scale(0.074 * b, SHIN, 0.074 * b), "bottom"),
            ("box", f"foot_{s}", translate(0, -FOOT_H / 2, FOOT_FWD) @ scale(0.056, FOOT_H, FOOT_L), "shoes"),
        ]
    return parts


@dataclass(frozen=True, eq=False)
class _Rig:
    """A figure's parts for one look: primitive index (P,), bone index (P,), local (P, 4, 4), role (P,)."""

    prims: np.ndarray
    bones: np.ndarray
    local: np.ndarray
    roles: np.ndarray
    shoulder_x: float


@functools.lru_cache(maxsize=256)
def _rig(look: Look) -> _Rig:
    """The parts of a figure dressed in ``look`` (cached: a look is immutable)."""
    parts = _parts(look)
    rig = _Rig(
        prims=np.array([PRIMITIVES.index(p) for p, _, _, _ in parts]),
        bones=np.array([_BONES.index(b) for _, b, _, _ in parts]),
        local=np.stack([m for _, _, m, _ in parts]),
        roles=np.array([_ROLES.index(r) for _, _, _, r in parts]),
        shoulder_x=SHOULDER_X * (0.5 + 0.5 * look.build),
    )
    for a in (rig.prims, rig.bones, rig.local, rig.roles):
        a.setflags(write=False)
    return rig


@dataclass(frozen=True)
class Pose:
    """Joint angles in radians, per side (left, right): + flexes forward (knees bend backward)."""

    hip: tuple[float, float] = (0.0, 0.0)
    knee: tuple[float, float] = (0.0, 0.0)
    shoulder: tuple[float, float] = (0.0, 0.0)
    elbow: tuple[float, float] = (ELBOW_REST_RAD, ELBOW_REST_RAD)
    arm_out: float = ARM_OUT_RAD
    head_turn: float = 0.0  # radians about +y from the body's facing, + to the figure's left


STANDING = Pose()


def walk_pose(phase: float) -> Pose:
    """The walk cycle at ``phase`` radians: 0 = legs together, left leg swinging forward."""
    s, c = math.sin(phase), math.cos(phase)
    hip = LEG_SWING_RAD * s
    knee_l = KNEE_SWING_RAD * max(0.0, c) ** 2  # the leg swinging through bends, the stance leg is straight
    knee_r = KNEE_SWING_RAD * max(0.0, -c) ** 2
    arm = ARM_SWING_RAD * s  # arms swing against the legs
    return Pose(
        hip=(hip, -hip), knee=(knee_l, knee_r), shoulder=(-arm, arm),
        elbow=(ELBOW_REST_RAD + 0.8 * max(0.0, -arm), ELBOW_REST_RAD + 0.8 * max(0.0, arm)),
    )


# A sitter's seat, height units: its top just under the pelvis of SITTING, reaching under the thighs.
SEAT_H = 0.235
SEAT_W = 0.26
SEAT_D = 0.24
SEAT_FWD = 0.05
SEAT_COLOUR = (0.42, 0.30, 0.22)
RUN_LEG_SWING_RAD = math.radians(42.0)
RUN_KNEE_RAD = math.radians(100.0)  # the leg swinging through folds high at a run
RUN_ARM_SWING_RAD = math.radians(38.0)
RUN_ELBOW_RAD = math.radians(85.0)


def run_pose(phase: float) -> Pose:
    """The run cycle at ``phase`` radians: longer swings, knees folded through, arms bent and pumping."""
    s, c = math.sin(phase), math.cos(phase)
    hip = RUN_LEG_SWING_RAD * s
    arm = RUN_ARM_SWING_RAD * s
    return Pose(
        hip=(hip, -hip), knee=(RUN_KNEE_RAD * max(0.0, c) ** 2 + 0.2, RUN_KNEE_RAD * max(0.0, -c) ** 2 + 0.2),
        shoulder=(-arm, arm), elbow=(RUN_ELBOW_RAD, RUN_ELBOW_RAD), arm_out=math.radians(10.0),
    )


# Held poses: sitting on a seat (thighs level, shins down, hands on the thighs), talking (forearms up,
# hands going round in small turns, out of step with each other), pointing ahead with the right arm.
SITTING = Pose(hip=(math.pi / 2, math.pi / 2), knee=(math.pi / 2, math.pi / 2), shoulder=(0.35, 0.35),
               elbow=(0.75, 0.75))
POINTING = Pose(shoulder=(0.0, math.radians(84.0)), elbow=(ELBOW_REST_RAD, math.radians(4.0)))
# Kneeling on both knees: thighs upright, shins flat on the ground behind, hands near the thighs (the
# root sinks by the shin's length: daotai.plan.blocking.KNEEL_DROP_SHARE).
KNEELING = Pose(hip=(0.0, 0.0), knee=(math.pi / 2, math.pi / 2), shoulder=(0.15, 0.15), elbow=(0.45, 0.45))
# Holding something: the right upper arm forward, the forearm a little above level, the thing at the
# hand in front of the chest (about 1.2 m up on a 1.75 m figure, 0.45 m ahead).
HOLD_SHOULDER_RAD = 0.7
HOLD_ELBOW_RAD = 1.1
LEAN_TILT_RAD = math.radians(12.0)  # daotai.plan.blocking.LEAN_TILT_DEG
# A lying body rests on its back: the back of the chest (CHEST_RINGS' depth) on what it lies on.
LIE_BACK = 0.066
# Things held, metres (not height units: a cup is a cup's size in anyone's hand): primitive, (w, h, d)
# and colour; set upright at the hand, a bag and an umbrella hanging from it.
HAND_PROP_SHAPES: dict[str, tuple[str, tuple[float, float, float], tuple[float, float, float]]] = {
    "cup": ("cylinder", (0.08, 0.1, 0.08), (0.92, 0.9, 0.85)),
    "glass": ("cylinder", (0.07, 0.15, 0.07), (0.7, 0.82, 0.9)),
    "phone": ("box", (0.075, 0.15, 0.012), (0.08, 0.08, 0.1)),
    "book": ("box", (0.16, 0.23, 0.03), (0.62, 0.2, 0.16)),
    "bag": ("box", (0.36, 0.28, 0.12), (0.32, 0.2, 0.12)),
    "bottle": ("cylinder", (0.07, 0.26, 0.07), (0.2, 0.45, 0.25)),
    "umbrella": ("rod", (0.03, 0.9, 0.03), (0.1, 0.1, 0.14)),
    "flowers": ("cone", (0.2, 0.34, 0.2), (0.85, 0.3, 0.45)),
    "knife": ("box", (0.025, 0.22, 0.012), (0.75, 0.76, 0.78)),
    "gun": ("box", (0.035, 0.14, 0.18), (0.1, 0.1, 0.11)),
    "object": ("box", (0.1, 0.1, 0.1), (0.8, 0.7, 0.3)),
}
_HANGS = ("bag", "umbrella")


def _blend(a: Pose, b: Pose, w: float) -> Pose:
    """Joint angles ``w`` of the way from pose ``a`` to pose ``b``."""
    def mix(x, y):
        return tuple(p + (q - p) * w for p, q in zip(x, y, strict=True)) if isinstance(x, tuple) else x + (y - x) * w

    return Pose(**{f.name: mix(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(Pose)})


def talk_pose(phase: float) -> Pose:
    """Small gestures at ``phase`` radians: both forearms raised, each hand circling a little."""
    return Pose(
        shoulder=(0.30 + 0.10 * math.sin(phase), 0.26 + 0.12 * math.sin(phase + 2.1)),
        elbow=(1.15 + 0.22 * math.cos(phase), 1.05 + 0.25 * math.cos(phase + 2.1)),
    )


def _bone_matrices(pose: Pose, shoulder_x: float) -> np.ndarray:
    """World-in-rig transform of every bone for a pose, height units: (B, 4, 4)."""
    out = np.empty((len(_BONES), 4, 4))
    out[0] = np.eye(4)
    for k, side in enumerate((1.0, -1.0)):  # left (+x), right (-x)
        base = 1 + 5 * k
        hip = translate(side * HIP_X, HIP_Y, 0.0) @ rot_x(-pose.hip[k])
        knee = hip @ translate(0.0, -THIGH, 0.0) @ rot_x(pose.knee[k])
        ankle = knee @ np.array([0.0, -SHIN, 0.0, 1.0])
        shoulder = translate(side * shoulder_x, SHOULDER_Y, 0.0) @ rot_z(side * pose.arm_out) @ rot_x(-pose.shoulder[k])
        elbow = shoulder @ translate(0.0, -UPPER_ARM, 0.0) @ rot_x(-pose.elbow[k])
        out[base] = hip
        out[base + 1] = knee
        out[base + 2] = translate(ankle[0], ankle[1], ankle[2])  # feet stay flat
        out[base + 3] = shoulder
        out[base + 4] = elbow
    out[_BONES.index("head")] = rot_y(pose.head_turn)  # about the body's vertical axis through the neck
    # lower the whole body so the lowest sole rests on the ground (a compass gait dips at
    # double support and rises as the legs pass)
    drop = min(out[3, 1, 3], out[8, 1, 3]) - FOOT_H
    out[:, 1, 3] -= drop
    return out


@functools.lru_cache(maxsize=64)
def _standing_local(look: Look) -> np.ndarray:
    """Part transforms of a standing figure in rig units: (P, 4, 4), read-only."""
    rig = _rig(look)
    local = _bone_matrices(STANDING, rig.shoulder_x)[rig.bones] @ rig.local
    local.setflags(write=False)
    return local


def figure_root(fig: Figure) -> np.ndarray:
    """World transform of a figure's rig (height units -> metres, facing, position): (4, 4)."""
    yaw = math.radians(fig.facing_deg)
    c, s, h = math.cos(yaw) * fig.height_m, math.sin(yaw) * fig.height_m, fig.height_m
    return np.array([[c, 0.0, s, fig.position[0]], [0.0, h, 0.0, 0.0], [-s, 0.0, c, fig.position[1]],
                     [0.0, 0.0, 0.0, 1.0]])


def figure_pose(fig: Figure) -> Pose:
    """The pose a figure holds this frame (its head turned as the figure says)."""
    if fig.walking:
        pose = run_pose(fig.walk_phase) if fig.pose == "run" else walk_pose(fig.walk_phase)
    else:
        pose = {"sit": SITTING, "point": POINTING, "kneel": KNEELING}.get(fig.pose or "", STANDING)
        if fig.pose == "talk":
            pose = talk_pose(fig.pose_phase)
        if fig.pose_weight < 1.0:  # on the way into (or out of) the pose from standing
            pose = _blend(STANDING, pose, fig.pose_weight)
    if fig.held is not None:  # the right arm holds the thing forward, whatever the rest does
        pose = dataclasses.replace(pose, shoulder=(pose.shoulder[0], HOLD_SHOULDER_RAD),
                                   elbow=(pose.elbow[0], HOLD_ELBOW_RAD))
    if fig.head_turn_deg:
        pose = dataclasses.replace(pose, head_turn=math.radians(fig.head_turn_deg))
    return pose


@functools.lru_cache(maxsize=256)
def role_colours(look: Look, colour: tuple[float, float, float]) -> np.ndarray:
    """Colour of every role for a look (the top defaults to ``colour``): (R, 3) float64, read-only."""
    top = look.top if look.top is not None else colour
    bottom = look.bottom if look.bottom is not None else (top if look.one_piece else DEFAULT_TROUSERS)
    skin = np.asarray(look.skin)
    lips = skin * np.array([0.78, 0.55, 0.52])
    out = np.array([top, bottom, look.shoes, look.skin, look.hair, (0.05, 0.04, 0.04), lips,
                    look.hat if look.hat is not None else (0.2, 0.2, 0.2),
                    look.glasses if look.glasses is not None else (0.1, 0.1, 0.1)], np.float64)
    out.setflags(write=False)
    return out


# A four-legged animal in units of its height (the top of its head at 1.0), facing +z: body,
# neck, head with snout, ears and eyes, four legs that swing in diagonal pairs, a tail.
_ANIMAL_LEG_X = 0.13
_ANIMAL_LEG_Z = 0.36
_ANIMAL_HIP_Y = 0.50
_ANIMAL_LEG_SWING_RAD = math.radians(28.0)


def _animal_parts(phase: float, walking: bool) -> list[tuple[str, np.ndarray, str]]:
    """(primitive, model in height units, colour role) of a quadruped at walk ``phase``."""
    swing = _ANIMAL_LEG_SWING_RAD * math.sin(phase) if walking else 0.0
    parts = [
        ("sphere", translate(0.0, 0.56, 0.0) @ scale(0.34, 0.30, 0.86), "coat"),  # body
        ("limb", translate(0.0, 0.74, 0.40) @ rot_x(-0.7) @ scale(0.16, 0.30, 0.16), "coat"),  # neck
        ("head", translate(0.0, 0.86, 0.52) @ scale(0.26, 0.24, 0.28), "coat"),
        ("box", translate(0.0, 0.81, 0.70) @ scale(0.12, 0.10, 0.16), "coat"),  # snout
        ("joint", translate(0.0, 0.83, 0.785) @ scale(0.05, 0.04, 0.04), "dark"),  # nose
        ("limb", translate(0.0, 0.68, -0.48) @ rot_x(-2.2) @ scale(0.06, 0.28, 0.06), "coat"),  # tail
    ]
    for side in (1.0, -1.0):
        parts.append(("box", translate(side * 0.085, 0.99, 0.49) @ rot_z(side * 0.3) @ scale(0.06, 0.12, 0.04),
                      "dark"))  # ears
        parts.append(("joint", translate(side * 0.06, 0.90, 0.645) @ scale(0.035, 0.035, 0.03), "dark"))  # eyes
    for k, (x, z) in enumerate(((1.0, 1.0), (-1.0, 1.0), (1.0, -1.0), (-1.0, -1.0))):
        angle = swing if k in (0, 3) else -swing  # diagonal pairs step together
        hip = translate(x * _ANIMAL_LEG_X, _ANIMAL_HIP_Y, z * _ANIMAL_LEG_Z) @ rot_x(-angle)
        parts.append(("limb", hip @ translate(0.0, -_ANIMAL_HIP_Y / 2, 0.0) @ scale(0.09, _ANIMAL_HIP_Y, 0.09), "coat"))
        parts.append(("box", hip @ translate(0.0, -_ANIMAL_HIP_Y + 0.02, 0.02) @ scale(0.08, 0.04, 0.10), "dark"))
    return parts


def animal_instances(fig: Figure) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """World models (P, 4, 4), colours (P, 3) and primitive indexes (P,) of a four-legged figure."""
    parts = _animal_parts(fig.walk_phase, fig.walking)
    coat = np.asarray(fig.colour, np.float64)
    roles = {"coat": coat, "dark": coat * 0.3}
    models = figure_root(fig) @ np.stack([m for _, m, _ in parts])  # (P, 4, 4) metres
    colours = np.stack([roles[r] for _, _, r in parts])
    return models, colours, np.array([PRIMITIVES.index(p) for p, _, _ in parts])


def body_transform(fig: Figure) -> np.ndarray:
    """The whole body's turn in rig units, (4, 4): a lean tilts it LEAN_TILT_RAD toward ``pose_dir_deg``
    about the head (the feet step out, the head stays over the figure's place); a lying body lies on
    its back on ``rest_height_m``, its head's centre over the place, its feet toward ``pose_dir_deg``;
    ``pose_weight`` of the way from standing. The identity otherwise."""
    if fig.walking or fig.pose not in ("lean", "lie"):
        return np.eye(4)
    w = max(0.0, min(1.0, fig.pose_weight))
    d = math.radians(fig.pose_dir_deg)
    if fig.pose == "lean":
        tilt = LEAN_TILT_RAD * w
        shift = -HEAD_C[1] * math.sin(tilt)
        return translate(shift * math.sin(d), 0.0, shift * math.cos(d)) @ rot_y(d) @ rot_x(tilt) @ rot_y(-d)
    rest = fig.rest_height_m / fig.height_m
    # rot_x(-pi/2) lays the rig's up (+y) along -z and its front (+z) up; the head then lies at z = -HEAD_C[1]
    return rot_y(d) @ translate(0.0, w * (LIE_BACK + rest), w * HEAD_C[1]) @ rot_x(-math.pi / 2 * w)


def hand_point(fig: Figure) -> np.ndarray:
    """World point (3,) metres of the middle of the right hand this frame."""
    rig = _rig(fig.look)
    bones = _bone_matrices(figure_pose(fig), rig.shoulder_x)
    local = bones[_BONES.index("elbow_r")] @ np.array([0.0, -FOREARM - HAND_L / 2 + 0.005, 0.004, 1.0])
    return (figure_root(fig) @ body_transform(fig) @ local)[:3]


def held_instance(fig: Figure) -> tuple[np.ndarray, tuple[float, float, float], str]:
    """(world model (4, 4), colour, primitive) of the thing a figure holds: upright at the right hand
    (a bag or an umbrella hanging from it), turned with the figure."""
    kind, (w, h, d), colour = HAND_PROP_SHAPES.get(fig.held or "object", HAND_PROP_SHAPES["object"])
    x, y, z = hand_point(fig)
    y += -0.5 * h if fig.held in _HANGS else 0.5 * h - 0.03
    return translate(x, y, z) @ rot_y(math.radians(fig.facing_deg)) @ scale(w, h, d), colour, kind


def figure_instances(fig: Figure) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """World models (P, 4, 4), colours (P, 3) and primitive indexes (P,) of a figure's parts."""
    if fig.kind == "animal":
        return animal_instances(fig)
    rig = _rig(fig.look)
    if fig.walking or fig.pose or fig.head_turn_deg or fig.held is not None:
        local = _bone_matrices(figure_pose(fig), rig.shoulder_x)[rig.bones] @ rig.local
    else:
        local = _standing_local(fig.look)
    if fig.pose in ("lean", "lie") and not fig.walking:
        local = body_transform(fig) @ local
    models = figure_root(fig) @ local  # (P, 4, 4) metres
    colours = role_colours(fig.look, tuple(fig.colour))[rig.roles]
    extra: list[tuple[np.ndarray, tuple[float, float, float], str]] = []
    if fig.pose == "sit" and not fig.walking:
        # the seat goes with the sitter: it is there while they sit, not in the shots before or after
        seat = figure_root(fig) @ translate(0.0, SEAT_H / 2.0, SEAT_FWD) @ scale(SEAT_W, SEAT_H, SEAT_D)
        extra.append((seat, SEAT_COLOUR, "box"))
    if fig.held is not None:  # the thing held goes with the hand
        extra.append(held_instance(fig))
    if not extra:
        return models, colours, rig.prims
    return (np.concatenate([models, np.stack([m for m, _, _ in extra])]),
            np.concatenate([colours, np.array([c for _, c, _ in extra])]),
            np.concatenate([rig.prims, [PRIMITIVES.index(k) for _, _, k in extra]]))


@functools.lru_cache(maxsize=1)
def _sitting_drop() -> float:
    """How far (height units) sitting lowers the head: the rig's root sinks as the legs fold."""
    return float(-_bone_matrices(SITTING, SHOULDER_X)[0, 1, 3])


@functools.lru_cache(maxsize=1)
def _kneeling_drop() -> float:
    """How far (height units) kneeling lowers the head: the rig's root sinks as the shins go flat."""
    return float(-_bone_matrices(KNEELING, SHOULDER_X)[0, 1, 3])


def head_drop(fig: Figure) -> float:
    """How far below a standing figure's the head is this frame, in height units (sitting, kneeling,
    leaning and lying lower it; the head stays over the figure's place)."""
    if fig.walking or fig.pose not in ("sit", "kneel", "lean", "lie"):
        return 0.0
    if fig.pose in ("lean", "lie"):
        head = body_transform(fig) @ np.array([HEAD_C[0], HEAD_C[1], HEAD_C[2], 1.0])
        return HEAD_C[1] - float(head[1])
    if fig.pose_weight >= 1.0:
        return _sitting_drop() if fig.pose == "sit" else _kneeling_drop()
    return float(-_bone_matrices(figure_pose(fig), SHOULDER_X)[0, 1, 3])


def figure_head_top(fig: Figure) -> np.ndarray:
    """World point (x, y, z) just above the head (or hat), where the label is anchored."""
    top = (1.05 if fig.look.hat is not None else 1.02) - head_drop(fig)
    return np.array([fig.position[0], fig.height_m * top, fig.position[1]])


def head_points(fig: Figure) -> np.ndarray:
    """World points of a standing figure's crown, chin and soles (centre line): (3, 3) metres."""
    local = np.array([[0.0, 1.0, 0.0, 1.0], [0.0, HEAD_C[1] - HEAD_R[1], 0.0, 1.0], [0.0, 0.0, 0.0, 1.0]])
    return (figure_root(fig) @ local.T).T[:, :3]


# What labels keep off, in height units in the rig's frame: a person's head as an ellipsoid a little
# larger than skull and hair (its centre and half-sizes; a hat raises its top), an animal's as a box
# from the neck to the ears, back of the skull to the nose.
_PERSON_FACE_CENTRE = (0.0, HEAD_C[1], 0.0)
_PERSON_FACE_RADII = (0.062, 0.08, 0.07)
_HAT_RISE = 0.035
_ANIMAL_FACE_BOX = ((-0.15, 0.15), (0.70, 1.07), (0.36, 0.81))


@functools.lru_cache(maxsize=2)
def _face_outline(hat: bool) -> np.ndarray:
    """Points (N, 4) homogeneous, height units, on the ellipsoid labels keep off."""
    theta, phi = np.meshgrid(np.linspace(0.0, math.pi, 13), np.linspace(0.0, 2.0 * math.pi, 24, endpoint=False))
    rx, ry, rz = _PERSON_FACE_RADII
    ry += _HAT_RISE / 2.0 if hat else 0.0
    cx, cy, cz = _PERSON_FACE_CENTRE
    cy += _HAT_RISE / 2.0 if hat else 0.0
    points = np.stack([cx + rx * np.sin(theta) * np.cos(phi), cy + ry * np.cos(theta),
                       cz + rz * np.sin(theta) * np.sin(phi), np.ones_like(theta)], axis=-1).reshape(-1, 4)
    points.setflags(write=False)
    return points


def face_points(fig: Figure) -> np.ndarray:
    """World points (N, 3) metres around the figure's head (lowered when it sits): labels stay off
    the screen box that holds them."""
    if fig.kind == "animal":
        xs, ys, zs = _ANIMAL_FACE_BOX
        local = np.array([[x, y, z, 1.0] for x in xs for y in ys for z in zs])  # (8, 4) height units
    else:
        local = _face_outline(fig.look.hat is not None).copy()
        local[:, 1] -= head_drop(fig)
    return (figure_root(fig) @ local.T).T[:, :3]
