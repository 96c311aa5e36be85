from __future__ import annotations

import io
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from modelhost.errors import BadRequestBody
from modelhost.workers.codecs import decode_rows, encode_predictions, encode_value

ROW = [5.1, 3.5, 1.4, 0.2]
ROWS = [ROW, [6.2, 2.9, 4.3, 1.3]]


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (ROW, [ROW]),
        (ROWS, ROWS),
        ({"instances": ROWS}, ROWS),
        ({"instances": ROW}, [ROW]),
        ({"inputs": ROWS}, ROWS),
        ({"inputs": ROW}, [ROW]),
    ],
)
def test_json_forms_decode_to_rows(document: object, expected: list[list[float]]) -> None:
    rows = decode_rows(json.dumps(document).encode(), "application/json")
    assert rows.tolist() == expected
    assert rows.dtype == np.float64


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "", "*/*"])
def test_json_is_the_default_and_parameters_are_ignored(content_type: str) -> None:
    assert decode_rows(json.dumps(ROWS).encode(), content_type).tolist() == ROWS


def test_json_null_is_a_missing_value() -> None:
    assert np.isnan(decode_rows(b"[1.0, null]", "application/json")[0, 1])


@pytest.mark.parametrize(
    "body",
    [
        json.dumps([1.0, float("nan")]).encode(),  # Python clients write a missing value so
        b"\xef\xbb\xbf[1.0, 2.0]",  # a byte-order mark
        json.dumps([1.0, 2.0]).encode("utf-16"),
    ],
)
def test_json_as_python_clients_write_it_is_taken(body: bytes) -> None:
    """Strict JSON refuses these; Python's json (the first decoder here) took them, and so do we."""
    rows = decode_rows(body, "application/json")
    assert rows.shape == (1, 2) and rows[0, 0] == 1.0


def test_predictions_are_compact_json_with_nan_as_null() -> None:
    body, content_type = encode_predictions([np.float32(0.5), np.int64(3), float("nan")], "")
    assert (body, content_type) == (b'{"predictions":[0.5,3,null]}', "application/json")


@pytest.mark.parametrize(
    "body",
    [
        b"5.1,3.5,1.4,0.2\n6.2,2.9,4.3,1.3\n",
        b"5.1, 3.5,1.4,0.2\r\n6.2,2.9,4.3,1.3",
        b"\xef\xbb\xbf5.1,3.5,1.4,0.2\n\n6.2,2.9,4.3,1.3",
    ],
)
def test_csv_has_one_row_per_line(body: bytes) -> None:
    assert decode_rows(body, "text/csv; charset=utf-8").tolist() == ROWS


def test_npy_decodes_without_pickles() -> None:
    buffer = io.BytesIO()
    np.save(buffer, np.array(ROWS))
    assert decode_rows(buffer.getvalue(), "application/x-npy").tolist() == ROWS


@pytest.mark.parametrize(
    ("body", "content_type", "says"),
    [
        (b"{not json", "application/json", "not valid JSON"),
        (b'{"rows": [[1, 2]]}', "application/json", "'rows'"),
        (b'"hello"', "application/json", '"instances"'),
        (b"[]", "application/json", "no rows"),
        (b"[[]]", "application/json", "no rows"),
        (b"[[1, 2], [3]]", "application/json", "row 1 has 1 values but row 0 has 2"),
        (b'[[1, "x"]]', "application/json", 'row 0, column 1: "x" is not a number'),
        (b'[1, {"a": 2}]', "application/json", "not a row of numbers"),
        (b"[[[1]]]", "application/json", "3-dimensional"),
        (b"1,2\n3\n", "text/csv", "row 1 has 1 values but row 0 has 2"),
        (b"1,abc\n", "text/csv", "row 0, column 1"),
        (b"1,,2\n", "text/csv", "row 0, column 1"),
        (b"", "text/csv", "no rows"),
        (b"\xff\xfe", "text/csv", "not UTF-8"),
        (b"not npy", "application/x-npy", ".npy"),
        (b"a=1", "application/x-www-form-urlencoded", "application/json, text/csv"),
    ],
)
def test_bad_bodies_say_what_was_expected(body: bytes, content_type: str, says: str) -> None:
    with pytest.raises(BadRequestBody) as caught:
        decode_rows(body, content_type)
    assert says in str(caught.value)


def npz_body() -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, rows=np.array(ROWS))
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"abc", "is not a .npy file: it starts with b'abc'"),
        (npz_body(), "is not a .npy file: it starts with b'PK"),
        (b"\x93NUMPY\x01\x00garbage", "is not a readable .npy file: EOF"),
    ],
)
def test_a_body_that_is_not_npy_is_not_called_a_pickle(body: bytes, says: str) -> None:
    with pytest.raises(BadRequestBody) as caught:
        decode_rows(body, "application/x-npy")
    assert says in str(caught.value)
    assert "pickle" not in str(caught.value)


def test_json_errors_show_the_accepted_forms() -> None:
    with pytest.raises(BadRequestBody, match=r"a list of rows.*\{\"instances\": \.\.\.\}"):
        decode_rows(b'{"x": 1}', "application/json")


@pytest.mark.parametrize("accept", ["application/json", "*/*", "", "text/html, */*;q=0.1"])
def test_predictions_default_to_json(accept: str) -> None:
    labels = np.array(["setosa", "virginica"], dtype=object)
    body, content_type = encode_predictions(labels, accept)
    assert content_type == "application/json"
    assert json.loads(body) == {"predictions": ["setosa", "virginica"]}


def test_json_converts_numpy_scalars_and_arrays() -> None:
    mixed = [np.int64(2), np.float32(0.5), np.array([0.25, 0.75]), np.str_("a")]
    body, _ = encode_predictions(mixed, "application/json")
    assert json.loads(body) == {"predictions": [2, 0.5, [0.25, 0.75], "a"]}


def test_csv_has_one_line_per_prediction() -> None:
    assert encode_predictions(np.array([0, 2, 1]), "text/csv") == (b"0\n2\n1\n", "text/csv")
    body, _ = encode_predictions(np.array([[0.25, 0.75], [1.0, 0.0]]), "text/csv")
    assert body == b"0.25,0.75\n1.0,0.0\n"


def test_accept_order_picks_the_first_supported() -> None:
    assert encode_predictions([1], "text/csv, application/json")[1] == "text/csv"
    assert encode_predictions([1], "image/png, application/json")[1] == "application/json"


def test_npy_predictions_round_trip() -> None:
    body, content_type = encode_predictions(np.array([[0.5, 0.5]]), "application/x-npy")
    assert content_type == "application/x-npy"
    assert np.load(io.BytesIO(body)).tolist() == [[0.5, 0.5]]


def test_npy_predictions_of_object_labels() -> None:
    body, _ = encode_predictions(
        np.array(["setosa", "virginica"], dtype=object), "application/x-npy"
    )
    assert np.load(io.BytesIO(body)).tolist() == ["setosa", "virginica"]


def test_unsupported_accept_names_the_supported_types() -> None:
    with pytest.raises(BadRequestBody, match="application/json, text/csv"):
        encode_predictions([1], "image/png")


def test_encode_value_by_type() -> None:
    assert encode_value(b"\x00") == (b"\x00", "application/octet-stream")
    assert encode_value("hé") == ("hé".encode(), "text/plain; charset=utf-8")
    assert encode_value({"a": np.int64(1)}) == (b'{"a": 1}', "application/json")


matrices = arrays(
    np.float64,
    st.tuples(st.integers(1, 20), st.integers(1, 8)),
    elements=st.floats(allow_nan=False, allow_infinity=False, width=64),
)


@settings(deadline=None)
@given(matrices)
def test_float_matrices_round_trip_through_json(matrix: np.ndarray) -> None:
    body = json.dumps({"instances": matrix.tolist()}).encode()
    assert np.array_equal(decode_rows(body, "application/json"), matrix)
    encoded, _ = encode_predictions(matrix, "application/json")
    assert np.array_equal(np.array(json.loads(encoded)["predictions"]), matrix)


@settings(deadline=None)
@given(matrices)
def test_float_matrices_round_trip_through_csv(matrix: np.ndarray) -> None:
    body, _ = encode_predictions(matrix, "text/csv")
    assert np.array_equal(decode_rows(body, "text/csv"), matrix)
