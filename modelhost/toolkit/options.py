"""Click options derived from a frozen dataclass: a flag, its default and help written once."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


def option(
    default: Any,
    help: str = "",
    *,
    flag: str = "",
    short: str = "",
    choices: Sequence[str] = (),
    show_default: bool = True,
    exists: bool = False,
    file_okay: bool = True,
    dir_okay: bool = True,
) -> Any:
    """A dataclass field that is also a command-line option."""
    cli = {
        "help": help,
        "flag": flag,
        "short": short,
        "choices": tuple(choices),
        "show_default": show_default,
        "path": {"exists": exists, "file_okay": file_okay, "dir_okay": dir_okay},
    }
    if isinstance(default, (list, dict)):
        raise TypeError("use a tuple for a repeatable option's default")
    return dataclasses.field(default=default, metadata={"cli": cli})


def _click_type(annotation: Any, cli: dict[str, Any]) -> Any:
    if cli["choices"]:
        return click.Choice(cli["choices"])
    kinds = {a for a in typing.get_args(annotation) if a is not type(None)} or {annotation}
    if Path in kinds:
        return click.Path(path_type=Path, **cli["path"])
    kind = next(iter(kinds))
    return kind if kind in (int, float, str) else None


def _click_option(field: dataclasses.Field[Any], annotation: Any) -> Callable[[F], F]:
    cli = field.metadata["cli"]
    flag = cli["flag"] or "--" + field.name.replace("_", "-")
    names = [flag, *([cli["short"]] if cli["short"] else []), field.name]
    shown = cli["show_default"] and field.default not in ("", None, ())
    common = {"default": field.default, "help": cli["help"], "show_default": shown}
    if annotation is bool:
        return click.option(*names, is_flag=True, **common)
    if typing.get_origin(annotation) is tuple:
        kind = _click_type(typing.get_args(annotation)[0], cli)
        return click.option(*names, multiple=True, type=kind, **common)
    return click.option(*names, type=_click_type(annotation, cli), **common)


def cli_fields(cls: type) -> list[tuple[dataclasses.Field[Any], Any]]:
    hints = typing.get_type_hints(cls)
    return [(f, hints[f.name]) for f in dataclasses.fields(cls) if "cli" in f.metadata]


def click_options(cls: type) -> Callable[[F], F]:
    """A decorator adding a click option per option field of `cls`."""

    def decorate(func: F) -> F:
        for field, annotation in reversed(cli_fields(cls)):
            func = _click_option(field, annotation)(func)
        return func

    return decorate


def numbers(text: str, kind: Callable[[str], T]) -> list[T]:
    """`1,2,4` → [1, 2, 4]; a bad part names itself."""
    try:
        return [kind(part.strip()) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"{text!r}: write comma-separated numbers, e.g. 1,2,4") from None
