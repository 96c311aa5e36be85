"""The frontend's warm Python cost of one invocation, layer by layer, in one process.

No sockets and no worker: the host runs on the tests' fake pool, which answers a batch the moment
it is sent, so what is timed is modelhost's own code on the invoke path, warm (the same request
again and again): `host.invoke` (admission, the model's record, its queue and dispatcher, the
batch's answer), the invocation endpoint over it (headers, body, observer and metrics, the
response), and the whole ASGI stack (the instance header and the last resort around it). At c=1
the real frontend costs more than this (each request finds its code cold after the worker ran);
compare versions here, then confirm with cpu_per_request.py.

    python benchmarks/warm_path.py
    PYTHONPATH=/path/to/other/checkout python benchmarks/warm_path.py   # another version
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from _common import REPO, markdown_table

sys.path.insert(0, str(REPO / "tests"))  # the fake pool and disk the host's unit tests use

from host.fakes import AnsweringPool, Call, host_with  # noqa: E402

from modelhost.host import Invocation  # noqa: E402
from modelhost.http.app import build_app  # noqa: E402
from modelhost.http.routes import HttpSettings, SageMakerRoutes  # noqa: E402
from modelhost.observe.observer import Observer  # noqa: E402
from modelhost.records.events import EventLog  # noqa: E402
from modelhost.workers.messages import Answer, Answered, Infer  # noqa: E402

REQUESTS = 20_000
BODY = b"[[5.1, 3.5, 1.4, 0.2]]"


class AnswersAtOnce(AnsweringPool):
    """Answers a batch in the call that sends it (loads as the fake pool does)."""

    def called(self, call: Call) -> None:
        if not isinstance(call.request, Infer):
            return super().called(call)
        self.calls.remove(call)
        answers = (Answer("application/json", 3),) * len(call.request.items)
        call.future.set_result((Answered(answers, 0.1), b"[0]" * len(answers)))


async def layers() -> dict[str, Callable[[], Awaitable[Any]]]:
    host = host_with(AnswersAtOnce(1), Path(tempfile.mkdtemp()), {})  # type: ignore[abstract]
    host.events = EventLog()  # the observer subscribes to it
    invocation = Invocation(BODY, "application/json", "application/json", {})
    await host.invoke("m", invocation)  # loaded: every timed request is a hit
    observer = Observer(host)
    app = build_app(SageMakerRoutes(host, HttpSettings(6 * 2**20, "", "", "i")), observer)
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/models/m/invoke",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json"), (b"content-length", b"22")],
    }

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": BODY, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        pass

    return {
        "host.invoke": lambda: host.invoke("m", invocation),
        "invocation endpoint": lambda: app.invocations(scope, receive, send),
        "whole ASGI stack": lambda: app(scope, receive, send),
    }


async def timed() -> list[list[str]]:
    rows = []
    loop = asyncio.get_running_loop()
    for name, call in (await layers()).items():
        for _ in range(2):  # the first round warms up
            started = time.perf_counter()
            for _ in range(REQUESTS):
                await loop.create_task(call())  # a task each, as the server's requests have
            spent_us = (time.perf_counter() - started) / REQUESTS * 1e6
        rows.append([name, f"{spent_us:.1f}"])
    return rows


def main() -> None:
    import uvloop

    print(
        markdown_table(["layer (and those under it)", "µs per request, warm"], uvloop.run(timed()))
    )


if __name__ == "__main__":
    main()
