from __future__ import annotations

import json
import tarfile
import types
from pathlib import Path

import joblib
import pytest
from sklearn.datasets import load_breast_cancer, load_iris, load_wine

from modelhost.examples import MARKER_NAME, PAYLOADS, build_example_store, try_lines
from modelhost.workers.handlers import import_user_module

FEATURES = {
    "churn": load_iris().data[:3],
    "fraud": load_breast_cancer().data[:3],
    "wine": load_wine().data[:3],
}
SHOWCASE = ["examples/iris-archive.tar.gz", "examples/iris-custom", "examples/iris-sagemaker"]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("store")
    return root, build_example_store(root, tenants=3, seed=0)


def test_names_are_tenant_models_then_showcase(store: tuple[Path, list[str]]) -> None:
    root, names = store
    tenants = [f"tenants/t00{i}/{kind}.joblib" for i in range(3) for kind in FEATURES]
    assert names == tenants + SHOWCASE
    assert all((root / name).exists() for name in names)


def test_every_tenant_model_loads_and_predicts(store: tuple[Path, list[str]]) -> None:
    root, names = store
    for name in names[:-3]:
        kind = Path(name).stem
        assert len(joblib.load(root / name).predict(FEATURES[kind])) == 3


def test_tenants_get_different_models(store: tuple[Path, list[str]]) -> None:
    root, _ = store
    depths = {joblib.load(root / f"tenants/t00{i}/fraud.joblib").max_depth for i in range(3)}
    churn = [joblib.load(root / f"tenants/t00{i}/churn.joblib").coef_ for i in range(2)]
    assert len(depths) == 3
    assert (churn[0] != churn[1]).any()


def test_archive_holds_model_joblib(store: tuple[Path, list[str]]) -> None:
    root, _ = store
    with tarfile.open(root / "examples/iris-archive.tar.gz") as archive:
        assert archive.getnames() == ["model.joblib"]


def test_custom_handler_answers_with_its_tag(store: tuple[Path, list[str]]) -> None:
    folder = store[0] / "examples/iris-custom"
    handle = import_user_module(folder / "handler.py").handle
    context = types.SimpleNamespace(system_properties={"model_dir": str(folder)})
    assert handle(None, context) is None
    [reply] = handle([{"body": b"[[5.1, 3.5, 1.4, 0.2]]"}], context)
    assert reply == {"predictions": [0], "handler": "custom handler"}


def test_sagemaker_folder_model_fn_loads(store: tuple[Path, list[str]]) -> None:
    folder = store[0] / "examples/iris-sagemaker"
    model = import_user_module(folder / "code/inference.py").model_fn(str(folder))
    assert model.predict(FEATURES["churn"]).tolist() == [0, 0, 0]


def test_readme_has_curl_lines(store: tuple[Path, list[str]]) -> None:
    readme = (store[0] / "examples/README.txt").read_text()
    assert "curl -s -X POST http://127.0.0.1:8080/models/tenants/t000/churn.joblib/invoke" in readme


def test_try_lines_use_the_port_given(store: tuple[Path, list[str]]) -> None:
    lines = try_lines(store[0], 9123)
    assert f"  modelhost serve --model-store {store[0]} --port 9123" in lines
    urls = [word for line in lines for word in line.split() if word.startswith("http")]
    assert len(urls) == 11
    base = "http://127.0.0.1:9123"
    assert all(url == base or url.startswith(f"{base}/") for url in urls)


def test_second_build_rewrites_nothing(tmp_path: Path) -> None:
    first = build_example_store(tmp_path, tenants=2)
    before = _mtimes(tmp_path)
    assert build_example_store(tmp_path, tenants=2) == first
    assert _mtimes(tmp_path) == before


def test_other_parameters_rebuild_and_drop_stale_tenants(tmp_path: Path) -> None:
    build_example_store(tmp_path, tenants=3)
    names = build_example_store(tmp_path, tenants=2, seed=1)
    assert len(names) == 2 * 3 + 3
    assert not (tmp_path / "tenants/t002").exists()
    assert '"seed": 1' in (tmp_path / MARKER_NAME).read_text()


def test_missing_model_is_rebuilt(tmp_path: Path) -> None:
    build_example_store(tmp_path, tenants=1)
    (tmp_path / "tenants/t000/wine.joblib").unlink()
    build_example_store(tmp_path, tenants=1)
    assert (tmp_path / "tenants/t000/wine.joblib").exists()


def _mtimes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*")}


def test_the_payloads_give_every_model_a_body_it_takes(store: tuple[Path, list[str]]) -> None:
    root, names = store
    lines = [json.loads(line) for line in (root / PAYLOADS).read_text().splitlines()]
    assert [line["TargetModel"] for line in lines] == names
    for line in lines[:-3]:
        model = joblib.load(root / line["TargetModel"])
        assert len(model.predict(line["Body"])) == 1
