"""Form bodies, as curl -F, requests' files= and HTML forms send them, decoded into the input a
handler is given and the text fields beside it; a form that cannot be read is a 400 that says
what to fix."""

from __future__ import annotations

import contextlib
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from modelhost.errors import BadRequestBody, ParameterTooLarge, RequestError
from modelhost.http.forms import FormInput, form_input, is_form
from modelhost.protocols.params import MAX_QUERY_CHARS


def encoded(files: Any = None, data: Any = None) -> tuple[bytes, str]:
    """A form's body and Content-Type, as an HTTP client writes them."""
    request = httpx.Request("POST", "http://localhost/", files=files, data=data)
    return request.read(), request.headers["content-type"]


def multipart(*parts: bytes, boundary: str = "b0") -> tuple[bytes, str]:
    """A multipart body written by hand: each part's headers and value, then the closing line."""
    body = b"".join(b"--" + boundary.encode() + b"\r\n" + part + b"\r\n" for part in parts)
    return body + b"--" + boundary.encode() + b"--\r\n", f"multipart/form-data; boundary={boundary}"


def curl_file(name: str, filename: str, value: bytes) -> bytes:
    """A file part as curl -F name=@filename writes it for a suffix it does not know."""
    disposition = f'Content-Disposition: form-data; name="{name}"; filename="{filename}"'
    return disposition.encode() + b"\r\nContent-Type: application/octet-stream\r\n\r\n" + value


@pytest.mark.parametrize(
    ("content_type", "form"),
    [
        ("multipart/form-data; boundary=x", True),
        ("Multipart/Form-Data; boundary=x", True),
        ("application/x-www-form-urlencoded", True),
        ("application/x-www-form-urlencoded; charset=utf-8", True),
        ("application/json", False),
        ("text/csv", False),
        ("", False),
    ],
)
def test_only_the_form_types_are_decoded(content_type: str, form: bool) -> None:
    assert is_form(content_type) is form


def test_data_file_is_the_input() -> None:
    """The data file is the input with its own type and fields are parameters."""
    body, content_type = encoded(
        files={"data": ("kitten.jpg", b"\xff\xd8 jpeg", "image/jpeg")}, data={"k": "v"}
    )
    assert form_input(body, content_type) == FormInput(b"\xff\xd8 jpeg", "image/jpeg", {"k": "v"})


def test_body_part_is_the_input_without_data() -> None:
    """A part named body is the input when none is named data."""
    body, content_type = encoded(data={"body": "[[1, 2]]", "k": "v"})
    assert form_input(body, content_type) == FormInput(b"[[1, 2]]", "application/json", {"k": "v"})


def test_the_only_file_is_the_input_whatever_its_name() -> None:
    """`requests.post(url, files={"file": f})`: the one file is the input."""
    body, content_type = encoded(
        files={"file": ("rows.csv", b"1,2\n", "text/csv")}, data={"a": "1"}
    )
    assert form_input(body, content_type) == FormInput(b"1,2\n", "text/csv", {"a": "1"})


@pytest.mark.parametrize(
    ("filename", "content_type"),
    [
        ("rows.json", "application/json"),
        ("rows.CSV", "text/csv"),
        ("rows.npy", "application/x-npy"),
        ("kitten.jpg", "application/octet-stream"),
        ("noext", "application/octet-stream"),
    ],
)
def test_curls_octet_stream_is_typed_by_the_file_suffix(filename: str, content_type: str) -> None:
    body, form_type = multipart(curl_file("data", filename, b"[1]"))
    assert form_input(body, form_type) == FormInput(b"[1]", content_type, {})


def test_untyped_part_is_json() -> None:
    """A part without a type is JSON as a body without one."""
    body, content_type = multipart(b'Content-Disposition: form-data; name="data"\r\n\r\n[1]')
    assert form_input(body, content_type) == FormInput(b"[1]", "application/json", {})


def test_urlencoded_fields_are_decoded() -> None:
    body = b"data=%5B%5B1%2C+2%5D%5D&method=predict_proba&empty="
    expected = FormInput(b"[[1, 2]]", "application/json", {"method": "predict_proba", "empty": ""})
    assert form_input(body, "application/x-www-form-urlencoded") == expected


@pytest.mark.parametrize("body", [b'{"instances": [[1, 2]]}', b"1,2\n3,4\n", b"\xff\xfe", b""])
def test_urlencoded_non_form_passes_on(body: bytes) -> None:
    """A urlencoded body that is not a form passes on.

    `curl -d @rows.json` types any text as a form: it reaches the handler as it came."""
    assert form_input(body, "application/x-www-form-urlencoded") is None


@pytest.mark.parametrize(
    ("body", "content_type", "says"),
    [
        (b"--b0\r\n", "multipart/form-data; boundary=b0", "closing boundary --b0--"),
        (b"not a form", "multipart/form-data; boundary=b0", "cannot be read"),
        (b"--b0--\r\n", "multipart/form-data", "no boundary parameter"),
        (
            multipart(b"Content-Disposition: form-data\r\n\r\n[1]")[0],
            "multipart/form-data; boundary=b0",
            "a part has no name",
        ),
    ],
    ids=["cut-short", "garbage", "no-boundary", "no-name"],
)
def test_a_malformed_multipart_body_says_what_to_fix(
    body: bytes, content_type: str, says: str
) -> None:
    with pytest.raises(BadRequestBody, match=says):
        form_input(body, content_type)


def test_a_second_file_is_refused_not_dropped() -> None:
    body, content_type = encoded(files={"data": ("a.jpg", b"a"), "mask": ("m.png", b"m")})
    with pytest.raises(BadRequestBody, match="files besides 'data' .*'mask'"):
        form_input(body, content_type)


def test_a_form_without_a_data_part_names_its_parts() -> None:
    body, content_type = encoded(files={"left": ("a.jpg", b"a"), "right": ("b.jpg", b"b")})
    with pytest.raises(BadRequestBody, match="no part named data .*'left', 'right'"):
        form_input(body, content_type)


def test_an_empty_form_asks_for_a_data_part() -> None:
    with pytest.raises(BadRequestBody, match="no part named data"):
        form_input(*multipart())


def test_a_field_that_is_not_text_is_refused() -> None:
    body, content_type = multipart(
        b'Content-Disposition: form-data; name="data"\r\n\r\n[1]',
        b'Content-Disposition: form-data; name="blob"\r\n\r\n\xff\xfe',
    )
    with pytest.raises(BadRequestBody, match="'blob' is not UTF-8"):
        form_input(body, content_type)


def test_text_fields_are_capped_as_a_query_is() -> None:
    body, content_type = encoded(data={"data": "[1]", "note": "x" * MAX_QUERY_CHARS})
    with pytest.raises(ParameterTooLarge, match="text fields are"):
        form_input(body, content_type)


PART_PIECES = [b"--b0", b"--b0--", b"\r\n", b"Content-Disposition: form-data", b'; name="data"']
PART_PIECES += [b'; filename="a.json"', b"Content-Type: text/csv", b"\r\n\r\n", b"1,2", b"\xff"]


@given(
    body=st.one_of(st.binary(max_size=200), st.lists(st.sampled_from(PART_PIECES)).map(b"".join)),
    content_type=st.sampled_from(
        ["multipart/form-data; boundary=b0", "application/x-www-form-urlencoded"]
    ),
)
def test_any_body_decodes_or_is_400(body: bytes, content_type: str) -> None:
    """Any body decodes or is refused as a bad request.

    No body typed as a form makes the decoder fail other than with a 4xx."""
    with contextlib.suppress(RequestError):
        form_input(body, content_type)


def test_malformed_body_is_told_to_the_client(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """A malformed body is told to the client, not the log."""
    with pytest.raises(BadRequestBody):
        form_input(b"not a form", "multipart/form-data; boundary=b0")
    assert capsys.readouterr().err == ""
    assert caplog.records == []
