"""The tenants file: a TOML `[default]` table and `[tenants."NAME"]` tables, read into policies.

Every mistake is a ConfigError that names the file, the line and the fix. TOML's own errors
carry their line; for a value that parses but makes no sense, `Lines` finds its key's line.
"""

from __future__ import annotations

import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

from modelhost.config.budgets import disk_budget_bytes, memory_budget_bytes
from modelhost.config.settings import Config
from modelhost.config.tenancy import VALID_TENANT, is_tenant_id, name_segments, tenants_on
from modelhost.config.tenant_policies import TRUSTED, UNTRUSTED, TenantPolicies, TenantPolicy
from modelhost.errors import ConfigError
from modelhost.units import MOST_COUNT, format_bytes, parse_size

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEFAULT, TENANTS = "default", "tenants"
EXAMPLE = '[default]\nweight = 1\nrate = 50\n\n[tenants."t007"]\nweight = 4\nmemory_min = "2GiB"'
# a rate's Retry-After at most 11.6 days; a weight's fair counter finite for ever
LEAST = 0.000001
NUMBERS = {
    "weight": f"a number from {LEAST:f} to {MOST_COUNT}",
    "max_concurrency": f"a whole number of requests, 0 (no cap) to {MOST_COUNT}",
    "rate": f"a number of requests a second, 0 (no limit) or {LEAST:f} to {MOST_COUNT}",
    "burst": f"a whole number of requests, 0 to {MOST_COUNT}",
}
COUNTS = ("max_concurrency", "burst")
SIZES = {"memory_min": "memory", "memory_max": "memory", "disk_max": "disk"}
TRUST = "trust"
KEYS = (*NUMBERS, *SIZES, TRUST)
TOML_LINE = re.compile(r"\(at line (\d+), column \d+\)")
HEADER = re.compile(r"\s*\[[^\[\]]+\]\s*(#.*)?")


class Lines:
    """Where each key and table of the file's text is, for messages."""

    def __init__(self, text: str) -> None:
        self.tables: dict[tuple[str, ...], int] = {}
        self.keys: dict[tuple[str, ...], int] = {}
        table: tuple[str, ...] = ()
        for number, line in enumerate(text.splitlines(), 1):
            if HEADER.fullmatch(line) and (found := _table_path(line)) is not None:
                table = found
                self.tables.setdefault(table, number)
            elif match := re.match(r"\s*(\"[^\"]*\"|'[^']*'|[A-Za-z0-9_-]+)\s*=", line):
                self.keys.setdefault((*table, match.group(1).strip("\"'")), number)

    def of(self, *path: str) -> int:
        """The line of the key or table at `path`, else of the nearest table above it."""
        for end in range(len(path), 0, -1):
            found = self.keys.get(path[:end]) or self.tables.get(path[:end])
            if found:
                return found
        return 1


def _table_path(line: str) -> tuple[str, ...] | None:
    """The dotted path of a `[table]` line, quoted names and all, as TOML reads it; None for a
    line that only looks like one (inside a multi-line string)."""
    path: list[str] = []
    try:
        node: Any = tomllib.loads(line)
    except tomllib.TOMLDecodeError:
        return None
    while isinstance(node, dict) and len(node) == 1:
        key = next(iter(node))
        path.append(key)
        node = node[key]
    return tuple(path)


def check_tenants_file(config: Config, cwd: Path) -> None:
    """Refuse at start a tenants file without tenants, or with a mistake."""
    if not config.tenants_file:
        return
    if not tenants_on(config.tenant_from):
        raise ConfigError(
            f"tenants_file {config.tenants_file} is set but tenant_from is off: set "
            "--tenant-from (header, name:N or token) to say whose each request is, or unset "
            "--tenants-file"
        )
    memory_bytes = memory_budget_bytes(config)
    disk_bytes = disk_budget_bytes(config, cwd / config.cache_dir)
    read_tenants_file(cwd / config.tenants_file, memory_bytes, disk_bytes, untrust_refused(config))


def untrust_refused(config: Config) -> str:
    """Why no tenant may be untrusted, with the fix; "" when one may."""
    if not name_segments(config.tenant_from, config.tenant_models):
        return (
            "a model's trust follows its tenant only where the model's place in the store says "
            "whose it is: set --tenant-from name:N (or --tenant-models name:N beside header or "
            "token), or remove the trust key"
        )
    if not config.untrusted_workers and not config.refuse_pickle:
        return (
            "no worker is sandboxed for untrusted models: set --untrusted-workers to how many "
            "of --workers host them, or remove the trust key"
        )
    return ""


def read_tenants_file(
    path: Path,
    memory_budget_bytes: int,
    disk_budget_bytes: int,
    untrust_refused: str = "",
    memory_flag: str = "--memory-budget",
) -> TenantPolicies:
    """The policies `path` gives, sizes and percentages in bytes of the budgets given;
    `untrust_refused`: why no tenant may be untrusted here ("": one may)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(
            f"cannot read the tenants file {path}: {error}; set --tenants-file to a readable "
            "TOML file"
        ) from None
    budgets = {"memory": memory_budget_bytes, "disk": disk_budget_bytes}
    flags = {"memory": memory_flag, "disk": "--disk-budget"}
    return TenantsFile(path, text, budgets, untrust_refused, flags).policies()


class TenantsFile:
    """One reading of a tenants file's text."""

    def __init__(
        self,
        path: Path,
        text: str,
        budgets: dict[str, int],
        untrust_refused: str = "",
        flags: dict[str, str] | None = None,
    ) -> None:
        self.path, self.text = path, text
        self.budgets = budgets  # bytes, by "memory" and "disk"
        self.flags = flags or {"memory": "--memory-budget", "disk": "--disk-budget"}
        self.untrust_refused = untrust_refused

    def policies(self) -> TenantPolicies:
        data = self._parse()
        for table, value in data.items():
            if not isinstance(value, dict) and table not in (DEFAULT, TENANTS):
                self.refuse(
                    (table,),
                    f"{table} is outside any table",
                    'put it under [default] or a [tenants."NAME"] table',
                )
            if table not in (DEFAULT, TENANTS):
                self.refuse(
                    (table,),
                    f"unknown table [{table}]",
                    "a tenants file holds "
                    f'[default] and [tenants."NAME"] tables, such as\n{EXAMPLE}',
                )
        default = self.policy((DEFAULT,), data.get(DEFAULT, {}), TenantPolicy())
        if default.memory_min_bytes:
            self.refuse(
                (DEFAULT, "memory_min"),
                "[default] gives every tenant a memory_min",
                'no budget holds them all: give memory_min to [tenants."NAME"] tables',
            )
        named = {
            name: self.policy((TENANTS, name), table, default)
            for name, table in self.tables(data.get(TENANTS, {})).items()
        }
        self.check_guarantees(named)
        return TenantPolicies(default, named)

    def _parse(self) -> dict[str, Any]:
        try:
            return tomllib.loads(self.text)
        except tomllib.TOMLDecodeError as error:
            found = TOML_LINE.search(str(error))
            line = int(found.group(1)) if found else 1
            what = TOML_LINE.sub("", str(error)).strip()
            raise ConfigError(
                f"{self.path}, line {line}: not valid TOML ({what}); write the line as "
                'key = value under [default] or a [tenants."NAME"] table, the name in quotes, '
                f"such as\n{EXAMPLE}"
            ) from None

    def tables(self, tenants: object) -> dict[str, dict[str, Any]]:
        """The `[tenants."NAME"]` tables, each a table with a name."""
        if not isinstance(tenants, dict):
            self.refuse((TENANTS,), "tenants is not a table", 'write [tenants."NAME"] tables')
        for name, table in tenants.items():
            if not isinstance(table, dict):
                self.refuse(
                    (TENANTS, name),
                    f"tenants.{name} is not a table",
                    f'write its values under a [tenants."{name}"] line',
                )
            if not name.strip():
                self.refuse(
                    (TENANTS, name),
                    "a tenant's name is empty",
                    'name the tenant as requests do, such as [tenants."t007"]',
                )
            if not is_tenant_id(name):  # no request could ever be this tenant
                self.refuse(
                    (TENANTS, name),
                    f"tenant {name!r} is no tenant id",
                    f"{VALID_TENANT}; name the tenant as --tenant-from gives it",
                )
        return tenants

    def policy(self, at: tuple[str, ...], table: object, base: TenantPolicy) -> TenantPolicy:
        """`table`'s values over `base`: a named tenant takes [default]'s for keys it lacks."""
        if not isinstance(table, dict):
            self.refuse(at, f"{at[0]} is not a table", f"write its values under a [{at[0]}] line")
        values: dict[str, Any] = {}
        for key, value in table.items():
            if key not in KEYS:
                self.refuse((*at, key), f"unknown key {key}", f"the keys are {', '.join(KEYS)}")
            values |= self.value((*at, key), key, value)
        policy = replace(base, **values)
        if not policy.rate and "burst" not in table:
            policy = replace(policy, burst=0)
        self.check_policy(at, policy)
        return policy

    def value(self, at: tuple[str, ...], key: str, value: object) -> dict[str, Any]:
        """The TenantPolicy field `key` sets, from its value in the file."""
        if key in SIZES:
            return {f"{key}_bytes": self.size(at, key, value)}
        if key == TRUST:
            return {key: self.trust(at, value)}
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        # NaN and infinity fail the bounds too
        if not (number and 0 <= value <= MOST_COUNT):  # type: ignore[operator]
            ok = False
        elif key in COUNTS:
            ok = isinstance(value, int)
        else:
            ok = value >= LEAST or (key == "rate" and value == 0)  # type: ignore[operator]
        if not ok:
            self.refuse(
                at, f"{key} = {value!r} is not {NUMBERS[key]}", f"write it as, say, {key} = 4"
            )
        return {key: value}

    def trust(self, at: tuple[str, ...], value: object) -> str:
        if value not in (TRUSTED, UNTRUSTED):
            self.refuse(
                at,
                f"trust = {value!r} is not {TRUSTED!r} or {UNTRUSTED!r}",
                f'write trust = "{UNTRUSTED}" for a tenant whose models may not be trusted',
            )
        if value == UNTRUSTED and self.untrust_refused:
            self.refuse(at, f'trust = "{UNTRUSTED}" cannot be honoured', self.untrust_refused)
        return str(value)

    def size(self, at: tuple[str, ...], key: str, value: object) -> int:
        budget = SIZES[key]
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        if isinstance(value, str):
            try:
                return parse_size(value, self.budgets[budget])
            except ConfigError:
                pass
        self.refuse(
            at,
            f"{key} = {value!r} is not a size, nor a share of at most 100%",
            f'write a size or a share of the {budget} budget, such as "2GiB" or "10%"',
        )

    def check_policy(self, at: tuple[str, ...], policy: TenantPolicy) -> None:
        low, high = policy.memory_min_bytes, policy.memory_max_bytes
        if high and low > high:
            self.refuse(
                (*at, "memory_min"),
                f"memory_min ({format_bytes(low)}) is above memory_max ({format_bytes(high)})",
                "lower memory_min or raise memory_max",
            )
        for key in SIZES:
            size, budget = getattr(policy, f"{key}_bytes"), self.budgets[SIZES[key]]
            if size > budget:
                self.refuse(
                    (*at, key),
                    f"{key} ({format_bytes(size)}) is above the "
                    f"{SIZES[key]} budget ({format_bytes(budget)})",
                    f"lower it, or raise {self.flags[SIZES[key]]}",
                )
        if policy.burst and not policy.rate:
            self.refuse(
                (*at, "burst"),
                "burst is set without a rate",
                "give a rate in requests a second, or remove burst",
            )

    def check_guarantees(self, named: dict[str, TenantPolicy]) -> None:
        """The guaranteed minimums must fit in the memory budget together."""
        total = sum(policy.memory_min_bytes for policy in named.values())
        budget = self.budgets["memory"]
        if total > budget:
            last = [name for name, policy in named.items() if policy.memory_min_bytes][-1]
            self.refuse(
                (TENANTS, last, "memory_min"),
                f"the tenants' memory_min add up to "
                f"{format_bytes(total)}, over the memory budget ({format_bytes(budget)})",
                f"lower them, or raise {self.flags['memory']}",
            )

    def refuse(self, at: tuple[str, ...], what: str, fix: str) -> NoReturn:
        raise ConfigError(f"{self.path}, line {Lines(self.text).of(*at)}: {what}; {fix}")
