"""errors.py draws its exception tree in its docstring; the drawing, the classes and the HTTP
status table must say the same thing, or a reader (and the status mapping) goes wrong."""

from __future__ import annotations

import re

from modelhost import errors
from modelhost.protocols.status import STATUS_BY_ERROR, status_of

DRAWN = re.compile(r"^(?P<indent>[│├└─\s]*?)(?P<name>[A-Z]\w+)", re.MULTILINE)


def drawn_tree() -> dict[str, str | None]:
    """Each class the docstring draws, with the class drawn as its parent."""
    parents: dict[str, str | None] = {}
    path: list[tuple[int, str]] = []
    for match in DRAWN.finditer(errors.__doc__ or ""):
        depth, name = len(match.group("indent")), match.group("name")
        if not name.endswith("Error") and name not in vars(errors):
            continue
        while path and path[-1][0] >= depth:
            path.pop()
        parents[name] = path[-1][1] if path else None
        path.append((depth, name))
    return parents


def classes() -> dict[str, str | None]:
    found = {
        name: cls
        for name, cls in vars(errors).items()
        if isinstance(cls, type) and issubclass(cls, errors.ModelhostError)
    }
    return {
        name: None if cls is errors.ModelhostError else cls.__bases__[0].__name__
        for name, cls in found.items()
    }


def test_the_docstring_draws_every_class_under_its_real_parent() -> None:
    assert drawn_tree() == classes()


def test_every_error_a_caller_can_get_has_a_status() -> None:
    for name in classes():
        status = status_of(getattr(errors, name)(""))
        assert 400 <= status <= 599, name


def test_the_status_table_names_only_classes_of_the_tree() -> None:
    assert {cls.__name__ for cls in STATUS_BY_ERROR} <= set(classes())


def test_an_error_telling_a_load_is_a_copy() -> None:
    """A batch's requests share one error; each tells its own load on a copy that keeps what
    the constructor set, and the shared one tells none."""
    for shared, kept in (
        (errors.HandlerError("refused", status=422), "status"),
        (errors.RateLimited("refused", retry_after_s=7), "retry_after_s"),
        (errors.BadRequestBody("refused"), "type_name"),
    ):
        own = shared.telling("a load")
        assert type(own) is type(shared) and own.args == shared.args == ("refused",)
        assert getattr(own, kept) == getattr(shared, kept)
        assert own.loaded == "a load" and shared.loaded is None
