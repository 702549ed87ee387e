"""Shared fixtures: the tiny random model folders, each built once per test session (per worker
under xdist), however many test files render with them.

The folders are read-only by convention: a test that changes files in one copies it first
(tests/test_models_refusal.py does). Variants (other widths, a conditioned LTX) are built
by the test that needs them with tests/builders.py.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

import builders

# The CLI and the server reuse unchanged shots from a cache in the user's cache folder; tests
# render from scratch unless they ask for a cache (tests/test_shot_cache.py does).
os.environ["DAOTAI_NO_CACHE"] = "1"


def pytest_configure(config) -> None:
    """Give the tests Ctrl-C as a terminal gives it to a command.

    A shell that starts a job in the background without job control sets SIGINT to ignored,
    and every process below inherits that: the interrupt tests would then see no interrupt at
    all. Python installs its KeyboardInterrupt handler only where SIGINT was not ignored, so the
    test run puts it back (children started by the tests get the default action at exec).
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _needs_diffusers() -> None:
    reason = "the tiny test models are built with diffusers: pip install 'daotai[neural]'"
    for module in ("torch", "diffusers", "transformers"):
        pytest.importorskip(module, reason=reason)


@pytest.fixture(scope="session")
def tiny_wan(tmp_path_factory) -> Path:
    """A 2-layer random WanPipeline folder (text-to-video)."""
    _needs_diffusers()
    return builders.build_wan(tmp_path_factory.mktemp("tiny_models") / "wan")


@pytest.fixture(scope="session")
def tiny_vace(tmp_path_factory) -> Path:
    """A 3-layer random WanVACEPipeline folder (VACE blocks on layers 0 and 2)."""
    _needs_diffusers()
    return builders.build_wan_vace(tmp_path_factory.mktemp("tiny_models") / "vace")


@pytest.fixture(scope="session")
def tiny_ltx(tmp_path_factory) -> Path:
    """A 1-layer random LTXPipeline folder with a tiny causal VAE."""
    _needs_diffusers()
    return builders.build_ltx(tmp_path_factory.mktemp("tiny_models") / "ltx")


@pytest.fixture(scope="session")
def tiny_wan_camera(tmp_path_factory) -> Path:
    """A random Control-Camera-like WanPipeline folder with its camera adapter."""
    _needs_diffusers()
    return builders.build_wan_camera(tmp_path_factory.mktemp("tiny_models") / "wan_camera")


@pytest.fixture(scope="session")
def tiny_h3(tmp_path_factory) -> Path:
    """The tiny random MiniMax-H3 modular folder (both transformer partitions)."""
    _needs_diffusers()
    return builders.build_h3(tmp_path_factory.mktemp("tiny_models") / "h3")


@pytest.fixture(scope="session")
def tiny_ltx2(tmp_path_factory) -> Path:
    """The tiny random LTX-2 folder (video and audio VAEs, vocoder, a 2-layer Gemma 3)."""
    _needs_diffusers()
    return builders.build_ltx2(tmp_path_factory.mktemp("tiny_models") / "ltx2")
