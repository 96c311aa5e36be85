"""What a model name may be, checked once wherever a name enters (every HTTP route that takes one).

A name is a relative POSIX path in the model store (``tenants/t007.joblib``) or a name given at
registration (``acme-churn``). Names become keys of the store, folders of the disk tier and fields
of the frames sent to workers, so anything that could escape a folder or a frame is refused.
"""

from __future__ import annotations

import unicodedata

from modelhost.errors import InvalidModelName

MAX_NAME_BYTES = 256
MAX_PART_BYTES = 255  # a file name's limit on most file systems
MAX_ECHO_CHARS = 200  # of a refused value, in an error message

VALID = (
    f"a valid name is a relative path such as tenants/t007.joblib, at most {MAX_NAME_BYTES} "
    "bytes of UTF-8, with no empty, '.' or '..' parts, no leading '/', no backslash and no "
    "control characters"
)


def model_name(name: str) -> str:
    """`name`, if it is a valid model name; else InvalidModelName saying what a valid one is."""
    problem = _problem(name)
    if problem:
        raise InvalidModelName(f"invalid model name {echo(name)}: {problem}; {VALID}")
    return name


def _problem(name: str) -> str:
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "it is not valid UTF-8"
    if size > MAX_NAME_BYTES:
        return f"it is {size} bytes long"
    if not (name.isascii() and name.isprintable()) and any(
        unicodedata.category(char) == "Cc" for char in name
    ):
        return "it holds a control character"
    if "\\" in name:
        return "it holds a backslash"
    for part in name.split("/"):
        if part in ("", ".", ".."):
            return "it has an empty, '.' or '..' part (or a leading or trailing '/')"
        if len(part.encode("utf-8")) > MAX_PART_BYTES:
            return f"a part of it is over {MAX_PART_BYTES} bytes long"
    return ""


def echo(value: str) -> str:
    """`value` quoted for an error message, cut to MAX_ECHO_CHARS characters."""
    if len(value) <= MAX_ECHO_CHARS:
        return repr(value)
    return f"{value[:MAX_ECHO_CHARS]!r}... ({len(value)} characters)"
