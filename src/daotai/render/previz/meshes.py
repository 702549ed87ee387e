"""Unit primitives and the proxy-figure rig, as plain numpy arrays.

Every primitive fits the cube [-0.5, 0.5]^3 and is a non-indexed triangle list of
interleaved (position, normal) float32 vertices with counter-clockwise outward winding, so
one model matrix per instance (scale, rotate, translate) places it anywhere. Figures are
built in units of their height and scaled uniformly, so proportions follow ``height_m``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from daotai.render.previz.scene import Figure, SetPiece

PRIMITIVES: tuple[str, ...] = ("box", "cylinder", "frustum", "sphere", "ball", "cone")


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


def frustum_mesh(segments: int = 24, bottom_radius: float = 0.5) -> np.ndarray:
    """Capped cylinder (or cone frustum) along y in [-0.5, 0.5], top radius 0.5: (T * 3, 6) float32."""
    a = np.linspace(0.0, 2.0 * math.pi, segments + 1)
    ca, sa = np.cos(a), np.sin(a)
    r0, r1 = bottom_radius, 0.5
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


def primitive_meshes() -> dict[str, np.ndarray]:
    """Every primitive the renderer instances, by name; each (V, 6) float32 position+normal."""
    return {
        "box": box_mesh(),
        "cylinder": frustum_mesh(24, 0.5),
        "frustum": frustum_mesh(24, 0.5 * 0.8),  # torso: waist 80 % of the shoulders
        "sphere": sphere_mesh(16, 24),
        "ball": sphere_mesh(8, 12),  # small joints and hands: a coarse sphere is enough
        "cone": cone_mesh(16),
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


def set_piece_parts(piece: SetPiece) -> Part:
    """The instance that draws a set piece (its base centre sits at ``position``)."""
    w, h, d = piece.size
    x, y, z = piece.position
    prim = {"box": "box", "cylinder": "cylinder", "sphere": "sphere"}[piece.kind]
    model = translate(x, y + 0.5 * h, z) @ rot_y(math.radians(piece.yaw_deg)) @ scale(w, h, d)
    return Part(prim, model, piece.colour)


# Figure proportions in units of body height (an adult of ~7.5 heads).
HEAD_D = 0.13  # head diameter; its top is at 1.0
HEAD_Y = 1.0 - HEAD_D / 2
HIP_Y = 0.49  # leg pivot
LEG_LEN = 0.45  # hip pivot to ankle
FOOT_H = 0.04
SHOULDER_Y = 0.775
SHOULDER_X = 0.145
ARM_LEN = 0.36
LEG_SWING_RAD = math.radians(26.0)
ARM_SWING_RAD = math.radians(20.0)


def _static_rig() -> list[tuple[str, np.ndarray, str]]:
    """Parts that do not move with the gait: (primitive, local 4x4 in height units, colour role)."""
    return [
        ("sphere", translate(0, 0.50, 0) @ scale(0.22, 0.12, 0.14), "body"),  # pelvis
        ("frustum", translate(0, 0.645, 0) @ scale(0.27, 0.29, 0.15), "body"),  # torso
        ("ball", translate(SHOULDER_X - 0.02, SHOULDER_Y, 0) @ scale(0.09, 0.09, 0.09), "body"),
        ("ball", translate(-SHOULDER_X + 0.02, SHOULDER_Y, 0) @ scale(0.09, 0.09, 0.09), "body"),
        ("cylinder", translate(0, 0.83, 0) @ scale(0.06, 0.08, 0.06), "skin"),  # neck
        ("sphere", translate(0, HEAD_Y, 0) @ scale(HEAD_D, HEAD_D, HEAD_D), "skin"),  # head
        # nose cone and a visor band on the face make the facing direction readable
        ("cone", translate(0, HEAD_Y - 0.005, 0.07) @ rot_x(math.pi / 2) @ scale(0.035, 0.06, 0.035), "accent"),
        ("box", translate(0, HEAD_Y + 0.015, 0.047) @ scale(0.10, 0.022, 0.04), "accent"),
    ]


def _limbs(swing: float) -> list[tuple[str, np.ndarray, str]]:
    """Legs, feet, arms and hands for a swing angle (radians, + = left leg forward)."""
    out: list[tuple[str, np.ndarray, str]] = []
    for side in (1.0, -1.0):
        leg = translate(side * 0.058, HIP_Y, 0) @ rot_x(-side * swing)
        out.append(("cylinder", leg @ translate(0, -LEG_LEN / 2, 0) @ scale(0.085, LEG_LEN, 0.085), "legs"))
        # feet stay flat under the swinging ankle, so their soles can rest on the ground
        ankle = leg @ np.array([0.0, -LEG_LEN, 0.0, 1.0])
        foot = translate(ankle[0], ankle[1] - FOOT_H / 2, ankle[2] + 0.035) @ scale(0.07, FOOT_H, 0.14)
        out.append(("box", foot, "legs"))
        arm = (
            translate(side * SHOULDER_X, SHOULDER_Y, 0)
            @ rot_x(side * swing * ARM_SWING_RAD / LEG_SWING_RAD)
            @ rot_z(side * math.radians(7.0))
        )
        out.append(("cylinder", arm @ translate(0, -ARM_LEN / 2, 0) @ scale(0.06, ARM_LEN, 0.06), "body"))
        out.append(("ball", arm @ translate(0, -ARM_LEN - 0.02, 0) @ scale(0.07, 0.08, 0.07), "skin"))
    return out


_ROLES: tuple[str, ...] = ("body", "legs", "skin", "accent")
_STATIC = _static_rig()
_STANDING = _limbs(0.0)
# primitive index and colour role of every figure part, in the order figure_instances returns them
FIGURE_PRIMS: np.ndarray = np.array([PRIMITIVES.index(p) for p, _, _ in (*_STATIC, *_STANDING)])
_FIGURE_ROLES: np.ndarray = np.array([_ROLES.index(r) for _, _, r in (*_STATIC, *_STANDING)])
_STATIC_LOCAL: np.ndarray = np.stack([m for _, m, _ in _STATIC])  # (S, 4, 4) height units
_STANDING_LOCAL: np.ndarray = np.stack([m for _, m, _ in _STANDING])  # (L, 4, 4)


def _role_colours(colour: tuple[float, float, float]) -> np.ndarray:
    """Colours of the body, legs, skin and accent roles: (4, 3) float64."""
    c = np.asarray(colour, np.float64)
    return np.stack([c, c * 0.6, c + (1.0 - c) * 0.45, c * 0.25])


def figure_root(fig: Figure, swing: float) -> np.ndarray:
    """World transform of a figure's rig (height units -> metres, facing, gait dip): (4, 4)."""
    # Straight legs swung apart would lift the feet; lower the body so both soles stay on the
    # ground (a compass gait: the body dips at double support, rises as the legs pass).
    drop = LEG_LEN * (1.0 - math.cos(swing)) * fig.height_m
    yaw = math.radians(fig.facing_deg)
    c, s, h = math.cos(yaw) * fig.height_m, math.sin(yaw) * fig.height_m, fig.height_m
    return np.array([[c, 0.0, s, fig.position[0]], [0.0, h, 0.0, -drop], [-s, 0.0, c, fig.position[1]],
                     [0.0, 0.0, 0.0, 1.0]])


def figure_instances(fig: Figure) -> tuple[np.ndarray, np.ndarray]:
    """World models (P, 4, 4) and colours (P, 3) of a figure's parts, primitives per FIGURE_PRIMS."""
    swing = LEG_SWING_RAD * math.sin(fig.walk_phase) if fig.walking else 0.0
    limbs = _STANDING_LOCAL if swing == 0.0 else np.stack([m for _, m, _ in _limbs(swing)])
    local = np.concatenate([_STATIC_LOCAL, limbs])  # (P, 4, 4)
    models = figure_root(fig, swing) @ local  # (P, 4, 4) metres
    return models, _role_colours(fig.colour)[_FIGURE_ROLES]


def figure_head_top(fig: Figure) -> np.ndarray:
    """World point (x, y, z) just above the head, where the label is anchored."""
    return np.array([fig.position[0], fig.height_m * 1.02, fig.position[1]])
