"""The artifact manifest: modelhost.toml and a TorchServe archive's MAR-INF/MANIFEST.json."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from modelhost.errors import ModelLoadError
from modelhost.manifest import (
    MOST_COUNT,
    NO_MANIFEST,
    Manifest,
    manifest_root,
    parse_manifest,
    read_manifest,
)
from modelhost.workers.signatures import Signature, TensorSpec


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_every_key() -> None:
    manifest = parse_manifest(
        {
            "handler": "xgboost",
            "model_file": "m.ubj",
            "batch_size": 8,
            "max_batch_delay_ms": 2.5,
            "max_workers": 2,
            "pinned": True,
            "memory": "300MiB",
            "warmup": ["samples/0.json"],
        }
    )
    assert manifest == Manifest(
        handler="xgboost",
        model_file="m.ubj",
        batch_size=8,
        max_batch_delay_ms=2.5,
        max_workers=2,
        pinned=True,
        memory_bytes=300 * 2**20,
        warmup=("samples/0.json",),
    )


def test_unknown_keys_are_refused_with_the_allowed_ones() -> None:
    with pytest.raises(ModelLoadError, match=r"unknown keys \['pined'\]; allowed: .*pinned"):
        parse_manifest({"pined": True})


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"pinned": "yes"}, "pinned must be true or false"),
        ({"handler": 3}, "handler must be a string"),
        ({"warmup": "a.json"}, "warmup must be a list"),
        ({"warmup": [1]}, "warmup must be a list"),
        ({"memory": "lots"}, "memory: 'lots' is not a size"),
        ({"memory": True}, "memory must be a size"),
        ({"batch_size": 0}, "batch_size must be a whole number of at least 1"),
        ({"max_batch_delay_ms": -1}, "max_batch_delay_ms must be a number of at least 0"),
        ({"response_timeout_s": 0}, "response_timeout_s must be a number of seconds above 0"),
        ({"idle_unload_s": -1}, "idle_unload_s must be a number of seconds, 0 or more"),
        ({"idle_unload_s": "1h"}, "idle_unload_s must be a number of seconds, 0 or more"),
        ({"load_timeout_s": "long"}, "load_timeout_s must be a number of seconds above 0"),
        ({"load_timeout_s": True}, "load_timeout_s must be a number of seconds above 0"),
    ],
)
def test_wrong_types_are_refused(table: dict[str, object], message: str) -> None:
    with pytest.raises(ModelLoadError, match=message):
        parse_manifest(table)


def test_memory_as_a_number_of_bytes() -> None:
    assert parse_manifest({"memory": 1000}).memory_bytes == 1000


def test_no_manifest_for_a_file_or_a_bare_folder(tmp_path: Path) -> None:
    write(tmp_path / "model.ubj", "")
    assert read_manifest(tmp_path / "model.ubj") is NO_MANIFEST
    assert read_manifest(tmp_path) is NO_MANIFEST
    assert manifest_root(tmp_path) == tmp_path


def test_a_manifest_in_a_lone_top_folder(tmp_path: Path) -> None:
    write(tmp_path / "top" / "modelhost.toml", 'pinned = true\nwarmup = ["s.json"]\n')
    assert read_manifest(tmp_path) == Manifest(pinned=True, warmup=("s.json",))
    assert manifest_root(tmp_path) == tmp_path / "top"


def test_invalid_toml_is_a_load_error(tmp_path: Path) -> None:
    write(tmp_path / "modelhost.toml", "pinned = \n")
    with pytest.raises(ModelLoadError, match="not valid TOML"):
        read_manifest(tmp_path)


def mar_manifest(folder: Path, model: dict[str, str]) -> None:
    document = {"runtime": "python", "model": {"modelName": "m", "modelVersion": "1.0", **model}}
    write(folder / "MAR-INF" / "MANIFEST.json", json.dumps(document))


def test_a_mar_manifest_gives_handler_file_and_model_file(tmp_path: Path) -> None:
    mar_manifest(tmp_path, {"handler": "my_handler:handle", "serializedFile": "model.pt"})
    write(tmp_path / "my_handler.py", "")
    assert read_manifest(tmp_path) == Manifest(
        handler="my_handler.py:handle", model_file="model.pt"
    )
    assert manifest_root(tmp_path) == tmp_path


def test_torchserve_built_in_handlers_are_the_workers_to_resolve(tmp_path: Path) -> None:
    mar_manifest(tmp_path, {"handler": "image_classifier", "serializedFile": "model.pt"})
    assert read_manifest(tmp_path) == Manifest()


def test_a_mar_model_config_sets_batching_and_workers(tmp_path: Path) -> None:
    """TorchServe schedules by model-config.yaml's batchSize, maxBatchDelay and maxWorkers."""
    mar_manifest(tmp_path, {"handler": "h.py", "configFile": "model-config.yaml"})
    write(tmp_path / "h.py", "")
    write(tmp_path / "model-config.yaml", "batchSize: 4\nmaxBatchDelay: 7\nmaxWorkers: 2\n")
    expected = Manifest(handler="h.py", batch_size=4, max_batch_delay_ms=7.0, max_workers=2)
    assert read_manifest(tmp_path) == expected


def test_timeouts_are_the_models_own() -> None:
    """A model's own response and load deadlines, in seconds, over the server's."""
    manifest = parse_manifest({"response_timeout_s": 300, "load_timeout_s": 1.5})
    assert (manifest.response_timeout_s, manifest.load_timeout_s) == (300.0, 1.5)


def test_a_mar_model_config_sets_the_timeouts(tmp_path: Path) -> None:
    """TorchServe's responseTimeout and startupTimeout, in seconds, are the model's deadlines."""
    mar_manifest(tmp_path, {"handler": "h.py", "configFile": "model-config.yaml"})
    write(tmp_path / "h.py", "")
    write(tmp_path / "model-config.yaml", "responseTimeout: 300\nstartupTimeout: 600\n")
    expected = Manifest(handler="h.py", response_timeout_s=300.0, load_timeout_s=600.0)
    assert read_manifest(tmp_path) == expected


def test_idle_unload_is_the_models_own() -> None:
    """A model's own idle time before it is unloaded, over the server's; 0: never."""
    assert parse_manifest({"idle_unload_s": 30}).idle_unload_s == 30.0
    assert parse_manifest({"idle_unload_s": 0}).idle_unload_s == 0.0


def test_a_mar_model_config_sets_idle_unload(tmp_path: Path) -> None:
    mar_manifest(tmp_path, {"handler": "h.py", "configFile": "model-config.yaml"})
    write(tmp_path / "h.py", "")
    write(tmp_path / "model-config.yaml", "idle_unload_s: 0\n")
    assert read_manifest(tmp_path) == Manifest(handler="h.py", idle_unload_s=0.0)


def test_a_mar_timeout_of_zero_is_a_load_error(tmp_path: Path) -> None:
    mar_manifest(tmp_path, {"handler": "h.py", "configFile": "model-config.yaml"})
    write(tmp_path / "model-config.yaml", "startupTimeout: 0\n")
    with pytest.raises(ModelLoadError, match="startupTimeout to 0; it must be a number above 0"):
        read_manifest(tmp_path)


def test_bad_mar_config_is_a_load_error(tmp_path: Path) -> None:
    """A bad MAR model config value is a load error."""
    mar_manifest(tmp_path, {"handler": "h.py", "configFile": "model-config.yaml"})
    write(tmp_path / "model-config.yaml", "batchSize: many\n")
    with pytest.raises(ModelLoadError, match="batchSize to 'many'"):
        read_manifest(tmp_path)


def test_base_handler_leaves_the_choice_to_the_model_file(tmp_path: Path) -> None:
    mar_manifest(tmp_path, {"handler": "base_handler", "serializedFile": "model.pt"})
    assert read_manifest(tmp_path) == Manifest(model_file="model.pt")


def test_modelhost_toml_wins_over_the_mar_manifest(tmp_path: Path) -> None:
    mar_manifest(tmp_path, {"handler": "handler.py", "serializedFile": "model.pt"})
    write(tmp_path / "handler.py", "")
    write(tmp_path / "modelhost.toml", 'handler = "torch"\npinned = true\n')
    assert read_manifest(tmp_path) == Manifest(handler="torch", model_file="model.pt", pinned=True)


def test_a_broken_mar_manifest_is_a_load_error(tmp_path: Path) -> None:
    write(tmp_path / "MAR-INF" / "MANIFEST.json", "[1, 2]")
    with pytest.raises(ModelLoadError, match='no "model" object'):
        read_manifest(tmp_path)


def test_a_mar_manifest_that_is_not_json_says_to_rebuild(tmp_path: Path) -> None:
    write(tmp_path / "MAR-INF" / "MANIFEST.json", '{"model": {"modelVer')
    with pytest.raises(ModelLoadError, match=r"not valid JSON \(.*\); rebuild the .mar"):
        read_manifest(tmp_path)


@pytest.mark.parametrize("text", ["a: [unclosed\n", "\tbatchSize: 4\n"])
def test_a_mar_config_that_is_not_yaml_is_a_load_error(tmp_path: Path, text: str) -> None:
    """Not an unexpected error (a 500 InternalError with only a request id): what to fix."""
    mar_manifest(tmp_path, {"handler": "h.py", "configFile": "model-config.yaml"})
    write(tmp_path / "model-config.yaml", text)
    with pytest.raises(ModelLoadError, match="model-config.yaml is not valid YAML: .*rebuild"):
        read_manifest(tmp_path)


def test_inputs_and_outputs_are_declared_as_mlservers(tmp_path: Path) -> None:
    """MLServer's model-settings.json `inputs` and `outputs`, as TOML arrays of tables."""
    text = '[[inputs]]\nname = "x"\ndatatype = "FP32"\nshape = [-1, 4]\n'
    manifest = read_manifest(write(tmp_path / "m" / "modelhost.toml", text).parent)
    assert manifest.signature == Signature((TensorSpec("x", "FP32", (-1, 4)),))


def test_a_wrong_declaration_names_the_file_and_the_tensor() -> None:
    with pytest.raises(ModelLoadError, match=r"modelhost.toml: outputs\[0\]: datatype 'F32'"):
        parse_manifest({"outputs": [{"name": "y", "datatype": "F32", "shape": [-1]}]})


# an artifact nobody reviewed may set any TOML or YAML value on each of its numbers
NUMBER_KEYS = (
    "batch_size",
    "max_batch_delay_ms",
    "max_workers",
    "threads",
    "response_timeout_s",
    "load_timeout_s",
    "idle_unload_s",
)
ANY_VALUE = st.one_of(st.integers(), st.floats(), st.booleans(), st.text(max_size=4))
YAML_NUMBERS = (".nan", ".inf", "-.inf", "1e400", "true", "null", "'7'", "[1]", str(2**64))
MAR_CONFIG_KEYS = ("batchSize", "maxBatchDelay", "maxWorkers", "responseTimeout", "startupTimeout")


def assert_usable(manifest: Manifest) -> None:
    """Each number is one the server and a worker can act on: finite, of its type, in range."""
    for key in NUMBER_KEYS:
        number = getattr(manifest, key)
        if number is not None:
            assert type(number) in (int, float) and math.isfinite(number), (key, number)
            assert 0 <= number <= MOST_COUNT, (key, number)


@given(key=st.sampled_from(NUMBER_KEYS), value=ANY_VALUE)
@example(key="max_batch_delay_ms", value=math.nan)
@example(key="load_timeout_s", value=math.inf)
@example(key="threads", value=10**20)
@example(key="max_batch_delay_ms", value=True)
def test_a_manifests_number_is_usable_or_refused_by_name(key: str, value: object) -> None:
    """Not a NaN delay that hangs requests, a NaN load timeout that kills the worker, or a
    count no message can carry: refused as a load error that names the key."""
    try:
        manifest = parse_manifest({key: value})
    except ModelLoadError as error:
        assert key in str(error)
        return
    assert_usable(manifest)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    key=st.sampled_from(MAR_CONFIG_KEYS),
    text=st.one_of(st.sampled_from(YAML_NUMBERS), st.integers().map(str), st.floats().map(str)),
)
@example(key="batchSize", text=".nan")
@example(key="batchSize", text=".inf")
@example(key="maxBatchDelay", text=".nan")
def test_a_mar_configs_number_is_usable_or_refused_by_name(
    tmp_path: Path, key: str, text: str
) -> None:
    mar_manifest(tmp_path, {"handler": "h.py", "configFile": "model-config.yaml"})
    write(tmp_path / "h.py", "")
    write(tmp_path / "model-config.yaml", f"{key}: {text}\n")
    try:
        manifest = read_manifest(tmp_path)
    except ModelLoadError as error:
        assert key in str(error)
        return
    assert_usable(manifest)
