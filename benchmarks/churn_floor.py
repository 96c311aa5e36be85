"""The in-process floor for churn: uvicorn, `joblib.load` and an LRU of R models in one process.

What a team would write by hand to serve many models: `POST /models/{name}/invoke` answers
`{"predictions": ...}` from an LRU of loaded models; a miss loads the artifact from the store
folder on the event loop (so every request waits while it loads) and evicts the least recently
used model. `X-Floor-Cache: hit | miss` says which. `GET /ping` answers 200.

    python benchmarks/churn_floor.py STORE --room 10 --host 127.0.0.1 --port 8081
"""

from __future__ import annotations

import argparse
import json
from collections import OrderedDict
from pathlib import Path
from typing import Any

from floor_app import _lifespan, _read_body  # the same ASGI plumbing as the one-model floor

PREFIX = "/models/"
SUFFIX = "/invoke"


class LRUModels:
    """At most `room` models loaded; the least recently used goes first."""

    def __init__(self, store: Path, room: int) -> None:
        self.store, self.room = store, room
        self.loaded: OrderedDict[str, Any] = OrderedDict()

    def get(self, name: str) -> tuple[Any, bool]:
        """The model and whether it was a hit."""
        import joblib

        if name in self.loaded:
            self.loaded.move_to_end(name)
            return self.loaded[name], True
        path = (self.store / name).resolve()
        if not path.is_relative_to(self.store) or not path.is_file():
            raise FileNotFoundError(name)
        while len(self.loaded) >= self.room:
            self.loaded.popitem(last=False)
        model = self.loaded[name] = joblib.load(path)
        return model, False


def make_app(models: LRUModels) -> Any:
    import numpy as np

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await _lifespan(receive, send)
        path = scope["path"]
        if scope["method"] != "POST" or not path.startswith(PREFIX) or not path.endswith(SUFFIX):
            return await _reply(send, 200 if path == "/ping" else 404, b"{}", b"")
        body = await _read_body(receive)
        try:
            model, hit = models.get(path[len(PREFIX) : -len(SUFFIX)])
        except FileNotFoundError:
            return await _reply(send, 404, b'{"message": "no such model"}', b"")
        rows = np.asarray(json.loads(body), dtype=np.float64)
        predictions = model.predict_proba(rows).tolist()
        document = json.dumps({"predictions": predictions}).encode()
        await _reply(send, 200, document, b"hit" if hit else b"miss")

    return app


async def _reply(send: Any, status: int, body: bytes, cache: bytes) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if cache:
        headers.append((b"x-floor-cache", cache))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", type=Path, help="the model store folder")
    parser.add_argument("--room", type=int, default=10, help="models held at once")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8081)
    args = parser.parse_args()
    import uvicorn

    app = make_app(LRUModels(args.store.resolve(), args.room))
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
