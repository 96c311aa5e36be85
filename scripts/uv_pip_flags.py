"""Print pip's configured wheel folders, indexes and constraints as `uv pip install` flags.

uv reads no pip.conf and no PIP_* variable, so without these flags it would ignore a machine's
local wheels (the CPU build of torch) and its constraints. Pip merges all its indexes and takes
the best version of each, which uv does only with `--index-strategy unsafe-best-match`.
"""

from __future__ import annotations

import shlex
import subprocess
import sys

# pip's option name, as `pip config list` writes the key's tail, and uv's flag for it
FLAGS = {
    "index-url": "--index-url",
    "extra-index-url": "--extra-index-url",
    "find-links": "--find-links",
    "constraint": "--constraint",
}


def pip_config() -> list[tuple[str, str]]:
    """`pip config list` as (option, value) pairs, from files and PIP_* variables alike."""
    listing = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    pairs = []
    for line in listing.splitlines():
        key, _, quoted = line.partition("=")
        option = key.rpartition(".")[2]
        if option in FLAGS:
            pairs.append((option, quoted.strip().strip("'\"")))
    return pairs


def uv_flags(pairs: list[tuple[str, str]]) -> list[str]:
    """uv's flags for pip's options, each value once (a value may list several, spaced)."""
    flags = ["--index-strategy", "unsafe-best-match"]
    seen: set[tuple[str, str]] = set()
    for option, values in pairs:
        for value in values.split():
            if (option, value) not in seen:
                seen.add((option, value))
                flags += [FLAGS[option], value]
    return flags


if __name__ == "__main__":
    print(shlex.join(uv_flags(pip_config())))
