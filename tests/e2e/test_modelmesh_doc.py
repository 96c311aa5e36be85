"""docs/migrating-modelmesh.md followed as an operator reads it: what it says of gRPC is what
deploy/k8s/base does."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "migrating-modelmesh.md"
DEPLOYMENT = ROOT / "deploy" / "k8s" / "base" / "deployment.yaml"
GRPC_INGRESS = ROOT / "deploy" / "k8s" / "base" / "ingress-grpc.yaml"


def test_grpc_is_said_to_be_where_the_base_serves_it() -> None:
    """The pods the page deploys serve gRPC on the base's --grpc-port, behind its gRPC ingress:
    the page says so, and gives the port."""
    (container,) = yaml.safe_load(DEPLOYMENT.read_text())["spec"]["template"]["spec"]["containers"]
    (flag,) = [arg for arg in container["args"] if arg.startswith("--grpc-port=")]
    ingress = yaml.safe_load(GRPC_INGRESS.read_text())["metadata"]["name"]
    text = " ".join(DOC.read_text().split())
    assert f"gRPC on {flag.removeprefix('--grpc-port=')}" in text
    assert f"`{ingress}` ingress" in text
