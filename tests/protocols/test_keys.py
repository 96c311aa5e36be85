"""TorchServe's three keys: who each one lets in, when it expires, and the file that shows them."""

from __future__ import annotations

import itertools
import json
import stat
from pathlib import Path

import pytest

from modelhost.errors import ConfigError
from modelhost.protocols.keys import API, INFERENCE, MANAGEMENT, TokenKeys, key_file

EXPIRATION_S = 60.0


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def keys_at(tmp_path: Path, clock: Clock) -> TokenKeys:
    drawn = itertools.count()
    return TokenKeys(tmp_path / "key_file.json", EXPIRATION_S, clock, lambda: f"k{next(drawn)}")


def bearer(keys: TokenKeys, kind: str) -> str:
    return f"Bearer {keys.keys[kind]}"


def test_each_key_lets_in_its_own_api_only(tmp_path: Path) -> None:
    keys = keys_at(tmp_path, Clock())
    for kind in (MANAGEMENT, INFERENCE, API):
        assert keys.allows(kind, bearer(keys, kind))
        others = {MANAGEMENT, INFERENCE, API} - {kind}
        assert not any(keys.allows(other, bearer(keys, kind)) for other in others)


@pytest.mark.parametrize("header", ["", "k0", "Basic k0", "Bearer", "Bearer k0 k1", "Bearer kö"])
def test_malformed_headers_let_nobody_in(tmp_path: Path, header: str) -> None:
    assert not keys_at(tmp_path, Clock()).allows(MANAGEMENT, header)


def test_keys_expire_but_the_api_key_renews_them(tmp_path: Path) -> None:
    """Past token_expiration_min the management key is refused until the API key renews it."""
    clock = Clock()
    keys = keys_at(tmp_path, clock)
    old = bearer(keys, MANAGEMENT)
    clock.now += EXPIRATION_S
    assert not keys.allows(MANAGEMENT, old)
    assert keys.allows(API, bearer(keys, API))
    keys.renew(MANAGEMENT)
    assert keys.allows(MANAGEMENT, bearer(keys, MANAGEMENT))
    assert not keys.allows(MANAGEMENT, old)
    assert not keys.allows(INFERENCE, bearer(keys, INFERENCE))  # not renewed: still expired


def test_the_file_has_torchserves_shape_and_follows_renewals(tmp_path: Path) -> None:
    clock = Clock()
    keys = keys_at(tmp_path, clock)
    keys.write()
    shown = json.loads(keys.path.read_text())
    assert shown[MANAGEMENT] == {"key": "k0", "expiration time": "2023-11-14T22:14:20.000000Z"}
    assert shown[API] == {"key": "k2"}
    keys.renew(INFERENCE)
    assert json.loads(keys.path.read_text())[INFERENCE]["key"] == "k3"
    assert stat.S_IMODE(keys.path.stat().st_mode) == 0o600


def test_an_older_readable_file_is_made_private(tmp_path: Path) -> None:
    path = tmp_path / "key_file.json"
    path.write_text("{}")
    path.chmod(0o644)
    with key_file(path, EXPIRATION_S):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not path.exists()


def test_an_unwritable_folder_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--no-token-auth"), key_file(tmp_path / "no" / "k", 1):
        pass
