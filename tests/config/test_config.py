"""The config tree: precedence, sources, the config.properties mapping, sizes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from modelhost.config import Config, cli_options, load_config
from modelhost.errors import ConfigError
from modelhost.units import ByteBudget, format_bytes, parse_budget, parse_size

GiB = 1024**3


def write(path: Path, text: str) -> Path:
    """Write a config file and return its path."""
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_without_files_or_environment(tmp_path: Path) -> None:
    config = load_config({}, {}, tmp_path)
    assert config == Config()
    assert config.port == 8080 and config.memory_budget == "80%" and config.notices == ()


# Each pair of adjacent sources: the higher one wins over the lower one.
PRECEDENCE = [
    ("flags", "env", 1111),
    ("env", "toml", 2222),
    ("toml", "props", 3333),
    ("props", "default", 4444),
]


@pytest.mark.parametrize(("winner", "loser", "port"), PRECEDENCE)
def test_precedence(tmp_path: Path, winner: str, loser: str, port: int) -> None:
    sources = {winner: port, loser: 9}  # "default" is the built-in 8080 and is never written
    flags = {"port": str(sources["flags"])} if "flags" in sources else {}
    environ = {"MODELHOST_PORT": str(sources["env"])} if "env" in sources else {}
    if "toml" in sources:
        write(tmp_path / "modelhost.toml", f"port = {sources['toml']}\n")
    if "props" in sources:
        write(tmp_path / "config.properties", f"inference_address=http://h:{sources['props']}\n")
    assert load_config(flags, environ, tmp_path).port == port


def test_every_layer_contributes_its_own_settings(tmp_path: Path) -> None:
    write(tmp_path / "config.properties", "job_queue_size=7\nbatch_size=3\n")
    write(tmp_path / "modelhost.toml", 'batch_size = 4\ncache_dir = "/c"\nworkers = 2\n')
    environ = {"MODELHOST_WORKERS": "5", "MODELHOST_LOG_LEVEL": "DEBUG"}
    config = load_config({"log_level": "error"}, environ, tmp_path)
    assert (config.job_queue_size, config.batch_size, config.cache_dir) == (7, 4, "/c")
    assert (config.workers, config.log_level) == (5, "error")


def test_files_saved_with_a_byte_order_mark_read_as_without(tmp_path: Path) -> None:
    """Windows' Notepad starts UTF-8 files with a BOM, which TOML parsers take for a statement."""
    bom = "\ufeff"
    write(tmp_path / "config.properties", bom + "job_queue_size=7\n")
    write(tmp_path / "modelhost.toml", bom + "workers = 2\n")
    write(tmp_path / "tokens.toml", bom + '[tokens]\n"tok" = "acme"\n')
    write(tmp_path / "tenants.toml", bom + "[default]\nweight = 2\n")
    flags = {"tenant_from": "token", "tenant_tokens_file": "tokens.toml", "token_auth": False}
    config = load_config({**flags, "tenants_file": "tenants.toml"}, {}, tmp_path)
    assert (config.job_queue_size, config.workers) == (7, 2)
    assert config.tenant_tokens == (("tok", "acme"),)


def test_file_locations_from_flags_and_environment(tmp_path: Path) -> None:
    toml = write(tmp_path / "a.toml", "port = 1\n")
    props = write(tmp_path / "mms.properties", "model_store=/store\n")
    config = load_config({"config": "a.toml"}, {"MMS_CONFIG_FILE": str(props)}, tmp_path)
    assert (config.port, config.model_store) == (1, "/store")
    config = load_config({}, {"MODELHOST_CONFIG": str(toml), "TS_CONFIG_FILE": str(props)})
    assert (config.port, config.model_store) == (1, "/store")
    config = load_config({"mms_config": str(props)}, {}, tmp_path)
    assert config.model_store == "/store"


def test_named_file_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="MODELHOST_CONFIG: no such file"):
        load_config({}, {"MODELHOST_CONFIG": "missing.toml"}, tmp_path)
    with pytest.raises(ConfigError, match="--mms-config: no such file"):
        load_config({"mms_config": "missing.properties"}, {}, tmp_path)


def test_sagemaker_variables(tmp_path: Path) -> None:
    environ = {
        "SAGEMAKER_BIND_TO_PORT": "8081",
        "SAGEMAKER_MODEL_SERVER_WORKERS": "3",
        "SAGEMAKER_MODEL_SERVER_TIMEOUT": "30",
        "SAGEMAKER_MULTI_MODEL": "false",
        "MODELHOST_SINGLE_MODEL": "model",
    }
    config = load_config({}, environ, tmp_path)
    assert (config.port, config.workers_per_model) == (8081, 3)
    assert config.default_response_timeout_s == 30.0
    assert config.multi_model is False


def test_modelhost_variable_wins_over_sagemaker_variable(tmp_path: Path) -> None:
    environ = {"SAGEMAKER_BIND_TO_PORT": "8081", "MODELHOST_PORT": "8082"}
    assert load_config({}, environ, tmp_path).port == 8082


def test_empty_variable_counts_as_unset(tmp_path: Path) -> None:
    assert load_config({}, {"SAGEMAKER_BIND_TO_PORT": ""}, tmp_path).port == 8080


PROPERTIES = """\
# TorchServe settings
inference_address=http://0.0.0.0:8085
management_address=http://0.0.0.0:8086
model_store = /opt/ml/models
load_models: ALL
default_workers_per_model 2
job_queue_size=50
preload_model=true
default_response_timeout=120
max_request_size=65535000
max_response_size=6553500
batch_size=8
max_batch_delay=100
number_of_netty_threads=4
enable_envvars_config=true
"""


def test_properties_mapping(tmp_path: Path) -> None:
    write(tmp_path / "config.properties", PROPERTIES)
    config = load_config({}, {}, tmp_path)
    assert (config.host, config.port) == ("0.0.0.0", 8085)
    assert (config.model_store, config.load_models) == ("/opt/ml/models", ("ALL",))
    assert (config.workers_per_model, config.job_queue_size) == (2, 50)
    assert config.default_response_timeout_s == 120.0
    assert (config.max_request_bytes, config.max_response_bytes) == (65535000, 6553500)
    assert (config.batch_size, config.max_batch_delay_ms) == (8, 100)


def test_properties_keys_without_meaning_become_notices(tmp_path: Path) -> None:
    path = write(tmp_path / "config.properties", PROPERTIES)
    notices = load_config({}, {}, tmp_path).notices
    netty = f"{path}: 'number_of_netty_threads' tunes MMS/TorchServe's Java frontend"
    assert any(notice.startswith(netty) for notice in notices)
    assert any(
        notice.startswith(f"{path}: 'enable_envvars_config' is always on") for notice in notices
    )
    preload = [n for n in notices if "'preload_model'" in n]
    assert preload and "not shared" in preload[0] and "template" in preload[0]
    assert len(notices) == 3


def test_properties_load_models_list_and_continuation(tmp_path: Path) -> None:
    write(tmp_path / "config.properties", "load_models=a, b=b.mar,\\\n    c\n! comment\n")
    assert load_config({}, {}, tmp_path).load_models == ("a", "b=b.mar", "c")


def test_properties_bad_address(tmp_path: Path) -> None:
    write(tmp_path / "config.properties", "inference_address=http://0.0.0.0:port\n")
    with pytest.raises(ConfigError, match="inference_address: expected an address"):
        load_config({}, {}, tmp_path)


def test_lists_in_each_source(tmp_path: Path) -> None:
    write(tmp_path / "modelhost.toml", 'load_models = ["a", "b=s3://x/b.tar.gz"]\n')
    assert load_config({}, {}, tmp_path).load_models == ("a", "b=s3://x/b.tar.gz")
    environ = {"MODELHOST_PINNED_MODELS": "x, y"}
    assert load_config({"load_models": "c"}, environ, tmp_path).load_models == ("c",)
    assert load_config({}, environ, tmp_path).pinned_models == ("x", "y")


def test_unknown_toml_key_is_an_error_naming_valid_keys(tmp_path: Path) -> None:
    path = write(tmp_path / "modelhost.toml", "prot = 8080\n")
    with pytest.raises(ConfigError) as info:
        load_config({}, {}, tmp_path)
    message = str(info.value)
    assert str(path) in message and "prot" in message and "did you mean port" in message
    assert "memory_budget" in message


def test_unknown_modelhost_variable_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="MODELHOST_MEMORY_BUGDET.*MODELHOST_MEMORY_BUDGET"):
        load_config({}, {"MODELHOST_MEMORY_BUGDET": "1GiB"}, tmp_path)


def test_invalid_toml(tmp_path: Path) -> None:
    write(tmp_path / "modelhost.toml", "port = = 1\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config({}, {}, tmp_path)


@pytest.mark.parametrize(
    ("flags", "environ", "toml", "message"),
    [
        ({"port": "abc"}, {}, "", "--port: expected a whole number, got 'abc'"),
        (
            {},
            {"MODELHOST_MEMORY_BUDGET": "12 parsecs"},
            "",
            "MODELHOST_MEMORY_BUDGET: expected a size",
        ),
        ({}, {}, 'disk_budget = "lots"', "modelhost.toml: disk_budget: expected a size"),
        ({}, {}, "port = 80.5", "modelhost.toml: port: expected a whole number"),
        ({"port": "70000"}, {}, "", "--port: expected at most 65535"),
        ({"max_request_size": "50%"}, {}, "", "--max-request-size: expected a size"),
        ({"max_request_size": "0"}, {}, "", "expected a size above zero"),
        (
            {},
            {"SAGEMAKER_MULTI_MODEL": "maybe"},
            "",
            "SAGEMAKER_MULTI_MODEL: expected true or false",
        ),
        ({"log_level": "loud"}, {}, "", "--log-level: expected one of debug, info"),
        ({"eviction_policy": "fifo"}, {}, "", "--eviction-policy: expected one of lru, cost-aware"),
        ({}, {"MODELHOST_ADMISSION": "bloom"}, "", "MODELHOST_ADMISSION: expected one of none"),
        ({"min_residency_s": "-1"}, {}, "", "--min-residency-s: expected at least 0"),
        (
            {"preload_runtimes": "xgboost,tensorflow"},
            {},
            "",
            "--preload-runtimes: expected each one of sklearn, xgboost, lightgbm, onnxruntime, "
            "torch, torchserve",
        ),
        ({"drain_timeout_s": "nan"}, {}, "", "--drain-timeout-s: expected a number"),
        ({"batch_size": "-1"}, {}, "", "--batch-size: expected at least 0"),
        ({"prot": "1"}, {}, "", "unknown setting prot"),
    ],
)
def test_bad_values_name_their_source(
    tmp_path: Path, flags: dict[str, str], environ: dict[str, str], toml: str, message: str
) -> None:
    write(tmp_path / "modelhost.toml", toml)
    with pytest.raises(ConfigError) as info:
        load_config(flags, environ, tmp_path)
    assert message in str(info.value)


def test_typed_values_from_toml(tmp_path: Path) -> None:
    text = 'max_request_size = 1000\ndrain_timeout_s = 3\nmulti_model = false\nhost = "::"\n'
    text += 'single_model = "m"\n'
    write(tmp_path / "modelhost.toml", text)
    config = load_config({}, {}, tmp_path)
    assert (config.max_request_size, config.drain_timeout_s) == ("1000", 3.0)
    assert config.max_request_bytes == 1000
    assert (config.multi_model, config.host) == (False, "::")


def test_every_setting_has_a_flag_and_a_variable() -> None:
    read = ("notices", "tenant_tokens", "preload_runtimes_given")  # load_config's, no setting
    settings = [f.name for f in dataclasses.fields(Config) if f.init and f.name not in read]
    options = {o.name: o for o in cli_options()}
    assert set(options) == {*settings, "config", "mms_config"}
    assert options["default_response_timeout_s"].flag == "--default-response-timeout-s"
    assert "MODELHOST_MEMORY_BUDGET" in options["memory_budget"].help
    assert options["multi_model"].is_bool


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1000000", 1_000_000),
        ("600MiB", 600 * 1024**2),
        ("4GiB", 4 * GiB),
        ("1.5G", int(1.5 * GiB)),
        ("2 GB", 2_000_000_000),
        ("10k", 10 * 1024),
        ("10KB", 10_000),
        ("512Mi", 512 * 1024**2),
        ("7b", 7),
        ("1TiB", 1024**4),
    ],
)
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


def test_parse_size_percent() -> None:
    assert parse_size("80%", 1000) == 800
    assert parse_size("12.5%", 8 * GiB) == GiB
    with pytest.raises(ConfigError, match="percentage is not allowed"):
        parse_size("80%")
    with pytest.raises(ConfigError, match="at most 100%"):
        parse_size("150%", 1000)


@pytest.mark.parametrize("text", ["", "12 parsecs", "-1", "1.5.5G", "GiB", "1e3", "1 2"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(ConfigError, match="not a size"):
        parse_size(text)


def test_sizes_parse_at_load_shares_at_start(tmp_path: Path) -> None:
    """Sizes are parsed once at load and shares taken at start."""
    write(tmp_path / "modelhost.toml", 'memory_budget = "2GiB"\nmax_unpacked_bytes = "16MiB"\n')
    config = load_config({"disk_budget": "12.5%"}, {}, tmp_path)
    assert (config.memory_budget_bytes.of(10 * GiB), config.unpacked_limit_bytes) == (
        2 * GiB,
        16 * 1024**2,
    )
    assert config.disk_budget_bytes.of(8 * GiB) == parse_size("12.5%", 8 * GiB) == GiB
    assert Config().memory_budget_bytes == parse_budget("80%") == ByteBudget(share=0.8)


def test_format_bytes() -> None:
    assert format_bytes(512) == "512 B"
    assert format_bytes(600 * 1024**2) == "600.0 MiB"
    assert format_bytes(int(1.2 * GiB)) == "1.2 GiB"


@given(st.integers(min_value=0, max_value=2**60))
def test_format_then_parse_round_trips_within_rounding(n: int) -> None:
    text = format_bytes(n)
    unit_bytes = parse_size("1" + text.split()[1])
    assert abs(parse_size(text) - n) <= 0.05 * unit_bytes + 1


@given(st.floats(min_value=0, max_value=100), st.integers(min_value=0, max_value=2**50))
def test_percent_is_a_share_of_the_whole(percent: float, whole_bytes: int) -> None:
    size_bytes = parse_size(f"{percent:.4f}%", whole_bytes)
    assert 0 <= size_bytes <= whole_bytes
    assert abs(size_bytes - round(percent, 4) / 100 * whole_bytes) <= 1 + whole_bytes * 1e-12


def test_runtimes_to_preload_are_a_list_of_known_ones(tmp_path: Path) -> None:
    default = ("sklearn", "xgboost", "lightgbm", "onnxruntime")
    assert load_config({}, {}, tmp_path).preload_runtimes == default
    environ = {"MODELHOST_PRELOAD_RUNTIMES": "Torch, onnxruntime"}
    assert load_config({}, environ, tmp_path).preload_runtimes == ("torch", "onnxruntime")
    write(tmp_path / "modelhost.toml", "idle_unload_s = 300\n")
    assert load_config({}, {}, tmp_path).idle_unload_s == 300.0


def test_cache_policies_come_from_flags_variables_and_files(tmp_path: Path) -> None:
    write(tmp_path / "modelhost.toml", "min_residency_s = 2.5\n")
    environ = {"MODELHOST_ADMISSION": "tinylfu"}
    config = load_config({"eviction_policy": "cost-aware"}, environ, tmp_path)
    assert (config.eviction_policy, config.admission, config.min_residency_s) == (
        "cost-aware",
        "tinylfu",
        2.5,
    )


def test_every_configurable_policy_exists_in_the_cache() -> None:
    from modelhost.cache.policy import POLICIES
    from modelhost.config import EVICTION_POLICIES

    assert set(EVICTION_POLICIES) == set(POLICIES)
    assert Config().eviction_policy == "cost-aware" and Config().admission == "tinylfu"


def test_the_sagemaker_contract_filters_no_victims_by_default(tmp_path: Path) -> None:
    """Under the contract no load evicts, so admission defaults to none, and is refused if set."""
    config = load_config({"sagemaker_contract": True}, {}, tmp_path)
    assert config.admission == "none"
    with pytest.raises(ConfigError, match="admission"):
        load_config({"sagemaker_contract": True, "admission": "tinylfu"}, {}, tmp_path)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"grpc_port": "8080"}, "--grpc-port 8080 is also --port"),
        ({"metrics_port": "8080"}, "--metrics-port 8080 is also --port"),
        ({"management_port": "8081", "grpc_management_port": "8081"}, "also --management-port"),
    ],
)
def test_two_listeners_on_one_port_are_refused(
    tmp_path: Path, flags: dict[str, str], message: str
) -> None:
    """Else the second to bind fails after the models loaded, told to change the wrong flag."""
    with pytest.raises(ConfigError, match=message):
        load_config(flags, {}, tmp_path)


def test_ports_shared_as_asked_or_on_other_addresses_are_taken(tmp_path: Path) -> None:
    assert load_config({"management_port": "8080"}, {}, tmp_path).management_port == 8080
    apart = {"metrics_port": "8080", "metrics_host": "10.0.0.2", "host": "10.0.0.1"}
    assert load_config(apart, {}, tmp_path).metrics_port == 8080


def test_empty_variable_sets_its_setting_to_empty(tmp_path: Path) -> None:
    """`MODELHOST_TENANT_FROM=` turns off what the file turned on, as an environment beats a
    file; an empty variable is a value given, not one left out."""
    write(tmp_path / "modelhost.toml", 'tenant_from = "header"\nallowed_urls = ["s3://*"]\n')
    environ = {"MODELHOST_TENANT_FROM": "", "MODELHOST_ALLOWED_URLS": ""}
    config = load_config({}, environ, tmp_path)
    assert (config.tenant_from, config.allowed_urls) == ("", ())


@pytest.mark.parametrize("variable", ["MODELHOST_MEMORY_BUDGET", "MODELHOST_PORT"])
def test_empty_variable_of_a_number_is_refused(tmp_path: Path, variable: str) -> None:
    with pytest.raises(ConfigError, match=f"{variable}: expected .*, got ''"):
        load_config({}, {variable: ""}, tmp_path)


def test_empty_config_variable_reads_no_file(tmp_path: Path) -> None:
    write(tmp_path / "modelhost.toml", "port = 1\n")
    assert load_config({}, {"MODELHOST_CONFIG": ""}, tmp_path).port == Config().port


@pytest.mark.parametrize("variable", ["MODELHOST_HOST", "MODELHOST_CACHE_DIR", "MODELHOST_DEVICES"])
def test_empty_text_with_a_default_is_refused(tmp_path: Path, variable: str) -> None:
    """An empty --cache-dir would be the working folder, an empty --host every address."""
    with pytest.raises(ConfigError, match=f"{variable}: expected a value .*default"):
        load_config({}, {variable: ""}, tmp_path)


NUMBERS = [  # those without a lower maximum of their own
    f.name
    for f in dataclasses.fields(Config)
    if f.init and type(f.default) in (int, float) and (f.metadata["maximum"] or 2**31) >= 2**31 - 1
]
# what a setting needs beside it to be accepted at all
BESIDE = {"untrusted_workers": {"tenant_from": "name:1"}}


@pytest.mark.parametrize("name", NUMBERS)
def test_a_number_past_a_c_int_is_refused_by_name(tmp_path: Path, name: str) -> None:
    """A count or a time past 2**31 - 1 reaches msgpack or a runtime, which cannot take it:
    `--batch-size 10**20` answered every request 500."""
    beside = BESIDE.get(name, {})
    assert getattr(load_config({name: str(2**31 - 1), **beside}, {}, tmp_path), name) == 2**31 - 1
    with pytest.raises(ConfigError, match="expected at most 2147483647, got '100000"):
        load_config({name: str(10**20), **beside}, {}, tmp_path)
