"""Loading a checked model folder into a diffusers pipeline, safetensors only, on the device's dtypes.

Every load runs the safety rules of :mod:`daotai.runtime.model_checks` first and never sets
``trust_remote_code``; a modular pipeline's components are loaded from the folder itself,
whatever its index points at, and only the ones a render needs.
"""

from __future__ import annotations

from typing import Any, Iterable

from daotai.errors import BackendError, DependencyMissing
from daotai.runtime.model_checks import MODULAR_INDEX_NAME, check_model_folder, components_of, config_of, is_modular
from daotai.runtime.model_lookup import ResolvedModel, resolve_model


def _quiet_loading() -> None:
    """Silence the libraries' own progress bars: daotai reports loading as events."""
    import diffusers.utils.logging as diffusers_logging

    diffusers_logging.disable_progress_bar()
    try:
        import transformers.utils.logging as transformers_logging

        transformers_logging.disable_progress_bar()
    except ImportError:
        pass


def load_pipeline(name_or_path: str, family: str, runtime: Any) -> tuple[Any, ResolvedModel]:
    """Resolve, check and load a diffusers pipeline for ``family`` on ``runtime``'s dtypes (not moved yet)."""
    model = resolve_model(name_or_path)
    index = check_model_folder(model.path, family)
    try:
        import diffusers
    except ImportError:
        raise DependencyMissing("diffusers", "neural", "neural rendering") from None
    cls = getattr(diffusers, index["_class_name"])
    _quiet_loading()
    from daotai.runtime.device import vae_dtype_for

    dtypes = {
        "default": runtime.dtype("transformer"),
        "text_encoder": runtime.dtype("text_encoder"),
        "vae": vae_dtype_for(runtime, family),
    }
    try:
        pipe = cls.from_pretrained(
            str(model.path), dtype=dtypes, use_safetensors=True, local_files_only=True
        )
    except (OSError, ValueError, RuntimeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BackendError(f"{model.path}: could not load the {family} pipeline ({first}); pull the model again") from None
    return pipe, model


def _component_class(library: str, cls: str) -> Any:
    """The class a model index names, from diffusers or transformers (already checked as allowed)."""
    import importlib

    found = getattr(importlib.import_module(library), cls, None)
    if found is None:
        raise BackendError(f"component class {library}.{cls} is not in the installed {library}; upgrade it")
    return found


def modular_pipeline(model: ResolvedModel, family: str, components: Iterable[str], blocks: Any = None) -> Any:
    """Check a modular model folder for ``components`` and make its pipeline with none of them loaded yet.

    The pipeline class and blocks are diffusers' own (checked); the index's plain settings (canvas
    sizes…) are kept, its component locations are not: components come from this folder alone.
    ``blocks``: the blocks to run instead of the index's class (a variant of them, same components).
    """
    index = check_model_folder(model.path, family, components,
                               missing_hint=f"pull it again (daotai models pull {model.spec.name})" if model.spec
                               else "copy the whole model folder again")
    if not is_modular(model.path):
        raise BackendError(f"{model.path}: is not a modular pipeline folder (no {MODULAR_INDEX_NAME})")
    try:
        import diffusers
    except ImportError:
        raise DependencyMissing("diffusers", "neural", "neural rendering") from None
    _quiet_loading()
    pipeline_cls = getattr(diffusers, index["_class_name"])
    if blocks is None:
        blocks = getattr(diffusers, index["_blocks_class_name"])()
    settings = {"_class_name": index["_class_name"], "_blocks_class_name": index["_blocks_class_name"], **config_of(index)}
    return pipeline_cls(blocks=blocks, modular_config_dict=settings)


def load_components(pipe: Any, model: ResolvedModel, family: str, runtime: Any, names: Iterable[str]) -> list[str]:
    """Load ``names`` from a checked modular folder onto ``pipe`` (not moved yet); returns the names loaded.

    Weights load as safetensors only, in the device rule's dtypes (the VAEs in the family's VAE
    dtype). Components already on the pipeline are kept.
    """
    import torch

    from daotai.runtime.device import vae_dtype_for

    names = [n for n in names if getattr(pipe, n, None) is None]
    if not names:
        return []
    index = check_model_folder(model.path, family, names)
    listed = components_of(index)
    loaded = {}
    for name in names:
        library, cls_name = listed[name]
        cls = _component_class(library, cls_name)
        kwargs: dict[str, Any] = {"local_files_only": True}
        if isinstance(cls, type) and issubclass(cls, torch.nn.Module):
            role = "text_encoder" if name.startswith("text_encoder") else "vae" if "vae" in name else "transformer"
            kwargs["dtype"] = vae_dtype_for(runtime, family) if role == "vae" else runtime.dtype(role)
            kwargs["use_safetensors"] = True
        try:
            loaded[name] = cls.from_pretrained(str(model.path / name), **kwargs)
        except ImportError as exc:
            missing = "torchvision" if "torchvision" in str(exc).lower() else (getattr(exc, "name", None) or "a package")
            raise BackendError(
                f"{model.path}: component {name!r} ({cls_name}) needs {missing}, which is not installed; "
                f"install it with: pip install {missing} (the build that matches your torch)"
            ) from None
        except (OSError, ValueError, RuntimeError, TypeError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise BackendError(f"{model.path}: could not load component {name!r} ({first}); pull the model again") from None
    pipe.update_components(**loaded)
    return names
