"""Which requests a front answers itself: plain hits only; everything else is relayed."""

from __future__ import annotations

import pytest

from modelhost.fronts import heads
from modelhost.fronts.heads import HeadReader, Hit
from modelhost.fronts.messages import Report, Sample, Table, Unpacker, pack
from modelhost.http import invocations, oip_replies
from modelhost.http.invocation_paths import PREDICTIONS
from modelhost.protocols import oip
from modelhost.workers.oip_media import (
    MODEL_NAME_PARAM,
    MODEL_VERSION_PARAM,
    OIP_MEDIA_TYPE,
    oip_media_type,
)

LIMIT = 1000
TABLE = Table({}, max_request_bytes=LIMIT)


def hit_of(head: bytes) -> Hit | None:
    """A fresh connection's first head."""
    return HeadReader().hit_of(head, TABLE)


def head(first: str, *headers: str) -> bytes:
    return ("\r\n".join([first, "host: x", *headers]) + "\r\n\r\n").encode()


def test_a_model_invoke_is_a_hit() -> None:
    hit = hit_of(head("POST /models/m/v1/invoke HTTP/1.1", "content-length: 12"))
    assert hit == Hit(
        "/models/{model:path}/invoke", "m/v1", "application/json", "application/json", 12, {}, False
    )


def test_one_reader_reads_a_connections_heads_one_after_another() -> None:
    """Each head after the body before it; a body of none, and a head the reader refuses."""
    reader = HeadReader()
    first = reader.hit_of(head("POST /models/a/invoke HTTP/1.1", "content-length: 3"), TABLE)
    reader.body(b"[1]")
    second = reader.hit_of(head("POST /predictions/b HTTP/1.1", "content-length: 0"), TABLE)
    reader.body(b"")
    third = reader.hit_of(head("POST /models/c/invoke HTTP/1.1", "accept: text/csv"), TABLE)
    reader.body(b"")
    refused = reader.hit_of(head("GET /ping HTTP/1.1"), TABLE)
    assert first is not None and second is not None and third is not None
    assert (first.model, first.body_bytes, second.model, third.model) == ("a", 3, "b", "c")
    assert (third.accept, refused) == ("text/csv", None)


def test_invocations_take_the_model_from_sagemakers_header() -> None:
    hit = hit_of(
        head(
            "POST /invocations HTTP/1.1",
            "X-Amzn-SageMaker-Target-Model: t/a.joblib",
            "Content-Type: text/csv",
            "Accept: text/csv",
            "content-length: 3",
        )
    )
    assert hit == Hit("/invocations", "t/a.joblib", "text/csv", "text/csv", 3, {}, False)


def test_a_torchserve_prediction_is_a_hit() -> None:
    hit = hit_of(head("POST /predictions/t/m.pkl HTTP/1.1", "content-length: 2"))
    assert hit is not None and (hit.route, hit.model, hit.oip) == (PREDICTIONS, "t/m.pkl", False)


@pytest.mark.parametrize(
    ("path", "route", "model", "version"),
    [
        ("/v2/models/t/m.pkl/infer", oip_replies.INFER, "t/m.pkl", ""),
        ("/v2/models/m/versions/1/infer", oip_replies.VERSION_INFER, "m", "1"),
        ("/v2/models/a/versions/x/y/infer", oip_replies.INFER, "a/versions/x/y", ""),
    ],
)
def test_an_oip_inference_is_a_hit_as_the_routes_match_it(
    path: str, route: str, model: str, version: str
) -> None:
    length = "inference-header-content-length: 5"
    hit = hit_of(head(f"POST {path} HTTP/1.1", "content-length: 9", length))
    params = {MODEL_NAME_PARAM: model, MODEL_VERSION_PARAM: version}
    media_type = oip_media_type(5)
    assert hit == Hit(route, model, media_type, OIP_MEDIA_TYPE, 9, params, True)


def test_the_fronts_versions_are_the_main_processs() -> None:
    assert (heads.MODEL_VERSION, heads.ONE_VERSION) == (oip.MODEL_VERSION, invocations.ONE_VERSION)


@pytest.mark.parametrize(
    "request_head",
    [
        head("GET /ping HTTP/1.1"),
        head("POST /invocations HTTP/1.1", "content-length: 2"),  # no model named
        head("POST /models/m/invoke?rows=1 HTTP/1.1"),  # parameters: the main process reads them
        head("POST /models/m%2Fx/invoke HTTP/1.1"),  # an escaped path
        head("POST /predictions/m/1.0 HTTP/1.1"),  # TorchServe's version: the host knows
        head("PUT /predictions/m HTTP/1.1"),
        head("POST /v2/models/m/versions/2/infer HTTP/1.1"),  # a version: the host knows
        head(
            "POST /v2/models/m/infer HTTP/1.1",
            "content-length: 2",
            "inference-header-content-length: 3",
        ),
        head("POST /v2/models/m/infer HTTP/1.1", "content-encoding: gzip"),  # the main's 415
        head("POST /v2/models/m/ready HTTP/1.1"),
        head("POST /models/m/invoke HTTP/1.0"),
        head("POST /models/m/invoke HTTP/1.1", "connection: close"),
        head("POST /models/m/invoke HTTP/1.1", "transfer-encoding: chunked"),
        head("POST /models/m/invoke HTTP/1.1", "expect: 100-continue"),
        head("POST /models/m/invoke HTTP/1.1", "origin: http://elsewhere"),
        head("POST /models/m/invoke HTTP/1.1", "content-type: multipart/form-data; boundary=b"),
        head("POST /models/m/invoke HTTP/1.1", "x-amzn-sagemaker-custom-attributes: a=1"),
        head("POST /models/m/invoke HTTP/1.1", f"content-length: {LIMIT + 1}"),
        head("POST /models/m/invoke HTTP/1.1", "content-length: x"),
        b"POST /models/m/invoke HTTP/1.1\r\nbad header\r\n\r\n",
    ],
)
def test_anything_else_is_relayed(request_head: bytes) -> None:
    assert hit_of(request_head) is None


def test_tables_and_reports_cross_however_the_bytes_arrive() -> None:
    table = Table({"m": [0]}, {"m": 32}, "vm", 10, 20, sockets=["/run/direct-1.sock"])
    report = Report([Sample(1.0, "/invocations", "m", 200, 0.001, 3, 4, 0.5)])
    data = pack(table) + pack(report)
    unpacker = Unpacker()
    messages = [m for i in range(len(data)) for m in unpacker.feed(data[i : i + 1])]
    assert messages == [table, report]


def test_a_table_of_sixty_thousand_loaded_models_reaches_a_front_whole() -> None:
    """Past about 24,000 loaded models the table was over the frame header's cap, and the
    main process could publish no table at all."""
    sockets = [f"/tmp/modelhost-run-0123abcd/direct-{pid}.sock" for pid in (4101, 4102)]
    table = Table(
        {f"tenants/t{n:05d}/model.joblib": [0, 1] for n in range(60_000)}, sockets=sockets
    )
    data, unpacker = pack(table), Unpacker()
    step = 2**16
    assert [m for at in range(0, len(data), step) for m in unpacker.feed(data[at : at + step])] == [
        table
    ]
