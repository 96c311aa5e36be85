"""`--refuse-pickle` in a worker: no pickle that could run code is unpickled.

Unpickling runs code only through the names it imports, and both unpicklers raise the
`pickle.find_class` audit event first. An audit hook cannot be removed, so this is the
guarantee; the frontend's refusal by file name answers sooner.
"""

from __future__ import annotations

import sys

from modelhost.errors import UnsafeArtifact


def refuse_unpickling() -> None:
    """Make every unpickler in this process that imports a name raise `UnsafeArtifact`."""
    sys.addaudithook(_refuse_imports_by_pickles)


def _refuse_imports_by_pickles(event: str, args: tuple[object, ...]) -> None:
    if event == "pickle.find_class":
        module, name = args
        raise UnsafeArtifact(
            f"this server refuses pickles (--refuse-pickle), and the model's file is one: "
            f"unpickling it would import {module}.{name}; ship ONNX, XGBoost JSON/UBJ or "
            "LightGBM text instead, or let an operator turn the option off"
        )
