"""Each shot's camera: where it starts (the framing staged on its subject, or the place the script gives),
its move, and every frame's pose and lens."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from daotai.errors import PlanError
from daotai.plan import blocking, headroom, steadicam, viewpoint
from daotai.plan import camera_grammar as cam
from daotai.plan import props as prop_words
from daotai.plan.framing import ANIMAL_FRAMING_SCALE, DUTCH_ROLL_DEG, FRAMING_RULES, size_at
from daotai.plan.model import CameraFrame, CharacterFrame, ResolvedMove
from daotai.plan.moves import TOO_CLOSE_M, resolve_move
from daotai.plan.stable import derive_seed, rounded, rounded_all
from daotai.plan.staging import (
    Body,
    CameraPlace,
    Placement,
    fully_hidden,
    hidden_by,
    horizontal_fov_to_vertical,
    inside_figure,
    place_camera,
    place_explicitly,
    stage_camera,
)
from daotai.plan.viewpoint import VIEWPOINT_FRAMINGS
from daotai.script.camera_spec import CameraSpec
from daotai.script.schema import Shot
from daotai.script.vocab import CAMERA_MOVES, CAMERA_SIDE_DEG, SENSOR_WIDTH_MM

DEFAULT_SENSOR = "super35"


def shot_camera(shot: Shot, index: int, framing: str, present: tuple[str, ...], subject: str | None,
                 bodies: dict[str, Body], character_frames: list, kinds: dict[str, str], width: int, height: int,
                 fps: float, seed: int, warnings: list[str], props: list[prop_words.PlacedProp] = ()):
    """The shot's camera: where it starts, its move and every frame's pose and lens; PlanError names the field
    that cannot be planned. Returns (framing, move, placement, cameras, framed_at); warnings are appended.
    ``props``: the props standing as the shot starts (a camera lowered for sitters stays above their table)."""
    framing, camera_spec, placement, lands = _start(shot, index, framing, present, subject, bodies, character_frames,
                                                    kinds, width / height, warnings, props)
    move = resolve_move(camera_spec, placement.distance, f"shots[{index}].camera")
    landed = None
    if lands:  # a push-in ends on the framing the shot names: it starts wider, on the same line
        end_distance = headroom.landing_distance(placement.distance, move.fov, move.fov_end)
        if camera_spec.motion is None and move.motion[2] < 0.0:
            # the default push covers a third of the start distance: it starts 1.5 times as far as it ends
            move = resolve_move(camera_spec, 1.5 * end_distance, f"shots[{index}].camera")
        landed = headroom.lands_on_framing(placement, move.fov, move.fov_end, move.motion)
        placement = landed if landed is not None else placement
    poses, fovs, move = _poses(shot, move, placement, character_frames, present, subject, fps, seed)
    warnings.extend(_camera_warnings(shot, framing, placement, poses, fovs, present, subject, bodies, kinds,
                                     character_frames))
    n_frames = len(character_frames)
    cameras = tuple(
        CameraFrame(cam_to_world=rounded_all(poses[i]), fov=rounded(fovs[i]), K=rounded_all(cam.intrinsics(float(fovs[i]), width, height)))
        for i in range(n_frames)
    )
    return framing, move, placement, cameras, (n_frames - 1 if landed is not None else 0)


def _start(shot: Shot, index: int, framing: str, present: tuple[str, ...], subject: str | None,
           bodies: dict[str, Body], character_frames: list, kinds: dict[str, str], aspect: float,
           warnings: list[str], props: list[prop_words.PlacedProp]) -> tuple[str, CameraSpec, Placement, bool]:
    """Where the shot's camera starts: (the framing it makes, the camera spec with the lens it uses, the start
    placement, whether a push lands on the named framing). A warning for someone hiding the subject is appended."""
    n_frames = len(character_frames)
    camera_spec = shot.camera
    lens_fov = _lens_fov(shot.camera, aspect)
    fov_given = "fov" in shot.camera.model_fields_set or shot.camera.focal_length_mm is not None
    if subject is not None:
        others = tuple(bodies[c] for c in present if c != subject)
        path = np.array([p.position for frame in character_frames for p in frame], np.float64)
        if framing in VIEWPOINT_FRAMINGS:  # placed by what the subject sees (pov) or holds (insert)
            seated = {p.id: p.pose == "sit" for p in character_frames[0]}
            placement, fov = _viewpoint_camera(shot, framing, bodies, subject, others, seated, lens_fov), lens_fov
        else:
            try:
                placement, fov, _ = stage_camera(
                    framing, shot.angle.value, lens_fov, aspect, bodies[subject], others,
                    fov_given=fov_given, path=path,
                )
            except ValueError:
                raise PlanError.at(f"shots[{index}].framing", framing, "needs a second character in the shot "
                                   "(list both in shots[].characters)") from None
        if kinds[subject] == "animal" and framing in FRAMING_RULES and FRAMING_RULES[framing].scale_with_height:
            placement = _toward_the_head(placement, bodies[subject])
        lands = framing not in VIEWPOINT_FRAMINGS and _push_lands(shot)  # a pov's push starts at the eyes
        framed_at = n_frames - 1 if lands else 0  # the frame the named framing holds on
        drop = 0.0 if framing in VIEWPOINT_FRAMINGS else _seated_drop(  # a viewpoint knows who sits
            framing, subject, present, character_frames[framed_at], kinds, bodies)
        if drop > 0.0:  # seated people are framed at their seated height, from above the table they sit at
            floor = _table_floor(props, character_frames[framed_at],
                                 float(np.asarray(placement.cam_to_world)[1, 3]))
            placement = headroom.shifted(placement, np.array([0.0, -drop, 0.0]), _roll(shot), floor)
            lier = character_frames[framed_at][present.index(subject)]
            if _lies(lier):
                placement = _beside_lying(placement, lier.facing + lier.pose_dir, LYING_VIEW_DEG, _roll(shot))
        place = _camera_place(shot, index, framing, bodies)
        if framing in VIEWPOINT_FRAMINGS and place.aim is not None:
            place = dataclasses.replace(place, aim=None)  # the viewpoint already looks at the camera's aim
        if shot.camera.follow and not place.moves_the_camera:
            place = _beside_the_path(place, bodies[subject], character_frames, present.index(subject))
        if place.moves_the_camera or place.aim is not None:
            placement = place_explicitly(placement, bodies[subject], place, shot.angle.value)
        if _place_given(shot):  # where the planner chose, the warning below says what it found instead
            _refuse_a_blocked_start(shot, index, placement, bodies, subject)
            if "framing" not in shot.model_fields_set and (shot.camera.distance_m or shot.camera.position):
                # the script placed the camera and named no size: the plan names the size it makes
                framing = size_at(placement.distance, fov, bodies[subject].height,
                                  ANIMAL_FRAMING_SCALE if kinds[subject] == "animal" else 1.0)
        if fov != shot.camera.fov:
            camera_spec = shot.camera.model_copy(update={"fov": fov})
        if framing in headroom.SINGLE_SIZES and place.aim is None:
            me = character_frames[framed_at][present.index(subject)]
            if not _lies(me):  # lying face up, they look at the ceiling: no side of the frame is ahead of them
                placement = _with_lead_room(placement, me.facing, fov, aspect, _roll(shot))
        if framing not in ("over_the_shoulder", *VIEWPOINT_FRAMINGS) and not _place_given(shot):
            hidden = hidden_by(placement, bodies[subject], others)
            if hidden:
                warnings.append(f"{', '.join(hidden)} stands between the camera and {subject} at the start of the shot")
    elif framing in ("over_the_shoulder", "two_shot"):
        raise PlanError.at(f"shots[{index}].framing", framing, "needs two characters in the shot")
    else:
        lands = False
        placement = place_camera(framing, shot.angle.value, lens_fov, (0.0, 0.0), 1.75, 0.0)
        place = _camera_place(shot, index, framing, bodies)
        if place.moves_the_camera or place.aim is not None:
            placement = place_explicitly(placement, Body("", (0.0, 0.0), 1.75, 0.0), place, shot.angle.value)
        if lens_fov != shot.camera.fov:
            camera_spec = shot.camera.model_copy(update={"fov": lens_fov})
    return framing, camera_spec, placement, lands


def _poses(shot: Shot, move: ResolvedMove, placement: Placement, character_frames: list, present: tuple[str, ...],
           subject: str | None, fps: float, seed: int) -> tuple[np.ndarray, np.ndarray, ResolvedMove]:
    """Every frame's camera-to-world pose (n, 4, 4) and vertical fov (n,) degrees along the move, with the move
    as planned (a following pan records the turns it makes)."""
    n_frames = len(character_frames)
    traj = cam.trajectory(
        placement.cam_to_world,
        cam.Move(
            motion=move.motion,
            rotate=move.rotate,
            orbit=move.orbit,
            fov=move.fov,
            fov_end=move.fov_end if move.fov_end != move.fov else None,
            easing=move.easing,
            shake=move.shake,
            orbit_center=placement.aim_point,
            shake_seed=derive_seed(seed, "shake"),
        ),
        n_frames,
        fps,
    )
    poses = np.array(traj.cam_to_world)  # (n, 4, 4)
    fovs = np.array(traj.fov)  # (n,) degrees
    if move.type == "dolly_zoom" and shot.camera.fov_end is None:
        # Hold the subject's size on every frame, not only at both ends: the fov follows
        # the distance (d · tan(fov/2) constant) instead of a tan-linear blend.
        distances = np.linalg.norm(poses[:, :3, 3] - np.array(placement.aim_point), axis=1)
        half = math.tan(math.radians(move.fov) / 2.0) * placement.distance / distances
        fovs = np.degrees(2.0 * np.arctan(half))
    if move.follow and subject is not None:
        start = np.array(character_frames[0][present.index(subject)].position)
        for i, frame in enumerate(character_frames):
            now = np.array(frame[present.index(subject)].position)
            poses[i, 0, 3] += now[0] - start[0]
            poses[i, 2, 3] += now[1] - start[1]
    if move.type == "steadicam":
        poses = steadicam.add_float(poses, fps, derive_seed(seed, "steadicam"))
    if shot.camera.follow and subject is not None:
        track = np.array([frame[present.index(subject)].position for frame in character_frames], np.float64)
        poses = _turn_to_follow(poses, np.array(placement.aim_point), track - track[0],
                                DUTCH_ROLL_DEG if shot.angle.value == "dutch" else 0.0)
        move = move.model_copy(update={"rotate": _turns_over_shot(poses), "pan_follow": True})
    return poses, fovs, move


def _camera_warnings(shot: Shot, framing: str, placement: Placement, poses: np.ndarray, fovs: np.ndarray,
                     present: tuple[str, ...], subject: str | None, bodies: dict[str, Body], kinds: dict[str, str],
                     character_frames: list) -> list[str]:
    """What the move does that the director should hear of: a lens that comes too close to the subject, goes
    under the ground, or (placed by the script) cuts the subject's head off."""
    warnings: list[str] = []
    if subject is not None:
        aim = np.array(placement.aim_point)
        closest = float(np.min(np.linalg.norm(poses[:, :3, 3] - aim, axis=1)))
        if closest < min(TOO_CLOSE_M, 0.5 * placement.distance):
            warnings.append(
                f"the camera comes within {closest:.2f} m of {subject}'s aim point: it may pass through the subject"
            )
    if np.any(poses[:, 1, 3] < 0.02):
        warnings.append("the camera goes below the ground (y < 0) during the shot")
    if subject is not None and kinds[subject] == "person" and (_place_given(shot) or _aim_given(shot)):
        warnings.extend(_head_cut_warnings(framing, subject, present.index(subject), bodies[subject].height,
                                           poses, fovs, character_frames))
    return warnings



def _roll(shot: Shot) -> float:
    """The camera's roll about its view axis at the start (a dutch angle's), degrees."""
    return DUTCH_ROLL_DEG if shot.angle.value == "dutch" else 0.0



def _aim_given(shot: Shot) -> bool:
    """Whether the script names what the lens looks at (a point, or a character other than the subject)."""
    return shot.camera.aim is not None and shot.camera.aim != "subject"




def _push_lands(shot: Shot) -> bool:
    """Whether the shot's move is a push the planner lands on the named framing: it closes on the subject
    (forward, or narrowing the lens) and the script leaves the camera's place, aim and path to the planner.
    A `motion` written out (by hand, or by dragging the move's end on the console's floor plan) is the
    director's own path: the shot starts on its framing and travels exactly that far."""
    spec = shot.camera
    if (_place_given(shot) or _aim_given(shot) or spec.follow or CAMERA_MOVES[spec.type.value].holds_subject
            or spec.motion is not None):
        return False
    move = resolve_move(spec, 1.0)  # the signs of a move do not depend on the distance
    return headroom.pushes_in(move.type, move.motion, move.rotate, move.orbit, move.fov, move.fov_end)



def _seated_share(person: CharacterFrame) -> float:
    """How far below standing a person's head is this frame, as a share of their height."""
    if person.pose != "sit" or person.walking:
        return 0.0
    return headroom.SEATED_HEAD_DROP * person.pose_weight



def head_share(person: CharacterFrame, height: float) -> float:
    """How far below standing a person's head is this frame (seated, kneeling, lying …), as a share of their height."""
    if person.pose == "sit":
        return _seated_share(person)
    return blocking.head_drop_share(person.pose, person.walking, person.pose_weight, person.rest_height / height)



# A lens framing someone lying down stands at their side and looks down at them from this far above
# level, the same distance from the head: over the edge of the bed or sofa, not along its top.
LYING_VIEW_DEG = 35.0



def _lies(person: CharacterFrame) -> bool:
    """Whether a character frame shows someone lying down (more than halfway)."""
    return blocking.body_posture(person.pose, person.walking, person.pose_weight) == "lie"



def _beside_lying(placement, feet_deg: float, elevation_deg: float, roll: float):
    """``placement`` with its lens swung about the aim, the same distance off, to the side of a body
    lying with its feet toward ``feet_deg`` (the side the lens was on) and up until it looks down at
    ``elevation_deg``: the whole body across the frame, the face the right way up, not seen from the crown."""
    eye = np.asarray(placement.cam_to_world, np.float64)[:3, 3]
    aim = np.asarray(placement.aim_point, np.float64)
    offset = eye - aim  # (3,) m
    distance = float(np.linalg.norm(offset))
    if distance < 1e-6:
        return placement
    feet = math.radians(feet_deg)
    across = np.array([math.cos(feet), 0.0, -math.sin(feet)])  # (3,) level, square to the body
    if float(across @ offset) < 0.0:
        across = -across
    e = math.radians(max(elevation_deg, math.degrees(math.asin(max(-1.0, min(1.0, offset[1] / distance))))))
    eye = aim + distance * (math.cos(e) * across + np.array([0.0, math.sin(e), 0.0]))
    return type(placement)(cam.make_pose(cam.look_at(eye, aim, roll_deg=roll), eye), placement.aim_point, distance)



def _seated_drop(framing: str, subject: str, present: tuple[str, ...], people: tuple[CharacterFrame, ...],
                 kinds: dict[str, str], bodies: dict[str, Body]) -> float:
    """Metres to lower the start camera for a seated subject; a framing of several people drops only as
    far as the least seated of them allows (a standing partner keeps their head in the two-shot)."""
    if kinds[subject] != "person":
        return 0.0
    share = head_share(people[present.index(subject)], bodies[subject].height)
    if framing in ("over_the_shoulder", "two_shot") or (framing in ("wide", "extreme_wide") and len(present) > 1):
        share = min(head_share(p, bodies[p.id].height) for p in people)
    return headroom.seated_drop(framing, bodies[subject].height, share) if share > 0.0 else 0.0



TABLE_CLEARANCE_M = 0.25  # a lens lowered for sitters stays this far above the top of the table they sit at



SAT_AT_M = 1.2  # a seated person this near a table's or desk's centre (m) sits at it



def _table_floor(props, people: tuple[CharacterFrame, ...], standing_lens: float) -> float:
    """The lowest a camera lowered for seated people may go (m): ``TABLE_CLEARANCE_M`` above the top of
    a table or desk one of them sits at, so the lens looks down on its top and across it rather than
    into its edge (never higher than the lens stood before it came down); 0 without such a table."""
    sat_at = [prop for prop in props if prop.type in prop_words.TABLE_LIKE and any(
        _seated_share(p) > 0.0 and math.dist(p.position, prop.xz) < SAT_AT_M for p in people)]
    if not sat_at:
        return 0.0
    top = max(piece.position[1] + piece.size[1] for prop in sat_at for piece in prop_words.pieces(prop))
    return min(standing_lens, top + TABLE_CLEARANCE_M)



def _with_lead_room(placement, facing_deg: float, fov: float, aspect: float, roll: float):
    """The start camera panned so a subject facing ``facing_deg`` has the open side of the frame in front."""
    shift = headroom.lead_room_shift(placement, facing_deg, fov, aspect)
    if float(np.linalg.norm(shift)) < 1e-6:
        return placement
    eye = np.asarray(placement.cam_to_world)[:3, 3]
    aim = np.asarray(placement.aim_point) + shift
    return type(placement)(cam.make_pose(cam.look_at(eye, aim, roll_deg=roll), eye), tuple(float(v) for v in aim),
                           float(np.linalg.norm(aim - eye)))



def _head_cut_warnings(framing: str, subject: str, slot: int, height: float, poses: np.ndarray, fovs: np.ndarray,
                       character_frames: list) -> list[str]:
    """Warnings for a camera the script places that cuts the top of the subject's head off where the
    framing's headroom rule keeps it in the frame, at the shot's first or last frame."""
    out = []
    for i, when in ((0, "first"), (len(poses) - 1, "last")):
        person = character_frames[i][slot]
        rows = headroom.head_rows(poses[i], float(fovs[i]), person.position, height, head_share(person, height))
        if headroom.cuts_the_head(framing, rows):
            out.append(f"the camera the script places cuts the top of {subject}'s head off at the {when} frame "
                       f"(a {framing.replace('_', ' ')} keeps it in the picture); move the camera back or lower "
                       "its aim, or use a wider lens")
        if len(poses) == 1:
            break
    return out



def _viewpoint_camera(shot: Shot, framing: str, bodies: dict[str, Body], subject: str, others: tuple[Body, ...],
                      seated: dict[str, bool], fov: float):
    """The start camera of a pov or an insert (daotai.plan.viewpoint).

    pov: at the subject's eyes, looking at the shot's look_at, else the camera's aim, else whom it faces.
    insert: a close detail of the camera's aim (a point, or a character's hand), else the subject's hand."""
    body, angle = bodies[subject], shot.angle.value
    aim = shot.camera.aim if shot.camera.aim != "subject" else None
    if framing == "pov":
        wanted = shot.look_at if shot.look_at is not None else aim
        look = bodies.get(wanted) if isinstance(wanted, str) else (np.array(wanted, np.float64) if wanted else None)
        target = viewpoint.pov_target(body, others, seated[subject], look)
        return viewpoint.pov_placement(body, target, seated[subject], angle)
    if isinstance(aim, tuple):
        detail = np.array(aim, np.float64)
    elif isinstance(aim, str) and aim in bodies:
        detail = viewpoint.hand_point(bodies[aim], seated[aim])
    else:
        detail = viewpoint.hand_point(body, seated[subject])
    return viewpoint.insert_placement(body, detail, fov, angle)



def _lens_fov(camera: CameraSpec, aspect: float) -> float:
    """The vertical fov the script asks for: from focal_length_mm on the sensor's width, else fov."""
    if camera.focal_length_mm is None:
        return float(camera.fov)
    sensor = camera.sensor.value if camera.sensor is not None else DEFAULT_SENSOR
    return round(horizontal_fov_to_vertical(SENSOR_WIDTH_MM[sensor], camera.focal_length_mm, aspect), 6)



def _camera_place(shot: Shot, index: int, framing: str, bodies: dict[str, Body]) -> CameraPlace:
    """The shot camera's place fields in world terms; an aim at someone not in the shot is refused."""
    cam = shot.camera
    side = cam.side
    side_deg = None if side is None else (CAMERA_SIDE_DEG[side.value] if hasattr(side, "value") else float(side))
    aim = None
    if isinstance(cam.aim, str) and cam.aim != "subject":
        if cam.aim not in bodies:
            raise PlanError.at(f"shots[{index}].camera.aim", cam.aim, "must be 'subject' or the id of a character "
                               f"in the shot ({', '.join(bodies) or 'none'})")
        body = bodies[cam.aim]
        rule = FRAMING_RULES.get(framing, FRAMING_RULES["close_up"])  # a pov or insert looks at the face
        aim = (body.xz[0], body.height * rule.aim_fraction, body.xz[1])
    elif isinstance(cam.aim, tuple):
        aim = tuple(float(v) for v in cam.aim)
    return CameraPlace(side_deg=side_deg, distance_m=cam.distance_m, height_m=cam.height_m,
                       position=tuple(cam.position) if cam.position is not None else None, aim=aim)



ANIMAL_HEAD_FORWARD = 0.52  # an animal's head is this far ahead of where it stands (share of its height)



def _toward_the_head(placement, body: Body):
    """A framing of an animal: aimed at its head (ahead of its feet, not above them) and
    ANIMAL_FRAMING_SCALE times as far back as a person of its height (its head is a larger share of it)."""
    yaw = math.radians(body.facing)
    shift = np.array([math.sin(yaw), 0.0, math.cos(yaw)]) * ANIMAL_HEAD_FORWARD * body.height  # (3,) m
    pose = np.array(placement.cam_to_world)
    aim = np.array(placement.aim_point) + shift
    pose[:3, 3] = aim + (pose[:3, 3] - np.array(placement.aim_point)) * ANIMAL_FRAMING_SCALE
    return type(placement)(pose, tuple(float(v) for v in aim), placement.distance * ANIMAL_FRAMING_SCALE)



def _place_given(shot: Shot) -> bool:
    """Whether the script itself places the camera (side, distance_m, height_m or position)."""
    return any(getattr(shot.camera, name) is not None for name in ("side", "distance_m", "height_m", "position"))



def _beside_the_path(place: CameraPlace, subject: Body, frames: list, slot: int) -> CameraPlace:
    """A following pan without a side given watches from beside the subject's path, on the audience side
    (in front of a runner it would stand in their way)."""
    start, end = np.array(frames[0][slot].position), np.array(frames[-1][slot].position)
    if float(np.linalg.norm(end - start)) < 0.5:
        return place
    heading = math.degrees(math.atan2(end[0] - start[0], end[1] - start[1]))
    sides = [heading + 90.0, heading - 90.0]
    best = max(sides, key=lambda yaw: math.cos(math.radians(yaw)))  # the side toward +z, the audience
    return CameraPlace(side_deg=best - subject.facing, distance_m=place.distance_m, height_m=place.height_m,
                       position=None, aim=place.aim)



def _place_path(shot: Shot, index: int) -> tuple[str, object]:
    """The JSON path and value of the place field that put the camera where it is (for errors)."""
    cam = shot.camera
    for name in ("position", "distance_m", "side", "height_m"):
        value = getattr(cam, name)
        if value is not None:
            shown = value.value if hasattr(value, "value") else list(value) if isinstance(value, tuple) else value
            return f"shots[{index}].camera.{name}", shown
    return f"shots[{index}].camera", None



def _refuse_a_blocked_start(shot: Shot, index: int, placement, bodies: dict[str, Body], subject: str) -> None:
    """A camera placed by the script must not start inside someone, nor with the subject wholly hidden."""
    eye = np.asarray(placement.cam_to_world)[:3, 3]
    path, value = _place_path(shot, index)
    inside = inside_figure(eye, tuple(bodies.values()))
    if inside is not None:
        raise PlanError.at(path, value, f"puts the lens inside {inside} (at {list(rounded_all(eye))} m); move it clear of "
                           "their body")
    others = tuple(b for c, b in bodies.items() if c != subject)
    blockers = fully_hidden(eye, bodies[subject], others)
    if blockers:
        raise PlanError.at(path, value, f"puts {', '.join(blockers)} between the lens and {subject}, who is wholly "
                           "hidden at the start of the shot; choose another side or raise the camera")



def _turn_to_follow(poses: np.ndarray, aim: np.ndarray, shift: np.ndarray, roll: float) -> np.ndarray:
    """Poses turned each frame toward ``aim`` moved by the subject's ground shift (n, 2): a pan that follows."""
    out = poses.copy()
    for i in range(len(out)):
        target = aim + np.array([shift[i, 0], 0.0, shift[i, 1]])
        out[i, :3, :3] = cam.look_at(out[i, :3, 3], target, roll_deg=roll)
    return out



def _turns_over_shot(poses: np.ndarray) -> tuple[float, float, float]:
    """(pan, tilt, 0) degrees from the first frame's view to the last's, summed frame by frame (pan unwrapped)."""
    forward = -poses[:, :3, 2]  # (n, 3) view directions
    yaw = np.unwrap(np.arctan2(forward[:, 0], -forward[:, 2]))  # + = view turned right
    pitch = np.arcsin(np.clip(forward[:, 1], -1.0, 1.0))
    return (rounded(math.degrees(yaw[-1] - yaw[0])), rounded(math.degrees(pitch[-1] - pitch[0])), 0.0)
