"""Fronts under concurrent load: the worker merges the waiting batches of a model from the
fronts, and each request still gets its own rows' answers.

Three senders and one inference slot: two senders never both wait (one's batch runs while the
other's waits), so merging needs a third."""

from __future__ import annotations

import http.client
import itertools
import json
import threading
import time
from pathlib import Path

import psutil
from helpers.serving import Servers

from modelhost import testing

MODEL = "iris.pkl"
# iris rows and the class the logistic regression gives each
ROWS = {(5.1, 3.5, 1.4, 0.2): 0, (6.7, 3.0, 5.2, 2.3): 2, (5.9, 2.8, 4.3, 1.3): 1}
CONNECTIONS = 16  # each lands on one of three fronts
REQUESTS = 40  # a connection's


def asks() -> list[list[tuple[float, ...]]]:
    """Row lists that differ from each other, so an answer routed to another request shows."""
    rows = list(ROWS)
    return [list(order) for size in (1, 2, 3) for order in itertools.permutations(rows, size)]


class Caller(threading.Thread):
    """Asks its own rows on one keep-alive connection; keeps the answers that were wrong."""

    def __init__(self, server: testing.RunningServer, rows: list[tuple[float, ...]]) -> None:
        super().__init__(daemon=True)
        self.connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        self.connection.connect()  # no other request: a front's connection stays direct
        self.server, self.rows = server, rows
        self.wrong, self.answered, self.front = list[object](), 0, 0

    def run(self) -> None:
        expected = {"predictions": [ROWS[row] for row in self.rows]}
        body = json.dumps([list(row) for row in self.rows])
        headers = {"content-type": "application/json"}
        for _ in range(REQUESTS):
            self.connection.request("POST", f"/models/{MODEL}/invoke", body, headers)
            response = self.connection.getresponse()
            answer = (response.status, json.loads(response.read()))
            self.answered += 1
            if self.answered == 1:  # accepted by now: its holder shows
                self.front = front_of(self.server, self.port())
            if answer != (200, expected):
                self.wrong.append(answer)
        self.connection.close()

    def port(self) -> int:
        assert self.connection.sock is not None
        return int(self.connection.sock.getsockname()[1])


def front_of(server: testing.RunningServer, port: int) -> int:
    """The pid of the front holding the connection from client port `port`."""
    fronts = [p for p in psutil.Process(server.pid).children() if "fronts" in " ".join(p.cmdline())]
    [pid] = [
        p.pid for p in fronts for c in p.net_connections("tcp") if c.raddr and c.raddr.port == port
    ]
    return pid


def test_both_senders_under_load_get_their_own_answers(store: Path, serve: Servers) -> None:
    """Sixteen connections spread over three fronts, one worker of one slot:
    the batches it merges are answered back to the right requests, every answer its own rows'."""
    server = serve(store, workers=1, fronts=3, memory_budget="4GiB", threads_per_worker=1)
    Caller(server, list(ROWS)).run()  # loaded
    time.sleep(0.5)  # the fronts' tables have the model
    rows = itertools.cycle(asks())
    callers = [Caller(server, next(rows)) for _ in range(CONNECTIONS)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join(120)
    assert [caller.answered for caller in callers] == [REQUESTS] * CONNECTIONS
    assert [caller.wrong for caller in callers] == [[]] * CONNECTIONS
    assert len({caller.front for caller in callers}) >= 2  # senders beside each other
