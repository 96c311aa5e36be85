"""The tenant settings: `tenant_from`'s rule, and the tokens file `token` reads, checked at start.

The rule itself, applied to requests, is `modelhost.protocols.tenants`.
"""

from __future__ import annotations

import re
import string
import sys
from pathlib import Path
from typing import NamedTuple

from modelhost.errors import ConfigError
from modelhost.names import MAX_NAME_BYTES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEFAULT_HEADER = "x-modelhost-tenant"
OFF = ("", "off")
# a name of MAX_NAME_BYTES has no more segments
MOST_SEGMENTS = MAX_NAME_BYTES // 2
FORMS = (
    f"header, header:NAME, name:N (N a whole number from 1 to {MOST_SEGMENTS}), token, or "
    "empty (off)"
)
HEADER_NAME = re.compile(r"[a-z0-9!#$%&'*+.^_`|~-]+")  # an HTTP token, lower-case as gRPC's keys
MAX_TENANT_CHARS = 128  # of a tenant id: a metric label, a log field, a file's key
TENANT_CHARACTERS = frozenset(string.ascii_letters + string.digits + "-_.:@/")
VALID_TENANT = (
    f"a tenant id is 1 to {MAX_TENANT_CHARS} characters of ASCII letters, digits and - _ . : @ /"
)
TOKENS_TABLE = "tokens"
TOKENS_EXAMPLE = '[tokens]\n"<token>" = "<tenant>"'

TokenPairs = tuple[tuple[str, str], ...]


class TenantFrom(NamedTuple):
    """What `tenant_from` names: a header, the name's leading segments, or the bearer token."""

    kind: str  # header | name | token
    header: str = ""  # lower-case
    segments: int = 0


def is_tenant_id(text: str) -> bool:
    return 0 < len(text) <= MAX_TENANT_CHARS and TENANT_CHARACTERS.issuperset(text)


def tenants_on(tenant_from: str) -> bool:
    return parse_tenant_from(tenant_from) is not None


def reads_token(tenant_from: str) -> bool:
    """Whether the rule is `token`, however it is spelled."""
    rule = parse_tenant_from(tenant_from)
    return rule is not None and rule.kind == "token"


def segments_of(tenant_from: str) -> int:
    """How many leading segments of a model's name are its tenant; 0: the rule reads no names."""
    rule = parse_tenant_from(tenant_from)
    return rule.segments if rule is not None and rule.kind == "name" else 0


def parse_tenant_from(text: str) -> TenantFrom | None:
    """The rule `text` names; None: tenants are off."""
    kind, colon, argument = text.strip().partition(":")
    kind = kind.lower()
    if kind in OFF and not colon:
        return None
    if kind == "header":
        return TenantFrom("header", header=_header(argument.strip().lower() if colon else ""))
    segments = int(argument) if argument.isascii() and argument.isdigit() else 0
    if kind == "name" and 0 < segments <= MOST_SEGMENTS:
        return TenantFrom("name", segments=segments)
    if kind == "token" and not colon:
        return TenantFrom("token")
    raise ConfigError(
        f"tenant_from {text!r} names no rule: give {FORMS}, e.g. --tenant-from name:2 for "
        "tenants/t007/churn.joblib to belong to tenants/t007"
    )


def name_segments(tenant_from: str, tenant_models: str) -> int:
    """How many leading segments of a model's name say whose it is; 0: its first loader's."""
    return segments_of(tenant_from) or own_models_segments(tenant_models, tenant_from)


def own_models_segments(tenant_models: str, tenant_from: str) -> int:
    """The N of `tenant_models`'s name:N, 0 while it is off; a ConfigError where it is another
    form, or `tenant_from` does not name tenants by header or token."""
    kind, _, argument = tenant_models.strip().partition(":")
    if kind.lower() in OFF and not argument:
        return 0
    segments = int(argument) if argument.isascii() and argument.isdigit() else 0
    if kind.lower() != "name" or not 0 < segments <= MOST_SEGMENTS:
        raise ConfigError(
            f"tenant_models {tenant_models!r} is not name:N (N a whole number from 1 to "
            f"{MOST_SEGMENTS}): give e.g. --tenant-models name:2 to keep tenants/t007 to "
            "tenants/t007/*, or leave it empty"
        )
    rule = parse_tenant_from(tenant_from)
    if rule is None or rule.kind == "name":
        raise ConfigError(
            f"tenant_models keeps a tenant named by a header or a token to its own models, but "
            f"tenant_from is {tenant_from!r}: set --tenant-from header or token, or unset "
            "--tenant-models (under name:N each model is its own tenant's already)"
        )
    return segments


def _header(name: str) -> str:
    if not name:
        return DEFAULT_HEADER
    if name == "authorization":
        raise ConfigError(
            "tenant_from header:Authorization would log bearer tokens as tenant ids: set "
            "--tenant-from token, with --tenant-tokens-file mapping each token to its tenant"
        )
    if not HEADER_NAME.fullmatch(name):
        raise ConfigError(
            f"tenant_from header:{name} names no header: give a header name such as "
            "header:X-Customer (letters, digits and -)"
        )
    return name


def tenant_tokens(tenant_from: str, tokens_file: str, cwd: Path) -> TokenPairs:
    """The tokens file's pairs where `tenant_from` is token; a setting without its partner is
    refused."""
    wants_tokens = reads_token(tenant_from)
    if wants_tokens and not tokens_file:
        raise ConfigError(
            "tenant_from token reads each request's bearer token, but no tokens file says "
            "whose it is: set --tenant-tokens-file FILE (MODELHOST_TENANT_TOKENS_FILE), a TOML "
            f"file such as\n{TOKENS_EXAMPLE}"
        )
    if tokens_file and not wants_tokens:
        raise ConfigError(
            f"tenant_tokens_file {tokens_file} is set but tenant_from is {tenant_from!r}: set "
            "--tenant-from token to read the tenant from the bearer token, or unset "
            "--tenant-tokens-file"
        )
    return read_tenant_tokens(cwd / tokens_file) if wants_tokens else ()


def read_tenant_tokens(path: Path) -> TokenPairs:
    """(token, tenant) pairs from a TOML file's `[tokens]` table; no message shows a token."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(
            f"cannot read the tenant tokens file {path}: {error}; set --tenant-tokens-file to a "
            "readable TOML file"
        ) from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(
            f"{path}: not valid TOML: {error}; write each token and its tenant as quoted text, "
            f"under one [tokens] table:\n{TOKENS_EXAMPLE}"
        ) from None
    tokens = data.get(TOKENS_TABLE)
    if set(data) != {TOKENS_TABLE} or not isinstance(tokens, dict) or not tokens:
        raise ConfigError(
            f"{path} must hold one [tokens] table, a line per token and its tenant:\n"
            f"{TOKENS_EXAMPLE}"
        )
    for number, (token, tenant) in enumerate(tokens.items(), 1):
        if not token.strip() or not isinstance(tenant, str) or not tenant:
            raise ConfigError(
                f"{path}: token {number} of [tokens] needs a non-empty token and a tenant's "
                f'name as text, such as "<token>" = "t007"'
            )
        if not is_tenant_id(tenant):  # refused before anything starts, the token unsaid
            raise ConfigError(
                f"invalid tenant {tenant!r} from token {number} of {path}: {VALID_TENANT}; fix "
                "the tenant tokens file"
            )
    return tuple(tokens.items())
