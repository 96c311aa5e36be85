"""--refuse-pickle where no sandbox can be had: models that are programs are refused, with why
and what to ship instead; models that are data still load."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from modelhost import testing
from modelhost.errors import ModelLoadError, UnsafeArtifact
from modelhost.workers.handlers.base import Handler
from modelhost.workers.handlers.select import LoadSpec
from modelhost.workers.messages import Load
from modelhost.workers.programs import refuse_program, said_as_refusal
from modelhost.workers.sandbox import Support, Untrusted
from modelhost.workers.worker import Worker

REASON = "Landlock ABI 6 (Linux 6.12) is missing (ABI 4)"
WHY = "--refuse-pickle"  # why the model is untrusted


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("store")
    testing.torch_iris(root / "iris.pt")
    testing.torch_iris(root / "iris.pt2")
    testing.mms_handler_folder(root / "handler")
    (root / "declared").mkdir()
    (root / "declared/modelhost.toml").write_text('handler = "torch"\nmodel_file = "w.bin"\n')
    (root / "declared/w.bin").write_bytes((root / "iris.pt").read_bytes())
    (root / "saved/variables").mkdir(parents=True)
    (root / "saved/saved_model.pb").write_bytes(b"")  # judged by its files, never loaded here
    testing.onnx_iris(root / "iris.onnx")
    testing.xgboost_iris(root / "iris.ubj")
    testing.lightgbm_iris(root / "iris.txt")
    return root


@pytest.mark.parametrize("name", ["iris.pt", "iris.pt2", "handler", "saved"])
def test_programs_are_refused_with_the_way_out(store: Path, name: str) -> None:
    """TorchScript, torch.export, a handler and a SavedModel are refused, saying why."""
    with pytest.raises(UnsafeArtifact) as refused:
        refuse_program(store / name, name, LoadSpec(), REASON, WHY)
    message = str(refused.value)
    assert WHY in message and REASON in message and "ship ONNX" in message


def test_a_program_declared_under_another_name_is_refused(store: Path) -> None:
    """A manifest naming the torch handler for `w.bin` is judged by the handler, not the name."""
    spec = LoadSpec("torch", "w.bin", store / "declared")
    with pytest.raises(UnsafeArtifact, match="torch program"):
        refuse_program(store / "declared", "declared", spec, REASON, WHY)


@pytest.mark.parametrize("name", ["iris.onnx", "iris.ubj", "iris.txt"])
def test_data_is_not_refused(store: Path, name: str) -> None:
    refuse_program(store / name, name, LoadSpec(), REASON, WHY)


@pytest.fixture
def refusing_worker() -> Iterator[Worker]:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        yield Worker(ours, 1, threads=1, programs_refused=REASON)


def test_a_worker_without_sandbox_refuses_programs_and_loads_data(
    store: Path, refusing_worker: Worker
) -> None:
    """The worker refuses the TorchScript before torch reads it, and loads the ONNX model."""
    with pytest.raises(UnsafeArtifact, match="torch program"):
        refusing_worker.load(Load(model="iris.pt", path=str(store / "iris.pt")))
    assert "iris.pt" not in refusing_worker.models
    assert (
        refusing_worker.load(Load(model="iris.onnx", path=str(store / "iris.onnx"))).footprint >= 0
    )


def test_no_sandbox_says_why_and_confines_nothing(tmp_path: Path) -> None:
    """Where the machine lacks the mechanism, confining answers the reason and changes nothing."""
    untrusted = Untrusted(Support(4, REASON), str(tmp_path))
    assert untrusted.confine(tmp_path) == REASON
    assert list(tmp_path.iterdir()) == []
    assert "program formats are refused" in untrusted.support.describe()


def test_a_sandbox_denial_is_said_as_a_refusal() -> None:
    """A load the sandbox denied a file says so; other failures pass through as they were."""

    def denied() -> Handler:
        error = PermissionError(13, "Permission denied", "/etc/hostname")
        raise ModelLoadError("could not load model m") from error

    def broken() -> Handler:
        raise ModelLoadError("could not load model m: bad bytes")

    with pytest.raises(
        UnsafeArtifact,
        match="/etc/hostname, which the sandbox of untrusted models \\(--refuse-pickle\\)",
    ):
        said_as_refusal(denied, "m", WHY)()
    with pytest.raises(ModelLoadError, match="bad bytes"):
        said_as_refusal(broken, "m", WHY)()
