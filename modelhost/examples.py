"""An example store: three small real models per tenant plus one artifact of each showcase kind.

tenants/t000/churn.joblib      LogisticRegression on iris
tenants/t000/fraud.joblib      DecisionTreeClassifier on breast_cancer
tenants/t000/wine.joblib       RandomForestClassifier on wine
examples/iris-archive.tar.gz   a SageMaker model.tar.gz
examples/iris-custom/          an MMS handler.py
examples/iris-sagemaker/       code/inference.py
examples/README.txt            curl lines to try
examples/payloads.jsonl        a body for each model, for `modelhost bench --payloads`
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import joblib
import numpy as np
from threadpoolctl import threadpool_limits

from modelhost import testing
from modelhost.config import Config

MARKER_NAME = ".modelhost-examples"
PAYLOADS = "examples/payloads.jsonl"
_FORMAT = 1
_KINDS = ("churn", "fraud", "wine")
DEFAULT_PORT: int = Config.port


def build_example_store(root: Path, tenants: int = 100, seed: int = 0) -> list[str]:
    """Build the example store under `root`, unless built with these parameters; its names."""
    root = Path(root)
    wanted = {"format": _FORMAT, "tenants": tenants, "seed": seed}
    previous = _read_marker(root)
    if previous is not None and _is_complete(root, previous, wanted):
        return list(previous["models"])
    (root / MARKER_NAME).unlink(missing_ok=True)
    if previous is not None:
        _remove_stale_tenants(root, previous["models"], tenants)
    # small fits only wait on BLAS threads (decisions.md, "The example store trains on one ...")
    with threadpool_limits(limits=1):
        names = _build_tenants(root, tenants, seed) + _build_showcase(root)
    _write_readme(root, names)
    _write_payloads(root, names)
    _write_atomically(root / MARKER_NAME, json.dumps({**wanted, "models": names}).encode())
    return names


def tenant_names(tenants: int) -> Iterator[str]:
    """`tenants/t000` … in order."""
    width = max(3, len(str(tenants - 1)))
    return (f"tenants/t{i:0{width}d}" for i in range(tenants))


def _read_marker(root: Path) -> dict[str, Any] | None:
    try:
        marker = json.loads((root / MARKER_NAME).read_text())
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) and isinstance(marker.get("models"), list) else None


def _is_complete(root: Path, marker: dict[str, Any], wanted: dict[str, int]) -> bool:
    same = all(marker.get(key) == value for key, value in wanted.items())
    files = [*marker["models"], PAYLOADS]
    return same and all((root / name).exists() for name in files)


def _remove_stale_tenants(root: Path, old_names: list[str], tenants: int) -> None:
    """Drop the tenant folders of a previous, larger build."""
    keep = set(tenant_names(tenants))
    for folder in {name.rsplit("/", 1)[0] for name in old_names if name.startswith("tenants/")}:
        if folder not in keep:
            shutil.rmtree(root / folder, ignore_errors=True)


# ---------------------------------------------------------------------------- tenants


def _build_tenants(root: Path, tenants: int, seed: int) -> list[str]:
    from sklearn.datasets import load_breast_cancer, load_iris, load_wine

    data = {
        "churn": load_iris(return_X_y=True),
        "fraud": load_breast_cancer(return_X_y=True),
        "wine": load_wine(return_X_y=True),
    }
    names = []
    for index, folder in enumerate(tenant_names(tenants)):
        rng = np.random.default_rng([seed, index])
        for kind in _KINDS:
            x, y = data[kind]
            sample = rng.integers(0, len(y), size=len(y))  # a bootstrap sample per tenant
            model = _tenant_model(kind, index, seed).fit(x[sample], y[sample])
            name = f"{folder}/{kind}.joblib"
            _dump_atomically(model, root / name)
            names.append(name)
    return names


def _tenant_model(kind: str, index: int, seed: int) -> Any:
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.tree import DecisionTreeClassifier

    if kind == "churn":
        return LogisticRegression(max_iter=1000)
    if kind == "fraud":
        return DecisionTreeClassifier(max_depth=2 + index % 7, random_state=seed + index)
    return RandomForestClassifier(n_estimators=10, random_state=seed + index)


# ---------------------------------------------------------------------------- showcase


def _build_showcase(root: Path) -> list[str]:
    examples = root / "examples"
    examples.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=examples) as scratch:
        folder, part = Path(scratch) / "model", Path(scratch) / "iris-archive.tar.gz"
        testing.iris_logreg(folder / "model.joblib")
        os.replace(testing.tar_gz_of(folder, part), examples / "iris-archive.tar.gz")
    testing.mms_handler_folder(examples / "iris-custom")
    testing.sagemaker_folder(examples / "iris-sagemaker")
    return ["examples/iris-archive.tar.gz", "examples/iris-custom", "examples/iris-sagemaker"]


def _write_readme(root: Path, names: list[str]) -> None:
    lines = [
        f"modelhost example store: {len(names)} models.",
        "",
        *try_lines(root, DEFAULT_PORT),
        "",
        f"For another port: modelhost examples {root} --port PORT prints these lines for it.",
        "",
    ]
    _write_atomically(root / "examples" / "README.txt", "\n".join(lines).encode())


def try_lines(root: Path, port: int = DEFAULT_PORT) -> list[str]:
    """How to serve the store at `root`, and curl lines that invoke it."""
    tenant = next(tenant_names(1))
    base = f"http://127.0.0.1:{port}"
    port_flag = "" if port == DEFAULT_PORT else f" --port {port}"
    return [
        "Serve it:",
        f"  modelhost serve --model-store {root}{port_flag}",
        "",
        "Invoke:",
        _curl(f"/models/{tenant}/churn.joblib/invoke", testing.iris_rows(1)[0], port=port),
        _curl(
            "/invocations",
            _row("wine"),
            f"X-Amzn-SageMaker-Target-Model: {tenant}/wine.joblib",
            port=port,
        ),
        _curl(f"/predictions/{tenant}/fraud.joblib", _row("breast_cancer"), port=port),
        _curl("/models/examples/iris-archive.tar.gz/invoke", testing.iris_rows(2), port=port),
        _curl("/models/examples/iris-custom/invoke", testing.iris_rows(1)[0], port=port),
        _curl(
            "/models/examples/iris-sagemaker/invoke", {"instances": testing.iris_rows(2)}, port=port
        ),
        f"  curl -s -X POST {base}/models/{tenant}/churn.joblib/invoke"
        " -H 'Content-Type: text/csv' --data-binary '5.1,3.5,1.4,0.2'",
        "",
        "Load-test every model, a few hot and most cold (pip install 'modelhost[toolkit]'):",
        f"  modelhost bench {base} --payloads {root / PAYLOADS} --popularity two-class"
        " --concurrency 16",
        "",
        "Look inside:",
        f"  curl -s {base}/models",
        f"  curl -s {base}/metrics",
        f"  dashboard: {base}/",
    ]


def _write_payloads(root: Path, names: list[str]) -> None:
    """SageMaker's JSON lines, a body that each model takes."""
    bodies = {
        "churn.joblib": testing.iris_rows(1),
        "fraud.joblib": [_row("breast_cancer")],
        "wine.joblib": [_row("wine")],
        "iris-archive.tar.gz": testing.iris_rows(1),
        "iris-custom": testing.iris_rows(1)[0],
        "iris-sagemaker": {"instances": testing.iris_rows(1)},
    }
    lines = [{"TargetModel": name, "Body": bodies[name.rsplit("/", 1)[-1]]} for name in names]
    text = "".join(json.dumps(line) + "\n" for line in lines)
    _write_atomically(root / PAYLOADS, text.encode())


def curl_line(path: str, body: Any, header: str | None = None, port: int = DEFAULT_PORT) -> str:
    """A copy-pastable curl invocation posting `body` as JSON."""
    extra = f" -H '{header}'" if header else ""
    return (
        f"curl -s -X POST http://127.0.0.1:{port}{path}"
        f" -H 'Content-Type: application/json'{extra} -d '{json.dumps(body)}'"
    )


def _curl(path: str, body: Any, header: str | None = None, port: int = DEFAULT_PORT) -> str:
    return "  " + curl_line(path, body, header, port)


def _row(dataset: str) -> list[float]:
    from sklearn import datasets

    return [float(v) for v in getattr(datasets, f"load_{dataset}")().data[0]]


# ---------------------------------------------------------------------------- files


def _dump_atomically(model: Any, path: Path) -> None:
    """Write, then rename: a server reading the store never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    joblib.dump(model, part)
    os.replace(part, path)


def _write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    part.write_bytes(data)
    os.replace(part, path)
