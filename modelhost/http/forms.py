"""Form bodies of invocations, decoded into the handler's one body and text parameters.

As in TorchServe, the part named `data`, else `body`, is the body and other text fields are
parameters. A second file is refused rather than dropped. A body typed as a form that is not
one passes on as it came, since `curl -d @rows.json` types any text so.
"""

from __future__ import annotations

import logging
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header

from modelhost.errors import BadRequestBody, ParameterTooLarge
from modelhost.names import echo
from modelhost.protocols.params import MAX_QUERY_CHARS

if TYPE_CHECKING:
    from python_multipart.multipart import MultipartCallbacks

MULTIPART = "multipart/form-data"
URLENCODED = "application/x-www-form-urlencoded"
BODY_PARTS = ("data", "body")
UNTYPED = "application/json"  # as a body with no Content-Type is taken
# for a file part that curl sends as application/octet-stream
TYPE_OF_SUFFIX = {".json": "application/json", ".csv": "text/csv", ".npy": "application/x-npy"}
HOW_TO_SEND = "send the input as a part named data (curl -F data=@file)"
# the 400 tells the client; python-multipart would log each malformed body
QUIET = logging.Logger("modelhost.http.forms", logging.CRITICAL + 1)


@dataclass(frozen=True)
class Part:
    """One field of a form; `file_name` None for a text field."""

    name: str
    value: bytes
    content_type: str = ""
    filename: str | None = None


@dataclass(frozen=True)
class FormInput:
    body: bytes
    content_type: str
    fields: dict[str, str]


def is_form(content_type: str) -> bool:
    lowered = content_type.lower()
    # every invocation asks: one substring scan rules out the other bodies
    return "form" in lowered and lowered.startswith((MULTIPART, URLENCODED))


def form_input(body: bytes, content_type: str) -> FormInput | None:
    """The body and fields of a form body; None for a urlencoded body that is not a form."""
    if content_type.lower().startswith(MULTIPART):
        return chosen(multipart_parts(body, content_type))
    parts = urlencoded_parts(body)
    return chosen(parts) if parts is not None else None


def urlencoded_parts(body: bytes) -> list[Part] | None:
    """The fields of `a=1&b=2`; None if it is not a form."""
    try:
        text = body.decode("utf-8")
        pairs = urllib.parse.parse_qsl(text, keep_blank_values=True, strict_parsing=True)
    except (UnicodeDecodeError, ValueError):
        return None
    return [Part(name, value.encode()) for name, value in pairs] or None


def multipart_parts(body: bytes, content_type: str) -> list[Part]:
    """The parts of a multipart/form-data body, or 400 saying what is wrong."""
    boundary = parse_options_header(content_type)[1].get(b"boundary")
    if not boundary:
        raise BadRequestBody(
            "the Content-Type multipart/form-data has no boundary parameter; let the client "
            "write the header (curl -F, requests' files=) rather than setting it by hand"
        )
    collector = _PartCollector()
    parser = MultipartParser(boundary, collector.callbacks())
    parser.logger = QUIET
    try:
        parser.write(body)
    except MultipartParseError as error:
        raise malformed(f"it cannot be read ({error})") from None
    if not collector.ended:
        raise malformed(f"it ends before its closing boundary --{boundary.decode('latin-1')}--")
    return collector.parts


def malformed(why: str) -> BadRequestBody:
    return BadRequestBody(
        f"the multipart/form-data body is malformed: {why}; send each part between the "
        "boundary lines the Content-Type names, as curl -F or requests' files= write them"
    )


def chosen(parts: list[Part]) -> FormInput:
    """The body part and the text fields; 400 for a form a handler cannot be given."""
    body = body_part(parts)
    others = [part for part in parts if part is not body]
    files = [part.name for part in others if part.filename is not None]
    if files:
        raise BadRequestBody(
            f"the form holds files besides {echo(body.name)} (parts {', '.join(map(echo, files))});"
            f" a handler is given one file per request: {HOW_TO_SEND}, and other fields as text"
        )
    return FormInput(body.value, type_of(body), text_fields(others))


def body_part(parts: list[Part]) -> Part:
    """The part named data, else body, else the only file, else the only part."""
    for name in BODY_PARTS:
        for part in parts:
            if part.name == name:
                return part
    files = [part for part in parts if part.filename is not None]
    candidates = files or parts
    if len(candidates) == 1:
        return candidates[0]
    names = ", ".join(echo(part.name) for part in candidates) or "none"
    raise BadRequestBody(f"the form has no part named data (its parts: {names}); {HOW_TO_SEND}")


def type_of(part: Part) -> str:
    """The part's own type, or its file name's suffix's where it says only "binary"."""
    kind = part.content_type or UNTYPED
    if kind.lower() == "application/octet-stream" and part.filename:
        suffix = "." + part.filename.rpartition(".")[2].lower()
        return TYPE_OF_SUFFIX.get(suffix, kind)
    return kind


def text_fields(parts: list[Part]) -> dict[str, str]:
    fields: dict[str, str] = {}
    for part in parts:
        try:
            fields[part.name] = part.value.decode("utf-8")
        except UnicodeDecodeError:
            raise BadRequestBody(
                f"the form's field {echo(part.name)} is not UTF-8 text; send it as a file part "
                "named data, or encode it as text"
            ) from None
    size = sum(len(name) + len(value) for name, value in fields.items())
    if size > MAX_QUERY_CHARS:
        raise ParameterTooLarge(
            f"the form's text fields are {size} characters long in all but at most "
            f"{MAX_QUERY_CHARS} are accepted beside the input; {HOW_TO_SEND} and send less text"
        )
    return fields


class _PartCollector:
    """python-multipart's callbacks, collecting each part whole."""

    def __init__(self) -> None:
        self.parts: list[Part] = []
        self.ended = False
        self._headers: dict[bytes, bytes] = {}
        self._field = self._value = b""
        self._chunks: list[bytes] = []

    def callbacks(self) -> MultipartCallbacks:
        return {
            "on_part_begin": self._begin,
            "on_header_field": self._header_field,
            "on_header_value": self._header_value,
            "on_header_end": self._header_end,
            "on_part_data": self._data,
            "on_part_end": self._end_part,
            "on_end": self._end,
        }

    def _begin(self) -> None:
        self._headers, self._chunks = {}, []

    def _header_field(self, data: bytes, start: int, end: int) -> None:
        self._field += data[start:end]

    def _header_value(self, data: bytes, start: int, end: int) -> None:
        self._value += data[start:end]

    def _header_end(self) -> None:
        self._headers[self._field.lower()] = self._value
        self._field = self._value = b""

    def _data(self, data: bytes, start: int, end: int) -> None:
        self._chunks.append(data[start:end])

    def _end_part(self) -> None:
        disposition = parse_options_header(self._headers.get(b"content-disposition", b""))[1]
        name, filename = disposition.get(b"name"), disposition.get(b"filename")
        if name is None:
            raise malformed('a part has no name in its Content-Disposition: form-data; name="…"')
        self.parts.append(
            Part(
                name.decode("utf-8", "replace"),
                b"".join(self._chunks),
                self._headers.get(b"content-type", b"").decode("latin-1").strip(),
                filename.decode("utf-8", "replace") if filename is not None else None,
            )
        )

    def _end(self) -> None:
        self.ended = True
