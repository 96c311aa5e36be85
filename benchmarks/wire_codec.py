"""Cost of one batch's headers on the wire: the frontend encodes the request and decodes the reply,
the worker does the opposite. Typed msgspec messages (what modelhost sends) against the orjson
dicts they replaced. Run: python benchmarks/wire_codec.py"""

from __future__ import annotations

import functools
import timeit

import orjson

from modelhost.workers.messages import (
    Answer,
    Answered,
    Infer,
    Item,
    decode_reply,
    decode_request,
    encode,
)

ROUNDS = 200_000


def typed(batch: int) -> None:
    items = tuple(Item("application/json", "application/json", {}, 40) for _ in range(batch))
    decode_request(encode(Infer("tenant/model-17", items)))
    answers = tuple(Answer("application/json", 20) for _ in range(batch))
    decode_reply(encode(Answered(answers, 0.2)))


def dicts(batch: int) -> None:
    items = [
        {"content_type": "application/json", "accept": "application/json", "params": {}, "size": 40}
        for _ in range(batch)
    ]
    header = orjson.loads(
        orjson.dumps({"op": "infer", "model": "tenant/model-17", "items": items, "id": 7})
    )
    answers = [
        {"ok": True, "content_type": "application/json", "size": 20} for _ in header["items"]
    ]
    orjson.loads(orjson.dumps({"items": answers, "infer_ms": 0.2, "id": 7, "ok": True}))


def main() -> None:
    for batch in (1, 8, 32):
        for name, codec in (("msgspec structs", typed), ("orjson dicts", dicts)):
            rounds = ROUNDS // batch
            seconds = min(timeit.repeat(functools.partial(codec, batch), number=rounds, repeat=3))
            print(f"batch {batch:>2}  {name:<16} {seconds / rounds * 1e6:6.2f} µs per batch")


if __name__ == "__main__":
    main()
