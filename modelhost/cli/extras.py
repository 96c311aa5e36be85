"""The extras: the modules each brings, the commands that need one, and the error naming it."""

from __future__ import annotations

import functools
import importlib
import importlib.util
from collections.abc import Callable, Sequence
from typing import Any

import click

# tests/packaging holds this to pyproject.toml
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "toolkit": ("aiohttp", "rich", "matplotlib", "scipy"),
    "xgboost": ("xgboost",),
    "lightgbm": ("lightgbm",),
    "onnx": ("onnxruntime",),
    "torch": ("torch",),
    "huggingface": ("transformers", "safetensors", "tokenizers", "torch"),
    "torchserve-handlers": ("ts", "torch", "yaml", "captum"),
    "torchserve-vision": ("ts", "torch", "yaml", "captum", "torchvision"),
    "tensorflow": ("tensorflow",),
    "ray": ("ray",),  # for modelhost.integrations.ray_serve
    "grpc-native": ("pygrpc_native",),  # the gRPC inference port's front (rpc/fronts.py)
    "grpc-h2corn": ("h2corn",),  # --grpc-front h2corn
}
COMMAND_EXTRAS: dict[str, str] = {
    "bench": "toolkit",
    "tune": "toolkit",
    "simulate": "toolkit",
    "cost": "toolkit",
}
EXIT_MISSING_EXTRA = 2


class MissingExtra(click.ClickException):
    """A command needs an extra that is not installed; exits 2 with one line."""

    exit_code = EXIT_MISSING_EXTRA

    def __init__(self, command: str, modules: Sequence[str], extra: str) -> None:
        names = " and ".join(
            [", ".join(modules[:-1]), modules[-1]] if len(modules) > 1 else modules
        )
        verb = "is" if len(modules) == 1 else "are"
        super().__init__(
            f"modelhost {command} needs {names}, which {verb} not installed: "
            f"pip install 'modelhost[{extra}]'"
        )


def extra_of(module: str | None) -> str | None:
    top = (module or "").partition(".")[0]
    return next((extra for extra, mods in EXTRA_MODULES.items() if top in mods), None)


def missing_modules(extra: str) -> list[str]:
    """The modules of `extra` that cannot be found, without importing them."""
    return [m for m in EXTRA_MODULES[extra] if importlib.util.find_spec(m) is None]


def require_extra(command: str, extra: str) -> None:
    missing = missing_modules(extra)
    if missing:
        raise MissingExtra(command, missing, extra)


def checked_callback(command: str, extra: str, callback: Callable[..., Any]) -> Callable[..., Any]:
    """`callback`, checking `extra` after option parsing, so `--help` works without it."""

    @functools.wraps(callback)
    def run(*args: Any, **kwargs: Any) -> Any:
        require_extra(command, extra)
        return callback(*args, **kwargs)

    return run


def command_or_stand_in(name: str, module: str) -> click.Command:
    """Command `name` of `module`, or a stand-in that says which missing extra to install."""
    try:
        return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]
    except ModuleNotFoundError as exc:
        extra = extra_of(exc.name)
        if extra is None:
            raise

    def refuse(args: tuple[str, ...]) -> None:
        raise MissingExtra(name, missing_modules(extra) or [str(extra)], extra)

    return click.Command(
        name,
        callback=refuse,
        params=[click.Argument(["args"], nargs=-1, type=click.UNPROCESSED)],
        help=f"(needs pip install 'modelhost[{extra}]')",
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    )
