"""Checks on what callers put in headers and query parameters, before any of it is used."""

from __future__ import annotations


def is_whole_number(text: str) -> bool:
    """ASCII digits only: `str.isdigit` also takes '²' and other digits that `int` refuses."""
    return text.isascii() and text.isdigit()
