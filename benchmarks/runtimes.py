"""Runtimes: memory per loaded model (PSS) for each built-in handler, measured as density.py does.

For each runtime, one model trained on digits (64 features, 10 classes) is copied under N names
into a store; a server with one worker starts, waits idle, then each copy is invoked once, and
the server's PSS (frontend, template and worker) is read after each load. The first load of a
runtime may import it in the worker (torch is not imported by the template), so the first step
is reported apart from the median of the rest; `torch+preload` measures torch with the template
importing it (`--preload-runtimes`). Before that, the idle PSS of a server with two workers for
each choice of runtimes the template imports.

    python benchmarks/runtimes.py [--models 8] [--runtimes sklearn,xgboost,...,torch+preload]
"""

from __future__ import annotations

import argparse
import importlib.util
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import markdown_table, median, write_results
from density import tree_pss_bytes

from modelhost import testing

MIB = 2**20
HEADER = [
    "runtime",
    "artifact",
    "artifact MiB",
    "idle PSS MiB",
    "first load MiB",
    "median next load MiB",
    "median load ms",
]
MODULES = {"xgboost": "xgboost", "lightgbm": "lightgbm", "onnx": "onnxruntime", "torch": "torch"}
DEFAULT_PRELOAD = "sklearn,xgboost,lightgbm,onnxruntime"
PRELOADS = ["sklearn", DEFAULT_PRELOAD, DEFAULT_PRELOAD + ",torch", "torchserve"]
IDLE_HEADER = ["preload_runtimes", "idle PSS MiB (2 workers)", "ready s"]


def main() -> None:
    args = _parse_args()
    idle = {preload: _idle(preload, args) for preload in PRELOADS}
    idle_rows = [[p or "(none)", pss / MIB, ready_s] for p, (pss, ready_s) in idle.items()]
    rows, results = [], {}
    for entry in args.runtimes.split(","):
        runtime = entry.partition("+")[0]
        if not importlib.util.find_spec(MODULES.get(runtime, "sklearn")):
            print(f"skipping {entry}: not installed")
            continue
        with tempfile.TemporaryDirectory(prefix=f"modelhost-{runtime}-") as scratch:
            measured = _measure(Path(scratch), entry, args)
        results[entry] = measured
        rows.append(_row(entry, measured))
    table = markdown_table(IDLE_HEADER, idle_rows) + "\n\n" + markdown_table(HEADER, rows)
    raw = {"settings": vars(args), "idle": idle, "runtimes": results}
    path = write_results("runtimes", raw, table)
    print(f"{table}\n\nraw results: {path}")


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=8)
    parser.add_argument("--runtimes", default="sklearn,xgboost,lightgbm,onnx,torch,torch+preload")
    parser.add_argument("--idle-s", type=float, default=2.0)
    parser.add_argument("--settle-s", type=float, default=0.5)
    return parser.parse_args()


def _idle(preload: str, args: argparse.Namespace) -> tuple[int, float]:
    """Idle PSS of a server with two workers and an empty store, and its start-up time."""
    with tempfile.TemporaryDirectory(prefix="modelhost-idle-") as scratch:
        store = Path(scratch) / "store"
        store.mkdir()
        serve_args = testing.serve_args(
            store, Path(scratch) / "cache", workers=2, preload_runtimes=preload
        )
        started = time.perf_counter()
        with testing.RunningServer(serve_args, Path(scratch)) as server:
            ready_s = time.perf_counter() - started
            time.sleep(args.idle_s)
            return tree_pss_bytes(server.pid), ready_s


def _measure(scratch: Path, entry: str, args: argparse.Namespace) -> dict[str, Any]:
    import httpx

    runtime, _, option = entry.partition("+")
    artifact = MAKERS[runtime](scratch / "source")
    names = [f"{runtime}/m{i:02d}{artifact.suffix}" for i in range(args.models)]
    for name in names:
        testing.copy_artifact(artifact, scratch / "store" / name)
    preload = DEFAULT_PRELOAD + ",torch" if option == "preload" else DEFAULT_PRELOAD
    serve_args = testing.serve_args(
        scratch / "store",
        scratch / "cache",
        workers=1,
        memory_budget="90%",
        preload_runtimes=preload,
    )
    with testing.RunningServer(serve_args, scratch) as server, httpx.Client(timeout=120) as client:
        time.sleep(args.idle_s)
        idle, steps = tree_pss_bytes(server.pid), []
        for name in names:
            response = client.post(
                f"{server.url}/models/{name}/invoke", json=testing.digits_rows(1)
            )
            if response.status_code != 200:
                raise RuntimeError(f"POST {name} answered {response.status_code}: {response.text}")
            time.sleep(args.settle_s)
            load_ms = client.get(f"{server.url}/models/{name}").json().get("loadTimeMs")
            steps.append(
                {"model": name, "pss_bytes": tree_pss_bytes(server.pid), "load_ms": load_ms}
            )
    return {
        "artifact": artifact.name,
        "artifact_bytes": artifact.stat().st_size,
        "idle_pss_bytes": idle,
        "steps": steps,
    }


def _row(runtime: str, measured: dict[str, Any]) -> list[Any]:
    levels = [measured["idle_pss_bytes"]] + [step["pss_bytes"] for step in measured["steps"]]
    growth = [(b - a) / MIB for a, b in zip(levels[:-1], levels[1:], strict=True)]
    load_ms = [step["load_ms"] for step in measured["steps"] if step["load_ms"] is not None]
    return [
        runtime,
        measured["artifact"],
        measured["artifact_bytes"] / MIB,
        measured["idle_pss_bytes"] / MIB,
        growth[0],
        median(growth[1:]),
        median(load_ms) if load_ms else "",
    ]


# ---------------------------------------------------------------------------- the models


def _digits() -> tuple[Any, Any]:
    from sklearn.datasets import load_digits

    return load_digits(return_X_y=True)


def _sklearn(folder: Path) -> Path:
    from sklearn.ensemble import RandomForestClassifier

    forest = RandomForestClassifier(n_estimators=100, max_depth=8, random_state=0).fit(*_digits())
    return testing.dump(forest, folder / "forest.joblib")


def _xgboost(folder: Path) -> Path:
    import xgboost

    x, y = _digits()
    params = {"objective": "multi:softprob", "num_class": 10, "max_depth": 6, "nthread": 2}
    booster = xgboost.train(params, xgboost.DMatrix(x, label=y), num_boost_round=100)
    path = folder / "trees.ubj"
    folder.mkdir(parents=True, exist_ok=True)
    booster.save_model(str(path))
    return path


def _lightgbm(folder: Path) -> Path:
    import lightgbm

    x, y = _digits()
    params = {"objective": "multiclass", "num_class": 10, "verbose": -1, "num_threads": 2}
    booster = lightgbm.train(params, lightgbm.Dataset(x, label=y), num_boost_round=100)
    path = folder / "trees.txt"
    folder.mkdir(parents=True, exist_ok=True)
    booster.save_model(str(path))
    return path


def _onnx(folder: Path) -> Path:
    import joblib
    import numpy as np
    from skl2onnx import to_onnx

    forest = joblib.load(_sklearn(folder / "sk"))
    path = folder / "forest.onnx"
    path.write_bytes(to_onnx(forest, _digits()[0][:1].astype(np.float32)).SerializeToString())
    return path


def _torch(folder: Path) -> Path:
    import warnings

    import torch

    mlp = torch.nn.Sequential(
        torch.nn.Linear(64, 512),
        torch.nn.ReLU(),
        torch.nn.Linear(512, 512),
        torch.nn.ReLU(),
        torch.nn.Linear(512, 10),
    ).eval()
    path = folder / "mlp.pt"
    folder.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.save(torch.jit.script(mlp), str(path))
    return path


MAKERS: dict[str, Callable[[Path], Path]] = {
    "sklearn": _sklearn,
    "xgboost": _xgboost,
    "lightgbm": _lightgbm,
    "onnx": _onnx,
    "torch": _torch,
}

if __name__ == "__main__":
    main()
