"""The tenants file: what it gives each tenant, and every mistake refused with its line and fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelhost.config import load_config
from modelhost.config.tenancy import segments_of
from modelhost.config.tenant_policies import TenantPolicies, TenantPolicy
from modelhost.config.tenants_file import read_tenants_file
from modelhost.errors import ConfigError
from modelhost.protocols.tenants import FromName

GIB = 2**30
MEMORY_BYTES, DISK_BYTES = 10 * GIB, 100 * GIB

GOOD = """\
# every tenant the file does not name
[default]
weight = 1
max_concurrency = 8
rate = 50
memory_max = "20%"

[tenants."t007"]
weight = 4
burst = 200
memory_min = "2GiB"
disk_max = "10%"

[tenants."tenants/t012"]
rate = 0
"""


def read(tmp_path: Path, text: str) -> TenantPolicies:
    path = tmp_path / "tenants.toml"
    path.write_text(text)
    return read_tenants_file(path, MEMORY_BYTES, DISK_BYTES)


def test_a_named_tenant_takes_the_defaults_it_does_not_set(tmp_path: Path) -> None:
    policies = read(tmp_path, GOOD)
    default = TenantPolicy(1, 8, 50, 0, memory_max_bytes=2 * GIB)
    assert policies.default == default
    assert policies.of("someone") == default
    assert policies.of("t007") == TenantPolicy(4, 8, 50, 200, 2 * GIB, 2 * GIB, 10 * GIB)
    assert policies.of("tenants/t012").rate == 0


def test_a_tenant_freed_of_the_default_rate_drops_its_burst(tmp_path: Path) -> None:
    """rate = 0 takes a tenant out of [default]'s rate, burst and all; a burst of its own
    without a rate is still a mistake."""
    text = '[default]\nrate = 5\nburst = 10\n\n[tenants."a"]\nrate = 0\n'
    assert read(tmp_path, text).of("a") == TenantPolicy(rate=0, burst=0)
    with pytest.raises(ConfigError, match="line 7: burst is set without a rate"):
        read(tmp_path, text + "burst = 3\n")


def test_an_empty_file_gives_every_tenant_the_defaults(tmp_path: Path) -> None:
    assert read(tmp_path, "# nothing yet\n") == TenantPolicies()


MISTAKES = [
    ("[default]\nweight = \n", 2, "not valid TOML", "key = value"),
    ("[default]\nweight = 1\n\n[quotas]\nrate = 1\n", 4, "unknown table [quotas]", "[default]"),
    ('[default]\nrate = 5\n\n[tenants."a"]\nweigth = 2\n', 5, "unknown key weigth", "the keys"),
    ("[default]\nweight = -1\n", 2, "weight = -1 is not a number from 0.000001", "weight = 4"),
    ("[default]\nweight = 0\n", 2, "weight = 0 is not a number from 0.000001", "weight = 4"),
    ("[default]\nmax_concurrency = 2.5\n", 2, "not a whole number", "max_concurrency = 4"),
    ('[default]\nrate = "fast"\n', 2, "rate = 'fast' is not a number", "rate = 4"),
    ("[default]\nburst = 5\n", 2, "burst is set without a rate", "give a rate"),
    (
        '[tenants."a"]\nmemory_max = "1GiB"\nmemory_min = "2GiB"\n',
        3,
        "memory_min (2.0 GiB) is above memory_max (1.0 GiB)",
        "lower memory_min or raise memory_max",
    ),
    (
        '[tenants."a"]\nmemory_min = "60%"\n[tenants."b"]\nmemory_min = "50%"\n',
        4,
        "add up to 11.0 GiB, over the memory budget (10.0 GiB)",
        "raise --memory-budget",
    ),
    (
        '[default]\nmemory_min = "1GiB"\n',
        2,
        "[default] gives every tenant a memory_min",
        '[tenants."NAME"]',
    ),
    ('[tenants."a"]\ndisk_max = "lots"\n', 2, "disk_max = 'lots' is not a size", '"10%"'),
    ('[tenants."a"]\nmemory_max = "11GiB"\n', 2, "above the memory budget", "--memory-budget"),
    ('[tenants."a"]\nmemory_max = "101%"\n', 2, "nor a share of at most 100%", '"10%"'),
    ("[tenants]\na = 3\n", 2, "tenants.a is not a table", '[tenants."a"]'),
    ("default = 3\n", 1, "default is not a table", "[default]"),
    ("# limits\nrate = 5\n[default]\n", 2, "rate is outside any table", "under [default]"),
    ('[default]\nrate = 1\n[tenants."a"]\nburst = -3\n', 4, "burst = -3 is not a whole", "burst"),
    ('[default]\nrate = 1\n[tenants."t 007"]\nrate = 2\n', 3, "'t 007' is no tenant id", "ASCII"),
    ("[default]\nrate = 1\n[tenants.tenants/t007]\n", 3, "not valid TOML", '[tenants."NAME"]'),
    # a Retry-After of 300 digits; counters that reach infinity and order no one
    ('[tenants."a"]\nrate = 1e-300\n', 2, "rate = 1e-300 is not a number", "0.000001 to"),
    ('[tenants."a"]\nweight = 1e-300\n', 2, "weight = 1e-300 is not a number", "0.000001 to"),
    ('[tenants."a"]\nweight = 1e300\n', 2, "weight = 1e+300 is not a number", "2147483647"),
    (f'[tenants."a"]\nmax_concurrency = {10**20}\n', 2, "not a whole number", "2147483647"),
    (f"[default]\nrate = 1\nburst = {10**20}\n", 3, "not a whole number", "2147483647"),
]


@pytest.mark.parametrize(("text", "line", "what", "fix"), MISTAKES)
def test_a_mistake_names_its_line_and_fix(
    text: str, line: int, what: str, fix: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError) as refused:
        read(tmp_path, text)
    message = str(refused.value)
    assert message.startswith(f"{tmp_path / 'tenants.toml'}, line {line}: "), message
    assert what in message and fix in message, message


def test_a_quoted_table_name_with_dots_finds_its_line(tmp_path: Path) -> None:
    text = '[default]\nrate = 1\n\n[ tenants . "a.b/c" ]\n# why\nweight = -2\n'
    with pytest.raises(ConfigError, match=r"line 6: weight = -2"):
        read(tmp_path, text)


def test_a_header_inside_a_string_is_not_taken_for_one(tmp_path: Path) -> None:
    text = '[default]\nrate = """\n[a b]\n"""\n'
    with pytest.raises(ConfigError, match=r"line 2: rate = .* is not a number"):
        read(tmp_path, text)


def test_a_missing_file_says_which(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the tenants file .*--tenants-file"):
        read_tenants_file(tmp_path / "absent.toml", MEMORY_BYTES, DISK_BYTES)


def test_a_tenants_file_needs_tenants_on(tmp_path: Path) -> None:
    (tmp_path / "tenants.toml").write_text(GOOD)
    with pytest.raises(ConfigError, match="tenants_file .* is set but tenant_from is off"):
        load_config({"tenants_file": "tenants.toml"}, {}, tmp_path)


def test_load_config_refuses_a_bad_tenants_file(tmp_path: Path) -> None:
    (tmp_path / "tenants.toml").write_text("[default]\nweight = -1\n")
    flags = {"tenant_from": "header", "tenants_file": "tenants.toml"}
    with pytest.raises(ConfigError, match="tenants.toml, line 2: weight = -1"):
        load_config(flags, {}, tmp_path)


def test_the_setting_is_read_from_the_environment(tmp_path: Path) -> None:
    (tmp_path / "tenants.toml").write_text(GOOD)
    environ = {"MODELHOST_TENANT_FROM": "header", "MODELHOST_TENANTS_FILE": "tenants.toml"}
    assert load_config({}, environ, tmp_path).tenants_file == "tenants.toml"


def test_the_pages_example_is_taken_as_its_tenants_are_named(tmp_path: Path) -> None:
    """docs/tenants.md's tenants file, under the rule its trust needs: it loads, and every tenant
    it names is one that rule gives a model in the store."""
    page = (Path(__file__).parents[2] / "docs" / "tenants.md").read_text()
    example = page.partition("## The tenants file")[2].partition("```toml\n")[2].partition("```")[0]
    (tmp_path / "tenants.toml").write_text(example)
    flags = {"tenant_from": "name:2", "tenants_file": "tenants.toml", "memory_budget": "4GiB"}
    config = load_config({**flags, "workers": 2, "untrusted_workers": 1}, {}, tmp_path)
    policies = read_tenants_file(tmp_path / "tenants.toml", 4 * GIB, DISK_BYTES)
    rule = FromName(segments_of(config.tenant_from))
    assert all(rule.of(f"{name}/churn.joblib", {}) == name for name in policies.named)


def test_config_check_reads_a_tenants_file_given_alone(tmp_path: Path) -> None:
    """`modelhost config check tenants.toml` checks it as the server would, under the
    environment's rule, and says how to give a rule when there is none."""
    from click.testing import CliRunner

    from modelhost.cli.main import main

    path = tmp_path / "tenants.toml"
    path.write_text('[default]\nweight = 2\n\n[tenants."t007"]\nrate = 5\n')
    check = ["config", "check", str(path)]
    result = CliRunner().invoke(main, check, env={"MODELHOST_TENANT_FROM": "header"})
    assert result.exit_code == 0, result.output
    assert "unknown" not in result.output
    path.write_text("[default]\nweight = 0\n")
    result = CliRunner().invoke(main, check, env={"MODELHOST_TENANT_FROM": "header"})
    assert result.exit_code == 1 and "line 2: weight = 0" in result.output, result.output
    result = CliRunner().invoke(main, check, env={"MODELHOST_TENANT_FROM": ""})
    assert result.exit_code == 1, result.output
    assert f"MODELHOST_TENANT_FROM=header modelhost config check {path}" in result.output
