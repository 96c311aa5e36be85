"""One contract for every store: a folder, the in-memory fake, S3 (moto server) and HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers.stores import MotoServer, StaticHttpServer

from modelhost.cache.stores import Store, Stores
from modelhost.cache.stores.local import LocalStore
from modelhost.cache.stores.memory import MemoryStore
from modelhost.errors import Forbidden, InvalidModelName, ModelNotFound, StoreError

PAYLOAD = bytes(range(256)) * 1000
KEY = "tenants/t1.joblib"

Filled = tuple[Store, Callable[[str, bytes], None]]


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoServer]:
    with MotoServer() as server:
        server.client().create_bucket(Bucket="contract")
        yield server


def local_store(root: Path) -> Filled:
    def put(key: str, data: bytes) -> None:
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(data)

    return LocalStore(root), put


def memory_store() -> Filled:
    store = MemoryStore()
    return store, store.objects.__setitem__


def s3_store(moto: MotoServer, monkeypatch: pytest.MonkeyPatch, prefix: str) -> Filled:
    for name, value in moto.client_env().items():
        monkeypatch.setenv(name, value)
    client = moto.client()

    def put(key: str, data: bytes) -> None:
        client.put_object(Bucket="contract", Key=f"{prefix}/{key}", Body=data)

    return Stores(f"s3://contract/{prefix}").default, put


@pytest.fixture(params=["local", "memory", "s3", "http"])
def filled(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    moto: MotoServer,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Filled]:
    if request.param == "local":
        yield local_store(tmp_path)
    elif request.param == "memory":
        yield memory_store()
    elif request.param == "s3":
        yield s3_store(moto, monkeypatch, request.node.name.replace("[", "-").strip("]"))
    else:
        root = tmp_path / "served"
        root.mkdir()
        with StaticHttpServer(root) as server:
            stores = Stores(server.url)
            yield stores.default, local_store(root)[1]
            asyncio.run(stores.close())


def run(coroutine):  # type: ignore[no-untyped-def]
    return asyncio.run(coroutine)


def test_stat_gives_the_size_and_fetch_the_exact_bytes(filled: Filled, tmp_path: Path) -> None:
    store, put = filled
    put(KEY, PAYLOAD)
    info = run(store.stat(KEY))
    received: list[int] = []
    run(store.fetch(KEY, tmp_path / "out", info, received.append))
    assert info.size == len(PAYLOAD)
    assert (tmp_path / "out").read_bytes() == PAYLOAD and sum(received) == len(PAYLOAD)


def test_a_missing_key_is_model_not_found(filled: Filled, tmp_path: Path) -> None:
    store, _ = filled
    with pytest.raises(ModelNotFound):
        run(store.stat("tenants/none.joblib"))


def test_urls_and_keys_round_trip(filled: Filled) -> None:
    store, _ = filled
    assert store.key_of(store.url_of(KEY)) == KEY
    assert store.key_of(store.uri) is None
    assert store.key_of(store.uri + "-sibling/x.joblib") is None


def test_listing_finds_artifacts_or_says_why_it_cannot(filled: Filled) -> None:
    store, put = filled
    put(KEY, PAYLOAD)
    put("notes/readme.txt", b"not a model")
    try:
        keys = run(store.list_keys())
    except StoreError as error:
        assert "cannot be listed" in str(error)
        assert not store.listable
    else:
        assert keys == [KEY]
        assert store.listable


LISTED = ["a-b.joblib", "a.pkl", "a/b/c.joblib", "a/d.joblib", "b.zip", "tenants/t1.joblib"]


def test_listing_pages_follow_the_cursor_in_name_order(filled: Filled) -> None:
    """A page starts after the last name of the one before; '/' sorts after '-' and '.', so a
    folder's models come where their names sort, not where the folder does."""
    store, put = filled
    if not store.listable:
        pytest.skip("an HTTP store cannot be listed")
    for key in [*reversed(LISTED), "a/notes.txt"]:
        put(key, b"m")
    pages, after = [], ""
    while page := run(store.list_keys(after, 2)):
        pages.append(page)
        after = page[-1]
    assert pages == [LISTED[0:2], LISTED[2:4], LISTED[4:6]]
    assert run(store.list_keys("a/b", 3)) == ["a/b/c.joblib", "a/d.joblib", "b.zip"]


def test_a_folder_with_a_handler_is_one_model(tmp_path: Path) -> None:
    """Its files are not listed apart, hidden entries are left out, and a folder of many
    files is read a page at a time."""
    (tmp_path / "m").mkdir()
    (tmp_path / "m/handler.py").write_text("")
    (tmp_path / "m/w.joblib").write_bytes(b"m")
    (tmp_path / "m-x.joblib").write_bytes(b"m")
    (tmp_path / ".hidden.joblib").write_bytes(b"m")
    for i in range(50):
        (tmp_path / f"z{i:02d}.pkl").write_bytes(b"m")
    store = LocalStore(tmp_path)
    assert run(store.list_keys("", 3)) == ["m", "m-x.joblib", "z00.pkl"]
    assert run(store.list_keys("z47.pkl")) == ["z48.pkl", "z49.pkl"]


# normalizing and admitting URLs given to POST /models ------------------------------------


def test_relative_paths_are_in_the_store_and_links_resolve(tmp_path: Path) -> None:
    (tmp_path / "store").mkdir()
    (tmp_path / "outside.joblib").write_bytes(b"x")
    (tmp_path / "store/link.joblib").symlink_to(tmp_path / "outside.joblib")
    stores = Stores(str(tmp_path / "store"))
    assert stores.normalize("a/b.joblib") == (tmp_path / "store/a/b.joblib").as_uri()
    with pytest.raises(Forbidden):
        stores.admit(str(tmp_path / "store/link.joblib"))  # resolves outside the store
    assert stores.admit("a/b.joblib").startswith(stores.default.uri + "/")


def test_remote_urls_keep_their_form_but_never_climb(tmp_path: Path) -> None:
    stores = Stores(str(tmp_path), allowed_urls=("s3://bucket/models/*",))
    assert stores.admit("s3://bucket/models/a.joblib") == "s3://bucket/models/a.joblib"
    with pytest.raises(InvalidModelName):
        stores.admit("s3://bucket/models/../secrets/a.joblib")
    with pytest.raises(InvalidModelName):
        stores.admit("ftp://host/a.joblib")
    with pytest.raises(Forbidden, match=r"s3://bucket/models/\*"):
        stores.admit("s3://bucket/other/a.joblib")
    with pytest.raises(Forbidden):
        stores.admit(str(tmp_path / "a.joblib"))  # the store itself is not in the list given


def test_outside_url_gets_its_own_store(tmp_path: Path) -> None:
    """A URL outside the configured store gets a store of its own."""
    stores = Stores(str(tmp_path / "store"))
    store, key = stores.locate((tmp_path / "elsewhere/m.joblib").as_uri())
    assert key == "m.joblib" and store.url_of(key) == (tmp_path / "elsewhere/m.joblib").as_uri()


def test_a_folder_store_never_tells_clients_where_it_is(tmp_path: Path) -> None:
    """Its errors name the model, not the store's path on the server."""
    (tmp_path / "store").mkdir()
    (tmp_path / "outside.joblib").write_bytes(b"x")
    (tmp_path / "store/link.joblib").symlink_to(tmp_path / "outside.joblib")
    store = Stores(str(tmp_path / "store")).default
    for key, error in (("none.joblib", ModelNotFound), ("link.joblib", InvalidModelName)):
        with pytest.raises(error) as raised:
            store.local_path(key)
        assert key in str(raised.value) and str(tmp_path) not in str(raised.value)


# what a listing names: every kind the loader takes ----------------------------------------

FILES = {  # key put → whether it is a model of its own
    "a.onnx": True,
    "b.pt": True,
    "c.PT2": True,
    "d.ubj": True,
    "e.bst": True,
    "f.lgb": True,
    "g.tar.xz": True,
    "xgb/xgboost-model": True,
    "hf/model.safetensors": False,  # weights need their folder's config.json
    "notes/readme.txt": False,
    "notes/x.json": False,
}
FOLDERS = {  # in a folder store, a folder is one model when these files mark it
    "hf/config.json": "hf",
    "hf/model.safetensors": None,
    "hf/vocab.txt": None,
    "hf-2.onnx": "hf-2.onnx",
    "mar/MAR-INF/MANIFEST.json": "mar",
    "mar/model.pt": None,
    "sm/code/inference.py": "sm",
    "sm/model.joblib": None,
    "tf/saved_model.pb": "tf",
    "tf/variables/variables.index": None,
    "toml/modelhost.toml": "toml",
    "toml/w.joblib": None,
    "cfg/config.json": None,  # a config without weights is not a Hugging Face model
}


def test_the_listing_names_every_kind_of_model_file(filled: Filled) -> None:
    """Files of each runtime and each archive kind, across pages once each."""
    store, put = filled
    if not store.listable:
        pytest.skip("an HTTP store cannot be listed")
    for key in FILES:
        put(key, b"m")
    wanted = sorted(key for key, model in FILES.items() if model)
    assert run(store.list_keys()) == wanted
    pages, after = [], ""
    while page := run(store.list_keys(after, 3)):
        pages.append(page)
        after = page[-1]
    assert [key for page in pages for key in page] == wanted


def test_a_folder_store_lists_each_kind_of_model_folder_as_one_model(tmp_path: Path) -> None:
    """User code, a manifest, a SavedModel, or a Hugging Face config with weights; a folder
    sorts at its name among its siblings."""
    store, put = local_store(tmp_path)
    for key in FOLDERS:
        put(key, b"m")
    assert run(store.list_keys()) == sorted(model for model in FOLDERS.values() if model)
    assert run(store.list_keys("hf", 2)) == ["hf-2.onnx", "mar"]
