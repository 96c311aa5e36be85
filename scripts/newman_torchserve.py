"""Run one of TorchServe's own Postman collections with newman against a real modelhost.

The collection's archives are `.mar` files of our own under TorchServe's names, as the mirror
tests build them (tests/e2e/test_conformance_ts_management.py); the collection, its data file
and environment come from a pytorch/serve checkout, not from here. Prints newman's totals and
each request answered otherwise, to read against the mirror's `ours` steps.

    npm install newman@6   # where npm's registry is reachable
    python scripts/newman_torchserve.py SERVE/test/postman/management_api_test_collection.json \\
        SERVE/test/postman/management_data.json SERVE/test/postman/environment.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from modelhost import testing

ARCHIVES = ("squeezenet1_1", "mnist", "densenet161", "resnet-152-batch", "resnet-18")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("collection")
    parser.add_argument("data")
    parser.add_argument("environment")
    parser.add_argument("--newman", default="node_modules/.bin/newman")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="modelhost-newman-") as scratch:
        report = run(Path(scratch), args)
    print(json.dumps(report["run"]["stats"]))
    rows = json.loads(Path(args.data).read_text())
    for execution in report["run"]["executions"]:
        if any(assertion.get("error") for assertion in execution.get("assertions", [])):
            print(answered_otherwise(rows[execution["cursor"]["iteration"]], execution))


def run(folder: Path, args: argparse.Namespace) -> Any:
    """newman's JSON report of the collection over its data, against a fresh server."""
    store = folder / "store"
    source = testing.mms_handler_folder(store / ".src/iris")
    for name in ARCHIVES:
        testing.mar_of(source, store / f"{name}.mar")
    management = testing.free_port()
    serve_args = [*testing.serve_args(store, folder / "cache", workers=1), "--memory-budget"]
    serve_args += ["4GiB", "--management-port", str(management)]
    report = folder / "report.json"
    with testing.RunningServer(serve_args, folder) as server:
        ports = [f"mgmt-port={management}", f"pred-port={server.url.rsplit(':', 1)[1]}"]
        variables = [
            flag for value in [*ports, "hostname=127.0.0.1"] for flag in ("--env-var", value)
        ]
        command = [args.newman, "run", args.collection, "-e", args.environment, "-d", args.data]
        command += [*variables, "-r", "json", "--reporter-json-export", str(report)]
        subprocess.run(command, capture_output=True, check=False)
    return json.loads(report.read_text())


def answered_otherwise(row: dict[str, Any], execution: dict[str, Any]) -> str:
    """The request as sent (the data rows of some collections name no method or path), the
    status its row expects and the answer."""
    request, response = execution["request"], execution.get("response")
    path = "/" + "/".join(request["url"]["path"])
    expected = row.get("status_code", 200)
    asked = f"{execution['item']['name']}: {request['method']} {path}: {expected}"
    if response is None:  # newman could not send it: a missing file, a refused connection
        return f"{asked}, not sent: {execution.get('requestError', {}).get('message')}"
    body = bytes(response["stream"]["data"]).decode(errors="replace")[:120]
    return f"{asked}, got {response['code']}: {body}"


if __name__ == "__main__":
    main()
