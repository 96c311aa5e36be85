"""Sizes in bytes, as people write them ("600MiB", "80%") and as they read them ("1.2 GiB")."""

from __future__ import annotations

import math
import re
from typing import NamedTuple

from modelhost.errors import ConfigError

# the most any count or time may be: a C int, as msgpack and the runtimes take
MOST_COUNT = 2**31 - 1
_SIZE_RE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]*|%)\s*")
_SIZE_UNITS: dict[str, int] = {"": 1, "b": 1} | {
    letter + suffix: (1000 if suffix == "b" else 1024) ** power
    for power, letter in enumerate("kmgtp", start=1)
    for suffix in ("", "i", "ib", "b")
}


class ByteBudget(NamedTuple):
    """Bytes ("4GiB") or a share of a whole known only at start ("80%")."""

    fixed_bytes: int = 0
    share: float | None = None  # overrides fixed_bytes

    def of(self, whole_bytes: int) -> int:
        return self.fixed_bytes if self.share is None else math.floor(self.share * whole_bytes)


def parse_size(text: str, whole_bytes: int | None = None) -> int:
    """Bytes in "600MiB", "1.5G", "1000000" or "80%" (of `whole_bytes`).

    KB, MB, GB are decimal. KiB, Ki and a bare K are binary, as in Docker.
    """
    if whole_bytes is None and _number_and_unit(text)[1] == "%":
        raise ConfigError(f"{text!r}: a percentage is not allowed here; give a size such as 4GiB")
    return parse_budget(text).of(whole_bytes or 0)


def parse_budget(text: str) -> ByteBudget:
    """A size, or a percentage of a whole not known yet."""
    number, unit = _number_and_unit(text)
    if unit != "%":
        return ByteBudget(round(number * _SIZE_UNITS[unit]))
    if number > 100:
        raise ConfigError(f"{text!r}: a percentage must be at most 100%")
    return ByteBudget(share=number / 100)


def _number_and_unit(text: str) -> tuple[float, str]:
    match = _SIZE_RE.fullmatch(text)
    unit = match.group(2).lower() if match else ""
    if match is None or (unit != "%" and unit not in _SIZE_UNITS):
        raise ConfigError(f"{text!r} is not a size; expected e.g. 600MiB, 4GiB, 1.5G or 1000000")
    return float(match.group(1)), unit


def format_bytes(n: int) -> str:
    """A byte count for people: "1.2 GiB"."""
    if abs(n) < 1024:
        return f"{n} B"
    for power, unit in enumerate(("KiB", "MiB", "GiB", "TiB"), start=1):
        if abs(n) < 1024 ** (power + 1):
            return f"{n / 1024**power:.1f} {unit}"
    return f"{n / 1024**5:.1f} PiB"
