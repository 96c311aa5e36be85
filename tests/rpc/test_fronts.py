"""Which front serves the gRPC inference port: pygrpc-native where it is installed, grpc.aio
where it is not or where it is asked for, h2corn only where it is asked for; a front that
cannot serve is refused at start."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path

import grpc
import pytest

from modelhost.config import load_config
from modelhost.errors import ConfigError
from modelhost.rpc import fronts
from modelhost.rpc.fronts import AUTO, GRPC_AIO, H2CORN, NATIVE, front_of, new_server
from modelhost.rpc.server import server_options


@pytest.fixture
def without_native(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: object) -> object:
        return None if name in ("pygrpc_native", "h2corn") else real(name)

    monkeypatch.setattr(fronts.importlib.util, "find_spec", find_spec)


def test_auto_is_pygrpc_native_where_it_is_installed() -> None:
    assert front_of(AUTO) == NATIVE


@pytest.mark.usefixtures("without_native")
def test_auto_is_grpc_aio_where_pygrpc_native_is_missing() -> None:
    assert front_of(AUTO) == GRPC_AIO


@pytest.mark.usefixtures("without_native")
def test_asking_for_a_missing_pygrpc_native_is_refused_with_the_way_out() -> None:
    with pytest.raises(ConfigError, match=r"modelhost\[grpc-native\].*--grpc-front grpc.aio"):
        front_of(NATIVE)


@pytest.mark.usefixtures("without_native")
def test_asking_for_a_missing_h2corn_is_refused_with_the_way_out() -> None:
    with pytest.raises(ConfigError, match=r"modelhost\[grpc-h2corn\].*--grpc-front"):
        front_of(H2CORN)


@pytest.mark.parametrize("front", [GRPC_AIO, H2CORN])
def test_a_front_serves_when_asked_for(front: str) -> None:
    assert front_of(front) == front


def test_an_unknown_front_is_refused_at_start(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="grpc.aio"):
        load_config({"grpc_front": "grpcio"}, {}, tmp_path)


@pytest.mark.parametrize("front", [NATIVE, GRPC_AIO])
def test_each_front_takes_modelhost_s_server_options(tmp_path: Path, front: str) -> None:
    """Both take them whole: the connection lifetimes, which pygrpc-native refuses, are the
    guard's."""
    options = server_options(load_config({}, {}, tmp_path))

    async def make() -> grpc.aio.Server:
        return new_server(front, options, ())

    server = asyncio.run(make())
    assert isinstance(server, grpc.aio.Server)
    assert type(server).__module__.startswith("pygrpc_native") == (front == NATIVE)
