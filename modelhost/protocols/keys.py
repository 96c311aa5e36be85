"""TorchServe's token authorization: a management, an inference and an API key, kept in
`key_file.json` in the server's working folder as TorchServe keeps them.

The management and inference keys expire; the API key does not, and renews the other two.
"""

from __future__ import annotations

import contextlib
import datetime
import hmac
import json
import logging
import os
import re
import secrets
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

from modelhost.errors import ConfigError

logger = logging.getLogger("modelhost")

MANAGEMENT, INFERENCE, API = "management", "inference", "API"
RENEWABLE = (MANAGEMENT, INFERENCE)
KEY_FILE_NAME = "key_file.json"
_BEARER = re.compile(r"Bearer\s+(\S+)")
# TorchServe draws 6 bytes; clients only copy keys, so longer ones cost nothing
_KEY_BYTES = 18


def refusal_message(kind: str) -> str:
    """Why a call was refused, opening with TorchServe's words, which its clients match."""
    return (
        "Token Authorization failed. Token either incorrect, expired, or not provided correctly: "
        f"send 'Authorization: Bearer <key>' with the {kind} key of {KEY_FILE_NAME}"
    )


def holds_key(authorization: str, key: str) -> bool:
    """Whether an Authorization header's value is `Bearer <key>`."""
    match = _BEARER.fullmatch(authorization.strip())
    if not match or not authorization.isascii():
        return False
    return hmac.compare_digest(match.group(1), key)


class TokenKeys:
    """The three keys, their expiry, and the file that shows them to the server's owner."""

    def __init__(
        self,
        path: Path,
        expiration_s: float,
        clock: Callable[[], float] = time.time,
        draw: Callable[[], str] = lambda: secrets.token_urlsafe(_KEY_BYTES),
    ) -> None:
        self.path = path
        self.expiration_s = expiration_s
        self.clock = clock
        self.draw = draw
        self.keys = {kind: draw() for kind in (*RENEWABLE, API)}
        self.expires_at = dict.fromkeys(RENEWABLE, clock() + expiration_s)

        self.on_renew: Callable[[], None] = lambda: None  # the fronts' table holds a key

    def allows(self, kind: str, authorization: str) -> bool:
        """Whether an Authorization header holds the unexpired key of `kind`."""
        if kind in self.expires_at and self.clock() >= self.expires_at[kind]:
            return False
        return holds_key(authorization, self.keys[kind])

    def of(self, kind: str) -> tuple[str, float]:
        """The key of a renewable `kind` and the epoch second it expires."""
        return self.keys[kind], self.expires_at[kind]

    def renew(self, kind: str) -> None:
        """A new management or inference key, with a fresh expiry, written to the file."""
        self.keys[kind] = self.draw()
        self.expires_at[kind] = self.clock() + self.expiration_s
        self.write()
        self.on_renew()

    def write(self) -> None:
        """The key file, readable by the server's owner only from its first byte."""
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)  # an older file keeps its mode through O_CREAT
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            json.dump(self.shown(), file, indent=2)

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def shown(self) -> dict[str, dict[str, str]]:
        """The file's shape, TorchServe's: each key, and the expiry of the renewable ones."""
        shown = {k: {"key": self.keys[k], "expiration time": self._instant(k)} for k in RENEWABLE}
        return {**shown, API: {"key": self.keys[API]}}

    def _instant(self, kind: str) -> str:
        """An expiry as Java's Instant prints it, which TorchServe's file holds."""
        when = datetime.datetime.fromtimestamp(self.expires_at[kind], datetime.UTC)
        return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@contextlib.contextmanager
def key_file(path: Path, expiration_s: float) -> Iterator[TokenKeys]:
    """Keys shown in `path` while the server runs; the file goes with them."""
    keys = TokenKeys(path, expiration_s)
    try:
        keys.write()
    except OSError as error:
        raise ConfigError(
            f"cannot write the token keys to {path}: {error}; start the server in a writable "
            "folder, or turn token authorization off (--no-token-auth)"
        ) from None
    try:
        yield keys
    finally:
        keys.remove()


@contextlib.asynccontextmanager
async def keys_while_serving(on: bool, expiration_s: float) -> AsyncIterator[TokenKeys | None]:
    """The keys in key_file.json in the working folder while the server runs; None when off."""
    if not on:
        yield None
        return
    with key_file(Path.cwd() / KEY_FILE_NAME, expiration_s) as keys:
        logger.info(
            "token authorization is on: each call needs a key of %s as 'Authorization: Bearer' "
            "(docs/migrating-torchserve.md; --no-token-auth turns it off)",
            keys.path,
        )
        yield keys
