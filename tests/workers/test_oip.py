"""The Open Inference Protocol codecs and the handler wrapper, without sockets."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from modelhost import testing
from modelhost.errors import BadRequestBody
from modelhost.workers.handlers import load_handler
from modelhost.workers.handlers.base import Handler, InferRequest
from modelhost.workers.oip import decode_request, encode_response, rows_of, tensor_of
from modelhost.workers.oip_media import header_length_of, oip_media_type

ROWS = testing.iris_rows(2)
ROWS_FP32 = np.asarray(ROWS, "<f4").tobytes()


def oip_json(document: dict[str, object]) -> tuple[bytes, str]:
    return json.dumps(document).encode(), oip_media_type()


def oip_binary(document: dict[str, object], data: bytes) -> tuple[bytes, str]:
    header = json.dumps(document).encode()
    return header + data, oip_media_type(len(header))


def fp32_input(rows: list[list[float]]) -> dict[str, object]:
    size = len(rows) * len(rows[0]) * 4
    shape = [len(rows), len(rows[0])]
    return {
        "name": "x",
        "datatype": "FP32",
        "shape": shape,
        "parameters": {"binary_data_size": size},
    }


def test_json_tensor_becomes_rows() -> None:
    body, kind = oip_json(
        {"id": "a", "inputs": [{"name": "x", "datatype": "FP64", "shape": [2, 4], "data": ROWS}]}
    )
    request = decode_request(body, kind)
    assert request.id == "a"
    assert rows_of(request).tolist() == ROWS


def test_flat_data_is_reshaped() -> None:
    """Flat data is reshaped and a vector is one row."""
    flat = [v for row in ROWS for v in row]
    body, kind = oip_json(
        {"inputs": [{"name": "x", "datatype": "FP64", "shape": [2, 4], "data": flat}]}
    )
    assert rows_of(decode_request(body, kind)).shape == (2, 4)
    body, kind = oip_json(
        {"inputs": [{"name": "x", "datatype": "INT64", "shape": [3], "data": [1, 2, 3]}]}
    )
    assert rows_of(decode_request(body, kind)).tolist() == [[1.0, 2.0, 3.0]]


def test_several_inputs_are_columns() -> None:
    body, kind = oip_json(
        {
            "inputs": [
                {"name": "a", "datatype": "FP32", "shape": [2], "data": [1, 2]},
                {"name": "b", "datatype": "FP32", "shape": [2, 2], "data": [[3, 4], [5, 6]]},
            ]
        }
    )
    assert rows_of(decode_request(body, kind)).tolist() == [[1, 3, 4], [2, 5, 6]]


def test_binary_tensor_data_is_read_after_the_header() -> None:
    body, kind = oip_binary({"inputs": [fp32_input(ROWS)]}, np.asarray(ROWS, "<f4").tobytes())
    assert header_length_of(kind) is not None
    assert np.allclose(rows_of(decode_request(body, kind)), ROWS)


def test_binary_bytes_elements_carry_their_length() -> None:
    items = [b"ab", b"", b"xyz"]
    data = b"".join(struct.pack("<I", len(item)) + item for item in items)
    spec = {
        "name": "s",
        "datatype": "BYTES",
        "shape": [3],
        "parameters": {"binary_data_size": len(data)},
    }
    request = decode_request(*oip_binary({"inputs": [spec]}, data))
    assert request.inputs[0].values.tolist() == items


@pytest.mark.parametrize(
    ("document", "words"),
    [
        ({"inputs": []}, "at least one"),
        ({"inputs": [{"name": "x", "datatype": "FP99", "shape": [1], "data": [1]}]}, "datatype"),
        ({"inputs": [{"name": "x", "datatype": "FP32", "shape": [3], "data": [1]}]}, "holds 3"),
        ({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": ["a"]}]}, "FP32"),
        ({"inputs": [{"name": "x", "datatype": "FP32", "shape": [-1], "data": [1]}]}, "shape"),
        ({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1]}]}, "neither data"),
        # a shape whose product passes 64 bits (numpy's product wraps it to 0)
        (
            {"inputs": [{"name": "x", "datatype": "FP32", "shape": [2**62, 2**62], "data": []}]},
            "holds",
        ),
    ],
)
def test_malformed_requests_say_what_is_wrong(document: dict[str, object], words: str) -> None:
    with pytest.raises(BadRequestBody, match=words):
        decode_request(*oip_json(document))


def test_a_body_that_is_not_json_says_how_to_send_one() -> None:
    """A whole body is no 'header'; the refusal names the Content-Type to send."""
    with pytest.raises(BadRequestBody, match="inference request body") as refused:
        decode_request(b"1,2,3,4", "text/csv")
    assert "Content-Type: application/json" in str(refused.value)


def test_binary_data_must_be_accounted_for() -> None:
    body, kind = oip_binary(
        {"inputs": [fp32_input(ROWS)]}, np.asarray(ROWS, "<f4").tobytes() + b"x"
    )
    with pytest.raises(BadRequestBody, match="1 bytes of binary data"):
        decode_request(body, kind)
    spec = {**fp32_input(ROWS), "parameters": {"binary_data_size": 1000}}
    with pytest.raises(BadRequestBody, match="binary_data_size"):
        decode_request(*oip_binary({"inputs": [spec]}, b"1234"))


def test_response_is_json_unless_binary() -> None:
    """Response is JSON unless an output is asked in binary."""
    labels = tensor_of("predict", np.array(["setosa", "virginica"]))
    request = decode_request(
        *oip_json(
            {"id": "7", "inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": [1]}]}
        )
    )
    body, kind = encode_response("m", "", request, [labels])
    assert kind == "application/json"
    assert json.loads(body) == {
        "model_name": "m",
        "model_version": "1",  # the one version of a model registered without versions
        "id": "7",
        "outputs": [
            {"name": "predict", "datatype": "BYTES", "shape": [2], "data": ["setosa", "virginica"]}
        ],
    }
    request = decode_request(
        *oip_json(
            {
                "inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": [1]}],
                "outputs": [{"name": "p", "parameters": {"binary_data": True}}],
            }
        )
    )
    body, kind = encode_response("m", "1", request, [tensor_of("p", np.array([1.5, 2.5]))])
    length = header_length_of(kind)
    assert length is not None
    header = json.loads(body[:length])
    assert header["outputs"][0]["parameters"] == {"binary_data_size": 16}
    assert np.frombuffer(body[length:], "<f8").tolist() == [1.5, 2.5]


@pytest.fixture(scope="module")
def iris(tmp_path_factory: pytest.TempPathFactory) -> Handler:
    path = testing.iris_logreg(tmp_path_factory.mktemp("oip") / "iris.joblib")
    return load_handler(Path(path), "iris")


def oip_request(document: dict[str, object], binary: bytes = b"") -> InferRequest:
    body, kind = oip_binary(document, binary) if binary else oip_json(document)
    return InferRequest(body, kind, kind, {"oip_model_name": "iris"})


def test_every_handler_answers_oip(iris: Handler) -> None:
    document = {"inputs": [{"name": "x", "datatype": "FP64", "shape": [2, 4], "data": ROWS}]}
    reply = iris.infer(oip_request(document))
    answer = json.loads(reply.body)
    assert answer["model_name"] == "iris"
    assert answer["outputs"] == [
        {"name": "predict", "datatype": "INT64", "shape": [2], "data": [0, 0]}
    ]


def test_a_requested_output_chooses_the_method(iris: Handler) -> None:
    document = {"inputs": [fp32_input(ROWS)], "outputs": [{"name": "predict_proba"}]}
    reply = iris.infer(oip_request(document, np.asarray(ROWS, "<f4").tobytes()))
    (output,) = json.loads(reply.body)["outputs"]
    assert (output["name"], output["datatype"], output["shape"]) == (
        "predict_proba",
        "FP64",
        [2, 3],
    )


@pytest.mark.parametrize(
    ("output", "parameters"), [("scores", {}), ("predict", {"method": "predict_proba"})]
)
def test_an_output_the_model_lacks_is_400(
    iris: Handler, output: str, parameters: dict[str, str]
) -> None:
    """An output the model has not, or one the method contradicts, is refused as Triton does,
    not answered with predictions under that name."""
    document = {"inputs": [fp32_input(ROWS)], "outputs": [{"name": output}]}
    document["parameters"] = parameters
    with pytest.raises(BadRequestBody, match=f"no output '{output}'.*predict, predict_proba"):
        iris.infer(oip_request(document, np.asarray(ROWS, "<f4").tobytes()))


def test_an_output_the_model_lacks_is_refused(iris: Handler) -> None:
    """A model of rows answers predict or predict_proba: an output named otherwise (a Triton
    client's "probabilities") is a 400 naming those two, not the labels under that name."""
    document = {"inputs": [fp32_input(ROWS)], "outputs": [{"name": "probabilities"}]}
    request = oip_request(document, np.asarray(ROWS, "<f4").tobytes())
    with pytest.raises(BadRequestBody, match="'probabilities'.*predict_proba"):
        iris.infer(request)
    (refused,) = iris.infer_batch([request])
    assert isinstance(refused, BadRequestBody)


def test_other_requests_pass_through(iris: Handler) -> None:
    assert json.loads(iris.infer(InferRequest(json.dumps(ROWS).encode())).body) == {
        "predictions": [0, 0]
    }


def test_a_batch_mixes_protocols_and_isolates_failures(iris: Handler) -> None:
    good = oip_request(
        {"inputs": [{"name": "x", "datatype": "FP64", "shape": [1, 4], "data": ROWS[:1]}]}
    )
    bad = InferRequest(b"{", oip_media_type(), oip_media_type())
    replies = iris.infer_batch([good, InferRequest(json.dumps(ROWS).encode()), bad])
    assert not isinstance(replies[0], Exception)
    assert json.loads(replies[0].body)["outputs"][0]["data"] == [0]
    assert not isinstance(replies[1], Exception)
    assert isinstance(replies[2], BadRequestBody)


def test_both_outputs_answer_in_the_order_asked(iris: Handler) -> None:
    """Metadata lists predict and predict_proba; a request naming both gets both, each in the
    form its own binary_data asks."""
    wanted = [{"name": "predict_proba", "parameters": {"binary_data": True}}, {"name": "predict"}]
    document = {"inputs": [fp32_input(ROWS)], "outputs": wanted}
    reply = iris.infer(oip_request(document, ROWS_FP32))
    length = header_length_of(reply.content_type)
    assert length is not None
    probabilities, labels = json.loads(reply.body[:length])["outputs"]
    assert (probabilities["name"], probabilities["shape"]) == ("predict_proba", [2, 3])
    assert np.allclose(np.frombuffer(reply.body[length:], "<f8").reshape(2, 3).sum(axis=1), 1)
    assert (labels["name"], labels["data"]) == ("predict", [0, 0])


def test_a_batch_predicts_each_method_once_across_requests(
    iris: Handler, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Requests wanting one output and two share the batch: one runtime call per method."""
    methods: list[str] = []
    predict = iris.inner.predict  # type: ignore[attr-defined]
    monkeypatch.setattr(
        iris.inner, "predict", lambda rows, m: methods.append(m) or predict(rows, m)
    )
    both = [{"name": "predict"}, {"name": "predict_proba"}]
    asks = [both, [{"name": "predict"}], [], [{"name": "predict_proba"}]]
    documents = [{"inputs": [fp32_input(ROWS)], "outputs": outputs} for outputs in asks]
    replies = iris.infer_batch([oip_request(document, ROWS_FP32) for document in documents])
    names = [[o["name"] for o in json.loads(reply.body)["outputs"]] for reply in replies]  # type: ignore[union-attr]
    assert names == [["predict", "predict_proba"], ["predict"], ["predict"], ["predict_proba"]]
    assert sorted(methods) == ["predict", "predict_proba"]


@pytest.mark.parametrize(
    ("outputs", "parameters", "words"),
    [
        (["predict", "scores"], {}, "no output 'scores'.*predict, predict_proba"),
        (
            ["predict", "predict_proba"],
            {"method": "predict"},
            "no output 'predict_proba' for parameters.method predict.*leave parameters.method out",
        ),
    ],
)
def test_one_wrong_output_of_two_is_400(
    iris: Handler, outputs: list[str], parameters: dict[str, str], words: str
) -> None:
    document = {
        "inputs": [fp32_input(ROWS)],
        "outputs": [{"name": name} for name in outputs],
        "parameters": parameters,
    }
    with pytest.raises(BadRequestBody, match=words):
        iris.infer(oip_request(document, ROWS_FP32))
    (refused,) = iris.infer_batch([oip_request(document, ROWS_FP32)])
    assert isinstance(refused, BadRequestBody)


def test_an_output_asked_twice_is_answered_once(iris: Handler) -> None:
    document = {"inputs": [fp32_input(ROWS)], "outputs": [{"name": "predict"}] * 2}
    reply = iris.infer(oip_request(document, ROWS_FP32))
    assert [output["name"] for output in json.loads(reply.body)["outputs"]] == ["predict"]


@pytest.fixture(scope="module")
def regressor(tmp_path_factory: pytest.TempPathFactory) -> Handler:
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LinearRegression

    model = LinearRegression().fit(*load_iris(return_X_y=True))
    path = testing.dump(model, tmp_path_factory.mktemp("oip") / "regressor.joblib")
    return load_handler(path, "regressor")


@pytest.mark.parametrize("output", ["scores", "predict_proba"])
def test_an_unknown_output_names_the_models_own_outputs(regressor: Handler, output: str) -> None:
    """A regressor has no predict_proba: the refusal lists the outputs its metadata lists."""
    signature = regressor.signature()
    assert signature is not None
    names = ", ".join(spec.name for spec in signature.outputs)
    assert names == "predict"
    document = {"inputs": [fp32_input(ROWS)], "outputs": [{"name": output}]}
    with pytest.raises(BadRequestBody, match=f"no output '{output}'; its outputs.* are {names}:"):
        regressor.infer(oip_request(document, ROWS_FP32))


def test_two_outputs_decode_the_rows_once(iris: Handler, monkeypatch: pytest.MonkeyPatch) -> None:
    """predict and predict_proba in one request share one decoding of the rows, alone or in a
    batch, and each answer is the model's own."""
    from modelhost.workers.handlers import rows

    decoded: list[bytes] = []
    decode = rows.decode_rows
    monkeypatch.setattr(rows, "decode_rows", lambda b, k: decoded.append(b) or decode(b, k))
    both = [{"name": "predict"}, {"name": "predict_proba", "parameters": {"binary_data": False}}]
    request = oip_request({"inputs": [fp32_input(ROWS)], "outputs": both}, ROWS_FP32)
    model = iris.inner.model  # type: ignore[attr-defined]
    given = np.asarray(ROWS, "<f4").astype(np.float64)
    replies = [iris.infer(request)]
    assert len(decoded) <= 1
    replies += iris.infer_batch([request, request])
    assert len(decoded) <= 3  # once a request
    for reply in replies:
        assert not isinstance(reply, Exception)
        labels, probabilities = json.loads(reply.body)["outputs"]
        assert labels["data"] == model.predict(given).tolist()
        assert np.allclose(probabilities["data"], model.predict_proba(given).reshape(-1))


def test_classification_answers_each_rows_top_classes(iris: Handler) -> None:
    """Triton's classification extension: "value:index" strings, best first, [rows, count]."""
    wanted = {"name": "predict_proba", "parameters": {"classification": 2}}
    reply = iris.infer(oip_request({"inputs": [fp32_input(ROWS)], "outputs": [wanted]}, ROWS_FP32))
    (output,) = json.loads(reply.body)["outputs"]
    assert (output["name"], output["datatype"], output["shape"]) == (
        "predict_proba",
        "BYTES",
        [2, 2],
    )
    given = np.asarray(ROWS, "<f4").astype(np.float64)
    probabilities = iris.inner.model.predict_proba(given)  # type: ignore[attr-defined]
    pairs = [item.split(":") for item in output["data"]]
    assert [int(index) for _, index in pairs] == np.argsort(-probabilities)[:, :2].ravel().tolist()
    chosen = np.take_along_axis(probabilities, np.argsort(-probabilities)[:, :2], axis=1)
    assert np.allclose([float(value) for value, _ in pairs], chosen.ravel())


@pytest.mark.parametrize(
    ("count", "words"),
    [
        (4, "3 classes a row; ask for a classification of 1 to 3"),
        (-1, "1 or more"),
        ("2", "1 or more"),
    ],
)
def test_a_classification_the_output_cannot_give_is_400(
    iris: Handler, count: object, words: str
) -> None:
    wanted = {"name": "predict_proba", "parameters": {"classification": count}}
    request = oip_request({"inputs": [fp32_input(ROWS)], "outputs": [wanted]}, ROWS_FP32)
    with pytest.raises(BadRequestBody, match=words):
        iris.infer(request)


def test_a_classification_of_strings_is_400() -> None:
    wanted = {"name": "predict", "parameters": {"classification": 1}}
    given = {"name": "x", "datatype": "FP32", "shape": [1], "data": [1]}
    request = decode_request(*oip_json({"inputs": [given], "outputs": [wanted]}))
    with pytest.raises(BadRequestBody, match="holds strings"):
        encode_response("m", "", request, [tensor_of("predict", np.array(["setosa"]))])
