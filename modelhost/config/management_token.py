"""The management token: a setting, or a file's first line reread while serving."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from modelhost.config.settings import Config
from modelhost.config.watched_file import WatchedFile
from modelhost.errors import ConfigError


def check_management_token(config: Config, cwd: Path) -> None:
    """One source of the token at most, and a file that holds one."""
    if config.management_token and config.management_token_file:
        raise ConfigError(
            "management_token and management_token_file both give the management token: set "
            "one (the file, to rotate it with no restart)"
        )
    if config.management_token_file:
        read_management_token(cwd / config.management_token_file)


def read_management_token(path: Path) -> str:
    """The file's first line; ConfigError, which shows no token, where it holds none."""
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(
            f"cannot read the management token file {path}: {error}; set "
            "--management-token-file to a readable file"
        ) from None
    token = lines[0].strip() if lines else ""
    if not token or not (token.isascii() and token.isprintable()) or " " in token:
        raise ConfigError(
            f"{path} must hold the management token on its first line: printable ASCII, no spaces"
        )
    return token


def watched_management_token(config: Config, emit: Callable[..., Any]) -> WatchedFile[str]:
    """The token file, reread when it changes; else the management_token setting."""
    watched = WatchedFile(
        "management_token_file", config.management_token_file, emit, config.management_token, _none
    )
    watched.open(read_management_token)
    return watched


def _none(token: str) -> dict[str, Any]:
    return {}  # nothing of it is said
