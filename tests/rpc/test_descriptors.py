"""Our .proto files against the published ones: the descriptor set is what they compile to, and
every message tritonclient's generated module (Triton's superset of KServe's service) shares with
ours has the same fields, numbers and types."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from tritonclient.grpc import model_config_pb2 as triton_config
from tritonclient.grpc import service_pb2 as triton

from modelhost.rpc.messages import OIP_SERVICE, message, pool, service

ROOT = Path(__file__).resolve().parents[2]
# where the two published layouts differ, ours follows Triton's request and KServe's response
KSERVE_RESPONSES = ("RepositoryModelLoadResponse", "RepositoryModelUnloadResponse")
OURS_ONLY = {("ModelMetadataResponse", "properties")}  # the OIP spec's, newer than Triton's


def compile_script() -> object:
    spec = importlib.util.spec_from_file_location(
        "compile_protos", ROOT / "scripts/compile_protos.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_descriptor_set_is_fresh() -> None:
    """The checked-in descriptor set is what the protos compile to.

    Edit a .proto, then run scripts/compile_protos.py."""
    pytest.importorskip("grpc_tools")
    compiled = compile_script().compiled()  # type: ignore[attr-defined]
    checked_in = (ROOT / "modelhost/rpc/protos/descriptors.binpb").read_bytes()
    assert compiled == checked_in


def fields(descriptor: object) -> dict[str, tuple[int, int, str]]:
    return {
        f.name: (f.number, f.type, f.message_type.name if f.message_type else "")
        for f in descriptor.fields  # type: ignore[attr-defined]
    }


def test_methods_match_tritons() -> None:
    """Every method of ours is Triton's with the same messages."""
    theirs = triton.DESCRIPTOR.services_by_name["GRPCInferenceService"]
    for method in service(OIP_SERVICE).methods:
        other = theirs.methods_by_name[method.name]
        assert method.input_type.name == other.input_type.name
        assert method.output_type.name == other.output_type.name


@pytest.mark.parametrize(
    "name",
    sorted(
        m.name for m in pool().FindFileByName("open_inference.proto").message_types_by_name.values()
    ),
)
def test_each_message_has_tritons_fields(name: str) -> None:
    if name in KSERVE_RESPONSES:
        assert not triton.DESCRIPTOR.message_types_by_name[name].fields  # Triton's are empty
        return
    ours = message(f"inference.{name}").DESCRIPTOR
    theirs = triton.DESCRIPTOR.message_types_by_name[name]
    for nested in ours.nested_types:
        if not nested.GetOptions().map_entry:
            assert fields(nested) == fields(theirs.nested_types_by_name[nested.name])
    mine = {k: v for k, v in fields(ours).items() if (name, k) not in OURS_ONLY}
    assert mine == fields(theirs)


@pytest.mark.parametrize(
    "name",
    sorted(pool().FindFileByName("model_config.proto").message_types_by_name),
)
def test_each_model_config_message_is_part_of_tritons(name: str) -> None:
    """We answer a part of Triton's ModelConfig: each field we have is Triton's."""
    ours = message(f"inference.{name}").DESCRIPTOR
    theirs = fields(triton_config.DESCRIPTOR.message_types_by_name[name])
    assert fields(ours).items() <= theirs.items()


def values(enum: object) -> list[tuple[str, int]]:
    return [(v.name, v.number) for v in enum.values]  # type: ignore[attr-defined]


def test_model_config_enums_are_tritons() -> None:
    """Enums travel as numbers: ours must be Triton's, value for value."""
    data_type = pool().FindEnumTypeByName("inference.DataType")
    assert values(data_type) == values(triton_config.DESCRIPTOR.enum_types_by_name["DataType"])
    ours = message("inference.ModelInput").DESCRIPTOR.enum_types_by_name["Format"]
    assert values(ours) == values(triton_config.ModelInput.DESCRIPTOR.enum_types_by_name["Format"])


def test_the_messages_live_apart_from_protobufs_default_pool() -> None:
    """tritonclient has registered `inference.*` in the default pool: ours would clash there."""
    assert "tritonclient.grpc.service_pb2" in sys.modules
    assert message("inference.ModelInferRequest").DESCRIPTOR.file.pool is pool()
