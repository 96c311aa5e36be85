"""Click options derived from a frozen dataclass: a flag, its default and help written once."""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from modelhost.units import MOST_COUNT

F = TypeVar("F", bound=Callable[..., Any])
N = TypeVar("N", int, float)


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
    minimum: float | None = None,
    above: bool = False,
    maximum: float = MOST_COUNT,
) -> Any:
    """A dataclass field that is also a command-line option; a number's within its bounds
    (`above`: the minimum itself refused)."""
    cli = {
        "help": help,
        "flag": flag,
        "short": short,
        "choices": tuple(choices),
        "show_default": show_default,
        "path": {"exists": exists, "file_okay": file_okay, "dir_okay": dir_okay},
        "bounds": (minimum, above, maximum),
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
    if kind in (int, float):
        return Number(kind, *cli["bounds"])
    return kind if kind is str else None


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


# generic from click 8.2; 8.1 cannot subscript it
class Number(click.ParamType):  # type: ignore[type-arg]
    """A finite int or float within bounds: an infinite duration or rate ran forever, and NaN
    passed every check."""

    def __init__(
        self,
        kind: type,
        minimum: float | None = None,
        above: bool = False,
        maximum: float = MOST_COUNT,
    ) -> None:
        self.kind, self.minimum, self.above, self.maximum = kind, minimum, above, maximum
        self.name = "integer" if kind is int else "float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            number = self.kind(value)
        except (TypeError, ValueError, OverflowError):
            number = math.nan
        if not (math.isfinite(number) and self._within(number)):
            self.fail(f"{value!r}: give {self._wanted()}", param, ctx)
        return number

    def _within(self, number: float) -> bool:
        low = self.minimum
        return number <= self.maximum and (
            low is None or (number > low if self.above else number >= low)
        )

    def _wanted(self) -> str:
        what = "a whole number" if self.kind is int else "a number"
        most = f"at most {_shown(self.maximum)}"
        if self.minimum is None:
            return f"{what} of {most}"
        low = "above" if self.above else "of at least"
        return f"{what} {low} {_shown(self.minimum)}, {most}"


def _shown(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else f"{bound:g}"


def numbers(text: str, kind: Callable[[str], N], flag: str) -> list[N]:
    """`1,2,4` → [1, 2, 4], each above 0; a bad part names itself."""
    try:
        found = [kind(part.strip()) for part in text.split(",") if part.strip()]
    except (ValueError, OverflowError):
        found = [kind("0")]
    if not all(0 < number <= MOST_COUNT for number in found):  # NaN too
        raise ValueError(f"{flag} {text!r}: write comma-separated numbers above 0, e.g. 1,2,4")
    return found
