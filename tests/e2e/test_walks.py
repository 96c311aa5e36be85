"""Two requests' walks through the package, traced on real servers: registering a `.mar`, and an
Open Inference Protocol infer over gRPC. From the route's handler to the host, a walk enters few
modules (rooms) and never calls a module on a higher floor of the house (a climb), the floors
being those tests/test_architecture.py holds. Inside the core a walk is the host's own."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest
import tritonclient.grpc as triton
from helpers.serving import Servers
from test_architecture import FLOORS, in_layer

from modelhost import testing

pytestmark = pytest.mark.e2e

TRACER = Path(__file__).parents[1] / "helpers" / "walk_tracer.py"
REGISTER = "http/torchserve.py:register"
INFER = "rpc/oip.py:ModelInfer"
MAX_ROOMS = 8
Call = tuple[str, str, str, str]  # caller module, its function, callee module, its function


def module_name(path: str) -> str:
    return path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def floor_of(path: str) -> int:
    name = module_name(path)
    return next(i for i, floor in enumerate(FLOORS) if in_layer(name, floor))


def walk(calls: list[Call], entry: str) -> list[Call]:
    """The calls made from the entry's module and the modules it reaches, but not from
    inside the core (floor 0)."""
    start = entry.partition(":")[0]
    reached, todo, found = set(), [start], []
    while todo:
        module = todo.pop()
        if module in reached:
            continue
        reached.add(module)
        if floor_of(module) == 0:
            continue
        for call in calls:
            if call[0] == module:
                found.append(call)
                todo.append(call[2])
    return found


def rooms(calls: list[Call], entry: str) -> list[str]:
    modules = [entry.partition(":")[0]] + [call[2] for call in calls]
    return sorted({module_name(module) for module in modules})


def climbs(calls: list[Call]) -> list[str]:
    return [
        f"{caller}:{function} -> {callee}:{called}"
        for caller, function, callee, called in calls
        if floor_of(callee) > floor_of(caller)
    ]


def test_a_walk_is_counted_from_its_entry() -> None:
    """Rooms past the core and calls not reached from the entry are left out; a call up a
    floor is a climb."""
    calls: list[Call] = [
        ("http/torchserve.py", "register", "protocols/torchserve.py", "register"),
        ("protocols/torchserve.py", "register", "host/model_host.py", "load"),
        ("host/model_host.py", "load", "host/residency.py", "ensure_loaded"),
        ("protocols/torchserve.py", "register", "http/routes.py", "authorize"),
        ("observe/observer.py", "on_event", "observe/metrics.py", "on_event"),
    ]
    walked = walk(calls, REGISTER)
    assert rooms(walked, REGISTER) == [
        "host.model_host",
        "http.routes",
        "http.torchserve",
        "protocols.torchserve",
    ]
    assert climbs(walked) == ["protocols/torchserve.py:register -> http/routes.py:authorize"]


def traced_server(
    serve: Servers, store: Path, out: Path, **settings: object
) -> testing.RunningServer:
    """`modelhost serve` under the tracer, writing to `out` the walk of the first request
    that enters REGISTER or INFER."""
    env = {**os.environ, "WALK_OUT": str(out), "WALK_ENTRIES": f"{REGISTER},{INFER}"}
    return serve(store, env=env, command=[sys.executable, str(TRACER), "serve"], **settings)


def traced_walk(out: Path, entry: str) -> list[Call]:
    return walk([tuple(call) for call in json.loads(out.read_text())], entry)


def test_registering_a_mar_walks_few_rooms_and_never_climbs(serve: Servers, tmp_path: Path) -> None:
    store = tmp_path / "store"
    testing.mar_of(testing.mms_handler_folder(tmp_path / "handler"), store / "echo.mar")
    port = testing.free_port()
    traced_server(serve, store, tmp_path / "walk.json", workers=1, management_port=port)
    params = {"url": "echo.mar", "initial_workers": "1", "synchronous": "true"}
    answer = httpx.post(f"http://127.0.0.1:{port}/models", params=params, timeout=60)
    assert answer.status_code == 200, answer.text
    walked = traced_walk(tmp_path / "walk.json", REGISTER)
    assert "host.model_host" in rooms(walked, REGISTER)  # the walk reached the host
    assert len(rooms(walked, REGISTER)) <= MAX_ROOMS, rooms(walked, REGISTER)
    assert climbs(walked) == []


def test_an_oip_infer_over_grpc_walks_few_rooms_and_never_climbs(
    serve: Servers, tmp_path: Path
) -> None:
    """The call is observed around the servicer's method, as REST's middleware observes a
    route, so the walk from ModelInfer holds no room of observe/."""
    store = tmp_path / "store"
    testing.iris_logreg(store / "iris.pkl")
    port = testing.free_port()
    traced_server(serve, store, tmp_path / "walk.json", workers=1, grpc_port=port)
    client = triton.InferenceServerClient(f"127.0.0.1:{port}")
    rows = triton.InferInput("input-0", [1, 4], "FP64")
    rows.set_data_from_numpy(np.array(testing.iris_rows(1), dtype=np.float64))
    assert client.infer("iris.pkl", [rows]).as_numpy("predict") is not None
    walked = traced_walk(tmp_path / "walk.json", INFER)
    assert "host.model_host" in rooms(walked, INFER)
    assert len(rooms(walked, INFER)) <= MAX_ROOMS, rooms(walked, INFER)
    assert climbs(walked) == []
