"""A tenant's trust in the tenants file, and --untrusted-workers: honoured only where a model's
tenant is its place in the store and some worker is sandboxed; every mistake refused with its
line (or its setting) and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelhost.config import Config, load_config
from modelhost.config.tenant_policies import TenantPolicies, TenantPolicy, Trust
from modelhost.errors import ConfigError

UNTRUSTED = '[default]\nrate = 5\n\n[tenants."evil"]\ntrust = "untrusted"\n'
BY_NAME = {"tenant_from": "name:1", "tenants_file": "tenants.toml", "workers": 2}


def config_of(tmp_path: Path, text: str, **flags: object) -> Config:
    (tmp_path / "tenants.toml").write_text(text)
    return load_config({**BY_NAME, **flags}, {}, tmp_path)


def test_an_untrusted_tenant_is_read_where_it_can_be_honoured(tmp_path: Path) -> None:
    config = config_of(tmp_path, UNTRUSTED, untrusted_workers=1)
    assert config.untrusted_workers == 1


@pytest.mark.parametrize(
    ("flags", "fix"),
    [
        ({"untrusted_workers": 0}, "set --untrusted-workers"),
        ({"tenant_from": "header", "untrusted_workers": 0}, "--tenant-from name:N"),
    ],
)
def test_an_untrusted_tenant_nobody_can_sandbox_is_refused_at_its_line(
    tmp_path: Path, flags: dict[str, object], fix: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        config_of(tmp_path, UNTRUSTED, **flags)
    message = str(refused.value)
    assert 'tenants.toml, line 5: trust = "untrusted" cannot be honoured' in message
    assert fix in message, message


def test_a_trust_that_is_neither_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="line 2: trust = 'maybe' is not 'trusted' or"):
        config_of(tmp_path, '[tenants."a"]\ntrust = "maybe"\n', untrusted_workers=1)


@pytest.mark.parametrize(
    ("flags", "fix"),
    [
        ({"refuse_pickle": True}, "unset --untrusted-workers"),
        ({"tenant_from": "header"}, "set --tenant-from name:N"),
    ],
)
def test_untrusted_workers_without_their_conditions_are_refused(
    tmp_path: Path, flags: dict[str, object], fix: str
) -> None:
    with pytest.raises(ConfigError, match=fix):
        config_of(tmp_path, "", untrusted_workers=1, **flags)


def test_a_models_trust_follows_its_tenant_by_name() -> None:
    policies = TenantPolicies()
    untrusted = Trust(False, lambda name: name.split("/")[0], lambda: policies)
    assert untrusted.why_untrusted("evil/m.onnx") == ""
    policies = TenantPolicies(named={"evil": TenantPolicy(trust="untrusted")})
    assert "tenant evil" in untrusted.why_untrusted("evil/m.onnx")
    assert untrusted.why_untrusted("good/m.onnx") == ""
    assert Trust(True).why_untrusted("good/m.onnx") == "--refuse-pickle"
