"""MLX (Apple-native) implementation of the Wan2.1 text-to-video stack.

Every submodule imports ``mlx`` lazily through :func:`require_mlx`, so importing this
package never needs MLX installed; only building a model does.
"""

from __future__ import annotations

INSTALL_HINT = 'pip install "daotai[mlx]"  (on Linux: pip install "mlx[cpu]")'


def require_mlx(purpose: str = "the wan-mlx backend"):
    """Import and return ``mlx.core``, or raise DependencyMissing naming the install command."""
    try:
        import mlx.core as mx
    except ImportError as exc:  # pragma: no cover - depends on the environment
        from daotai.errors import DependencyMissing

        raise DependencyMissing("mlx", "mlx", purpose) from exc
    return mx
