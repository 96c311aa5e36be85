"""Sizes in bytes, as people write them ("600MiB", "80%") and as they read them ("1.2 GiB")."""

from __future__ import annotations

import math
import re
from typing import NamedTuple

from modelhost.errors import ConfigError

_SIZE_RE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]*|%)\s*")
_SIZE_UNITS: dict[str, int] = {"": 1, "b": 1} | {
    letter + suffix: (1000 if suffix == "b" else 1024) ** power
    for power, letter in enumerate("kmgtp", start=1)
    for suffix in ("", "i", "ib", "b")
}


class ByteBudget(NamedTuple):
    """A budget as given: a number of bytes ("4GiB"), or a share of a whole that is known only
    when the server starts ("80%" of usable memory, of the free disk)."""

    fixed_bytes: int = 0
    share: float | None = None  # 0.8 for "80%"; fixed_bytes is then unused

    def of(self, whole_bytes: int) -> int:
        """The budget in bytes, a share taken of `whole_bytes`."""
        return self.fixed_bytes if self.share is None else math.floor(self.share * whole_bytes)


def parse_size(text: str, whole_bytes: int | None = None) -> int:
    """Bytes in a size such as "600MiB", "4GiB", "1.5G", "1000000" or "80%" (of `whole_bytes`).

    Units are case-insensitive. KB, MB, GB, TB, PB are decimal (1000**n); KiB, MiB, GiB, TiB,
    PiB, the Kubernetes forms Ki, Mi, Gi, and the bare K, M, G, T, P are binary (1024**n), as in
    Docker. A bare number or B is bytes. A percentage needs `whole_bytes` and is at most 100%.
    """
    if whole_bytes is None and _number_and_unit(text)[1] == "%":
        raise ConfigError(f"{text!r}: a percentage is not allowed here; give a size such as 4GiB")
    return parse_budget(text).of(whole_bytes or 0)


def parse_budget(text: str) -> ByteBudget:
    """A size as `parse_size` reads it, or a percentage (at most 100%) of a whole not known yet."""
    number, unit = _number_and_unit(text)
    if unit != "%":
        return ByteBudget(round(number * _SIZE_UNITS[unit]))
    if number > 100:
        raise ConfigError(f"{text!r}: a percentage must be at most 100%")
    return ByteBudget(share=number / 100)


def _number_and_unit(text: str) -> tuple[float, str]:
    """The number and the lowered unit ("%" for a percentage) of a size; a ConfigError if none."""
    match = _SIZE_RE.fullmatch(text)
    unit = match.group(2).lower() if match else ""
    if match is None or (unit != "%" and unit not in _SIZE_UNITS):
        raise ConfigError(f"{text!r} is not a size; expected e.g. 600MiB, 4GiB, 1.5G or 1000000")
    return float(match.group(1)), unit


def format_bytes(n: int) -> str:
    """A byte count for people: "512 B", "600.0 MiB", "1.2 GiB"."""
    if abs(n) < 1024:
        return f"{n} B"
    for power, unit in enumerate(("KiB", "MiB", "GiB", "TiB"), start=1):
        if abs(n) < 1024 ** (power + 1):
            return f"{n / 1024**power:.1f} {unit}"
    return f"{n / 1024**5:.1f} PiB"
