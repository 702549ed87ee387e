"""GLSL 3.30 sources of the previz passes: instanced meshes (set pieces and figures), the ground with
its grid and haze, the sky, and the soft contact shadows (decals).

Only text: the renderer (``daotai.render.previz.gl``) compiles them and sets their uniforms, and
the reasons for each pass's shape are in the renderer's module docstring. Kept apart so the renderer reads
as the order of its passes, not as the shaders' lines.
"""

from __future__ import annotations

MESH_VS = """
#version 330
uniform mat4 u_view;  // world -> camera
uniform mat4 u_proj;  // camera -> clip, y negated (top row first)
in vec3 in_pos;
in vec3 in_normal;
in vec4 i_m0; in vec4 i_m1; in vec4 i_m2; in vec4 i_m3;  // model matrix columns
in vec3 i_n0; in vec3 i_n1; in vec3 i_n2;                 // normal matrix columns
in vec3 i_colour;
in float i_id;
out vec3 v_normal;
out vec3 v_colour;
out float v_depth;
flat out uint v_id;
void main() {
    vec4 eye = u_view * (mat4(i_m0, i_m1, i_m2, i_m3) * vec4(in_pos, 1.0));
    v_depth = -eye.z;  // linear metres along the view axis; interpolates exactly
    v_normal = mat3(i_n0, i_n1, i_n2) * in_normal;
    v_colour = i_colour;
    v_id = uint(i_id + 0.5);
    gl_Position = u_proj * eye;
}
"""

MESH_FS = """
#version 330
uniform vec3 u_sun;       // unit vector toward the light, world
uniform float u_ambient;
in vec3 v_normal;
in vec3 v_colour;
in float v_depth;
flat in uint v_id;
layout(location = 0) out vec4 f_colour;
layout(location = 1) out float f_depth;
void main() {
    vec3 n = normalize(v_normal);
    float lambert = max(dot(n, u_sun), 0.0);
    // Lambert + ambient, plus a little sky fill from above so the side away from the sun
    // still shows its form; figures end up slightly brighter than the unlit ground palette.
    float light = u_ambient + (1.0 - u_ambient) * lambert + 0.12 * (0.5 + 0.5 * n.y);
    // alpha carries the figure index (unorm8: id / 255 reads back as the byte id), so the
    // masks need no attachment of their own (see PrevizRenderer.render)
    f_colour = vec4(min(v_colour * light, vec3(1.0)), float(v_id) / 255.0);
    f_depth = v_depth;
}
"""

GROUND_VS = """
#version 330
uniform mat4 u_view;
uniform mat4 u_proj;
uniform vec3 u_eye;      // camera position, world
uniform float u_extent;  // half-size of the ground square, metres
in vec2 in_corner;       // unit square corner in [-1, 1]^2
out vec2 v_xz;           // world x, z
out float v_depth;
void main() {
    // a square under the camera, wide enough to reach the far plane in every direction
    vec2 xz = u_eye.xz + in_corner * u_extent;
    vec4 eye = u_view * vec4(xz.x, 0.0, xz.y, 1.0);
    v_xz = xz;
    v_depth = -eye.z;
    gl_Position = u_proj * eye;
}
"""

GROUND_FS = """
#version 330
uniform vec3 u_ground;
uniform vec3 u_grid;
uniform vec3 u_haze;
uniform float u_inv_spacing;  // grid cells per metre
uniform vec2 u_fog;           // fog distance (m), (far + fog distance) / far
in vec2 v_xz;
in float v_depth;
layout(location = 0) out vec4 f_colour;
layout(location = 1) out float f_depth;
void main() {
    vec2 cell = v_xz * u_inv_spacing;
    vec2 w = max(fwidth(cell), vec2(1e-6));  // cells per pixel
    vec2 iw = 1.0 / w;
    // Box-filtered lines: coverage of a line of half-width hw (cells) over the pixel footprint;
    // a line thinner than a pixel is widened to one pixel and dimmed to keep its ink. Minor
    // lines fade out as cells shrink below ~3 px and major lines (every 5th) below ~15 px,
    // so distant ground never shimmers into moire. One reciprocal and no other division:
    // llvmpipe runs this for most pixels of every frame.
    vec2 g = abs(fract(cell - 0.5) - 0.5);
    vec2 c = clamp((max(vec2(0.02), 0.5 * w) - g) * iw + 0.5, 0.0, 1.0) * min(vec2(1.0), 0.04 * iw);
    float minor = max(c.x, c.y) * clamp(2.0 - 6.0 * max(w.x, w.y), 0.0, 1.0);
    vec2 g5 = abs(fract(0.2 * cell - 0.5) - 0.5);
    vec2 c5 = clamp((max(vec2(0.006), 0.1 * w) - g5) * (5.0 * iw) + 0.5, 0.0, 1.0) * min(vec2(1.0), 0.06 * iw);
    float major = max(c5.x, c5.y) * clamp(2.0 - 1.2 * max(w.x, w.y), 0.0, 1.0);
    vec3 ground = mix(u_ground, u_grid, max(0.7 * minor, major));
    // haze grows with depth and reaches the sky pass's below-horizon colour exactly at the
    // far plane, so the ground meets the sliver beyond it without a seam
    float fog = min(1.0, v_depth * u_fog.y / (v_depth + u_fog.x));
    f_colour = vec4(mix(ground, u_haze, fog), 0.0);  // alpha = figure index 0
    f_depth = v_depth;
}
"""

SKY_VS = """
#version 330
uniform mat3 u_rot;     // camera axes in world coordinates (columns x, y, z)
uniform vec4 u_intr;    // fx, fy, cx, cy in pixels of this framebuffer
uniform vec2 u_size;    // framebuffer width, height in pixels
in vec2 in_px;          // polygon corner in pixels (u, v)
noperspective out vec3 v_dir;
void main() {
    // the world ray through pixel (u, v); affine in the pixel, so interpolation is exact
    v_dir = u_rot * vec3((in_px.x - u_intr.z) / u_intr.x, -(in_px.y - u_intr.w) / u_intr.y, -1.0);
    // window row 0 is the image's top row (see the mirrored projection): v maps straight to y
    gl_Position = vec4(2.0 * in_px / u_size - 1.0, 0.0, 1.0);
}
"""

SKY_FS = """
#version 330
uniform vec3 u_zenith;
uniform vec3 u_horizon;
uniform vec3 u_haze;
noperspective in vec3 v_dir;
layout(location = 0) out vec4 f_colour;
layout(location = 1) out float f_depth;
void main() {
    float s = 1.0 - v_dir.y * inversesqrt(dot(v_dir, v_dir));  // 0 at the zenith, 1 at the horizon
    // above the horizon a gradient; below it (ground past the far plane) the distant haze
    f_colour = vec4(s > 1.0 ? u_haze : mix(u_horizon, u_zenith, 1.0 - s * s * s), 0.0);  // alpha: no figure
    f_depth = uintBitsToFloat(0x7F800000u);  // +inf
}
"""

DECAL_VS = """
#version 330
uniform mat4 u_view;
uniform mat4 u_proj;
in vec2 in_corner;      // unit quad corner in [-1, 1]^2
in vec4 i_blob;         // x, z, radius, strength
out vec2 v_local;
flat out float v_strength;
void main() {
    v_local = in_corner * 2.0;  // the quad spans two radii; the shadow is ~gone by then
    v_strength = i_blob.w;
    vec3 world = vec3(i_blob.x + v_local.x * i_blob.z, 0.0, i_blob.y + v_local.y * i_blob.z);
    gl_Position = u_proj * (u_view * vec4(world, 1.0));
}
"""

DECAL_FS = """
#version 330
in vec2 v_local;
flat in float v_strength;
layout(location = 0) out vec4 f_colour;
void main() {
    // soft contact shadow: black with a gaussian alpha, blended over the ground colour only;
    // a negative strength is a practical light's warm pool on the ground instead
    float falloff = exp(-2.5 * dot(v_local, v_local));
    f_colour = v_strength >= 0.0 ? vec4(0.0, 0.0, 0.0, v_strength * falloff)
                                 : vec4(1.0, 0.82, 0.52, -v_strength * falloff);
}
"""
