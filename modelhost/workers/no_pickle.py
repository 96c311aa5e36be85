"""`--refuse-pickle` in a worker: no pickle that could run code is unpickled, whatever its file is
called, whichever handler reads it, however its folder reaches it.

Unpickling runs code only through the names a pickle imports (a class, or a function such as
`os.system` to call), and both of Python's unpicklers raise the `pickle.find_class` audit event
before they import one. A worker started with the option adds an audit hook, which no code can
remove, that refuses every such import; a pickle of plain data (lists, numbers, strings) imports
nothing and still loads. The frontend's refusal by file name (`cache/pickles.py`) answers sooner
with a better message; this is the guarantee.
"""

from __future__ import annotations

import sys

from modelhost.errors import UnsafeArtifact


def refuse_unpickling() -> None:
    """From now on in this process, every unpickler importing a name raises `UnsafeArtifact`."""
    sys.addaudithook(_refuse_imports_by_pickles)


def _refuse_imports_by_pickles(event: str, args: tuple[object, ...]) -> None:
    if event == "pickle.find_class":
        module, name = args
        raise UnsafeArtifact(
            f"this server refuses pickles (--refuse-pickle), and the model's file is one: "
            f"unpickling it would import {module}.{name}; ship ONNX, XGBoost JSON/UBJ or "
            "LightGBM text instead, or let an operator turn the option off"
        )
