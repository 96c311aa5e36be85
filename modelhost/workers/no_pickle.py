"""Untrusted models in a worker (`--refuse-pickle`, a tenant's trust): no pickle that could
run code is unpickled.

Unpickling runs code only through the names it imports, and both unpicklers raise the
`pickle.find_class` audit event first. An audit hook cannot be removed, so this is the
guarantee; the frontend's refusal by file name answers sooner.
"""

from __future__ import annotations

import sys

from modelhost.errors import UnsafeArtifact

_why = ["--refuse-pickle"]  # why this worker's models are untrusted, for the refusal


def refused_because(why: str) -> None:
    """Say `why` in the refusals from now on: the reason the worker's models are untrusted."""
    _why[0] = why


def refuse_unpickling() -> None:
    """Make every unpickler in this process that imports a name raise `UnsafeArtifact`."""
    sys.addaudithook(_refuse_imports_by_pickles)


def _refuse_imports_by_pickles(event: str, args: tuple[object, ...]) -> None:
    if event == "pickle.find_class":
        module, name = args
        raise UnsafeArtifact(
            f"this server refuses pickles for untrusted models ({_why[0]}), and the model's "
            f"file is one: unpickling it would import {module}.{name}; ship ONNX, XGBoost "
            "JSON/UBJ or LightGBM text instead, or ask the operator to trust it"
        )
