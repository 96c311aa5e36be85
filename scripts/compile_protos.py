"""Compile modelhost/rpc/protos/*.proto into the descriptor set the server loads.

Run after editing a .proto: `.venv/bin/python scripts/compile_protos.py`. Needs grpcio-tools
(the dev extra); tests/rpc/test_descriptors.py fails while the checked-in set is stale.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

PROTOS = Path(__file__).resolve().parent.parent / "modelhost" / "rpc" / "protos"
FILES = ("open_inference.proto", "torchserve/inference.proto", "torchserve/management.proto")


def compiled() -> bytes:
    """The FileDescriptorSet of our protos and what they import, as protoc writes it."""
    import google.rpc
    import grpc_tools
    from grpc_tools import protoc

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    googleapis = Path(google.rpc.__path__[0]).parent.parent  # google/rpc/status.proto
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "set.binpb"
        argv = ["protoc", f"-I{PROTOS}", f"-I{well_known}", f"-I{googleapis}"]
        argv += ["--include_imports", f"--descriptor_set_out={out}", *FILES]
        if protoc.main(argv) != 0:
            raise SystemExit("protoc failed: see its message above")
        return out.read_bytes()


def main() -> int:
    target = PROTOS / "descriptors.binpb"
    target.write_bytes(compiled())
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
