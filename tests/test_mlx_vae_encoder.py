"""The MLX Wan VAE encoder against diffusers' AutoencoderKLWan.encode (torch fp32, tiny random weights)."""

from __future__ import annotations

import numpy as np
import pytest

mx = pytest.importorskip("mlx.core", reason='MLX not installed: pip install "mlx[cpu]" (Linux) or "daotai[mlx]"')
torch = pytest.importorskip("torch", reason="parity tests compare against torch: pip install 'daotai[neural]'")
diffusers = pytest.importorskip("diffusers", reason="parity tests need diffusers: pip install 'daotai[neural]'")

from builders import WAN_VAE, wan_vae  # noqa: E402
from daotai.errors import BackendError  # noqa: E402
from daotai.mlx.pipeline import load_vae_decoder, load_vae_encoder  # noqa: E402

# The layout the other MLX tests use (diffusers' own tiny Wan VAE), and a second one that
# downsamples time in the first stage, widens the channels (1x1x1 shortcut convs) and
# stacks two residual blocks per stage, so the block list and its weight names differ.
CONFIGS = {
    "tiny": WAN_VAE,
    "wide": dict(base_dim=8, z_dim=4, dim_mult=[1, 2, 2, 2], num_res_blocks=2, temperal_downsample=[True, True, False]),
}


def rel_l2(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.fixture(scope="module")
def vaes(tmp_path_factory):
    """{name: (saved folder, torch module)} for each config, seeded."""
    out = {}
    for i, (name, cfg) in enumerate(CONFIGS.items()):
        torch.manual_seed(10 + i)
        vae = wan_vae(**cfg).eval()
        folder = tmp_path_factory.mktemp(f"vae_{name}")
        vae.save_pretrained(folder)
        out[name] = (folder, vae)
    return out


def _video(frames: int, h: int = 32, w: int = 40, seed: int = 1) -> torch.Tensor:
    """(1, 3, frames, h, w) uniform in [-1, 1], as a decoded video would be."""
    return torch.rand(1, 3, frames, h, w, generator=torch.Generator().manual_seed(seed)) * 2 - 1


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("frames", [1, 5, 9])
def test_encoder_matches_diffusers(vaes, name, frames):
    """Posterior mean and logvar within 1e-3 relative L2 (measured ~4e-7 to 7e-7), streamed and whole."""
    folder, vae = vaes[name]
    x = _video(frames)
    with torch.no_grad():
        post = vae.encode(x).latent_dist  # diffusers streams: frame 0, then chunks of 4
    ref_mean, ref_logvar = post.mean.numpy(), post.logvar.numpy()
    encoder = load_vae_encoder(folder)
    results = {}
    for chunked in (True, False):
        mean, logvar = encoder.moments(mx.array(x.numpy()), chunked=chunked)
        mean, logvar = np.array(mean), np.array(logvar)
        assert mean.shape == ref_mean.shape == (1, vae.config.z_dim, 1 + (frames - 1) // 4, 4, 5)
        assert rel_l2(mean, ref_mean) < 1e-3
        assert rel_l2(logvar, ref_logvar) < 1e-3
        results[chunked] = mean
    # the causal caches make the stream equal the whole-sequence pass, not just close to diffusers
    assert rel_l2(results[True], results[False]) < 1e-5
    np.testing.assert_array_equal(np.array(encoder.encode(mx.array(x.numpy()))), results[True])


def test_first_frame_is_encoded_on_its_own(vaes):
    """Causality: the first latent frame depends on frame 0 only, so later frames cannot change it."""
    folder, _ = vaes["tiny"]
    encoder = load_vae_encoder(folder)
    a = _video(9, seed=3).numpy()
    b = a.copy()
    b[:, :, 1:] = -b[:, :, 1:]  # change every frame but the first
    za, zb = np.array(encoder.encode(mx.array(a))), np.array(encoder.encode(mx.array(b)))
    np.testing.assert_allclose(za[:, :, 0], zb[:, :, 0], rtol=1e-6, atol=1e-6)
    assert rel_l2(zb[:, :, 1:], za[:, :, 1:]) > 1e-3


def test_round_trip_shapes_and_normalisation(vaes):
    """encode -> normalise -> denormalise -> decode gives back a video of the input's shape."""
    folder, vae = vaes["tiny"]
    encoder, decoder = load_vae_encoder(folder), load_vae_decoder(folder)
    x = mx.array(_video(9).numpy())
    z = encoder.encode(x)
    assert z.shape == (1, 16, 3, 4, 5)
    zn = encoder.normalize(z)
    np.testing.assert_allclose(np.array(decoder.denormalize(zn)), np.array(z), rtol=1e-5, atol=1e-5)
    video = decoder.decode(decoder.denormalize(zn))
    assert video.shape == x.shape == (1, 3, 9, 32, 40)
    with torch.no_grad():  # and the same decode diffusers would do of diffusers' own latents
        ref = vae.decode(vae.encode(torch.from_numpy(np.array(x))).latent_dist.mode()).sample.numpy()
    assert rel_l2(np.array(video), ref) < 1e-3


@pytest.mark.parametrize("shape,match", [
    ((1, 3, 8, 32, 40), r"frames=8 must be 1 \+ 4k"),
    ((1, 3, 0, 32, 40), r"frames=0 must be 1 \+ 4k"),
    ((1, 3, 5, 30, 40), r"size 40x30 must be a multiple of 8"),
    ((3, 5, 32, 40), r"must be \(batch, channels, frames, height, width\)"),
])
def test_bad_video_shapes_are_refused(vaes, shape, match):
    encoder = load_vae_encoder(vaes["tiny"][0])
    with pytest.raises(BackendError, match=match):
        encoder.encode(mx.zeros(shape))
