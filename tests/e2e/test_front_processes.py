"""`--fronts 2`: the port's connections spread over two front processes, and each is answered
as the main process alone answers it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from helpers.fronts import (
    Connection,
    connect,
    direct_on_front,
    front_pids,
    hit_with_the_main_process_stopped,
    raw_invoke,
    raw_request,
)
from helpers.serving import Servers, in_flight, scraped, until_answering
from prometheus_client.parser import text_string_to_metric_families

from modelhost import testing

MODEL = "iris.pkl"
# iris rows and the class the logistic regression gives each
ROWS = {(5.1, 3.5, 1.4, 0.2): 0, (6.7, 3.0, 5.2, 2.3): 2, (5.9, 2.8, 4.3, 1.3): 1}
HEADERS = {"content-type": "application/json"}
CONNECTIONS = 24  # each lands on either front with odds of one half
REPORTED_S = 10.0  # a front's report is due within a tenth of a second: ample


@pytest.fixture(scope="module")
def fronted(store: Path, serve: Servers) -> testing.RunningServer:
    return serve(store, workers=2, fronts=2, memory_budget="4GiB")


@pytest.fixture(scope="module")
def alone(store: Path, serve: Servers) -> testing.RunningServer:
    """The main process alone on its port: the answers a front's must match."""
    return serve(store, workers=2, memory_budget="4GiB")


def invoke_rows(connection: Connection, model: str = MODEL) -> None:
    """One invocation of every row; each answer must be the row's class."""
    status, body = connection.call("POST", f"/models/{model}/invoke", [list(r) for r in ROWS])
    assert status == 200, body
    assert json.loads(body) == {"predictions": list(ROWS.values())}


def load_once(server: testing.RunningServer) -> None:
    connection = connect(server)
    invoke_rows(connection)
    connection.close()


def on_front(server: testing.RunningServer) -> Iterator[Connection]:
    """Fresh connections the front accepted (the main process's are closed)."""
    fronts = front_pids(server)
    while True:
        connection = connect(server)
        connection.call("GET", "/ping")  # the front has accepted it once it answered
        if connection.holder(fronts) is not None:
            yield connection
        else:
            connection.close()


def test_connections_spread_over_the_fronts_alone(fronted: testing.RunningServer) -> None:
    """The kernel gives both fronts connections and the main process none, and every row is
    answered right."""
    fronts = front_pids(fronted)
    assert len(fronts) == 2
    connections = [connect(fronted) for _ in range(CONNECTIONS)]
    try:
        for connection in connections:
            invoke_rows(connection)
        holders = [connection.holder(fronts) for connection in connections]
    finally:
        for connection in connections:
            connection.close()
    assert set(holders) == set(fronts)


def test_the_start_line_counts_the_front_processes(fronted: testing.RunningServer) -> None:
    pids = ", ".join(map(str, sorted(front_pids(fronted))))
    line = f"2 front processes take port {fronted.port}'s connections (pids {pids})"
    assert line in fronted.log_text()


def test_a_relayed_caller_manages_from_loopback(fronted: testing.RunningServer) -> None:
    """The main process sees the front's client as itself: a loopback DELETE is allowed, and
    the next invocation is a miss, relayed, loaded and answered."""
    connection = next(on_front(fronted))
    try:
        invoke_rows(connection)
        status, body = connection.call("DELETE", f"/models/{MODEL}")
        assert status == 200, body
        invoke_rows(connection)
    finally:
        connection.close()
    assert fronted.events("unload") and len(fronted.events("load")) >= 2


def scrape(server: testing.RunningServer) -> float:
    """The invocations answered 200 so far, as /metrics counts them."""
    text = httpx.get(f"{server.url}/metrics").text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "modelhost_http_requests_total"
        and sample.labels.get("status") == "200"
        and sample.labels.get("route", "").endswith("invoke")
    )


def test_metrics_count_the_fronts_requests(fronted: testing.RunningServer) -> None:
    """Every invocation counts once in /metrics, whichever process accepted its connection and
    whoever answered it: a front reports its hits within an interval."""
    load_once(fronted)  # loaded: the front's own connections answer hits
    before = settled_scrape(fronted)  # earlier requests' reports have come in
    for _ in range(CONNECTIONS):
        connection = connect(fronted)
        invoke_rows(connection)
        connection.close()
    deadline = time.monotonic() + REPORTED_S
    while scrape(fronted) - before < CONNECTIONS and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # a count past the requests would show by now
    assert scrape(fronted) - before == CONNECTIONS


def settled_scrape(server: testing.RunningServer) -> float:
    """The count once two scrapes a few report intervals apart agree."""
    count = scrape(server)
    while True:
        time.sleep(0.3)
        count, last = scrape(server), count
        if count == last:
            return count


class Hammer(threading.Thread):
    """Invokes on fresh connections until told to stop; keeps every answer it got."""

    def __init__(self, server: testing.RunningServer) -> None:
        super().__init__(daemon=True)
        self.server, self.stopping = server, threading.Event()
        self.answers: list[tuple[int, bytes]] = []

    def run(self) -> None:
        rows = [list(r) for r in ROWS]
        while not self.stopping.is_set():
            connection = connect(self.server)
            for _ in range(5):
                self.answers.append(connection.call("POST", f"/models/{MODEL}/invoke", rows))
            connection.close()


def hammered(server: testing.RunningServer, meanwhile: object) -> list[tuple[int, bytes]]:
    hammers = [Hammer(server) for _ in range(4)]
    for hammer in hammers:
        hammer.start()
    try:
        assert callable(meanwhile)
        meanwhile()
    finally:
        for hammer in hammers:
            hammer.stopping.set()
        for hammer in hammers:
            hammer.join(60)
    return [answer for hammer in hammers for answer in hammer.answers]


def assert_all_right(answers: list[tuple[int, bytes]]) -> None:
    wrong = [a for a in answers if a != (200, b'{"predictions":[0,2,1]}')]
    assert answers and wrong == []


def test_unloads_under_load_give_only_right_answers(fronted: testing.RunningServer) -> None:
    """DELETEs while clients hammer the model through both processes: every answer right."""

    def unload_five_times() -> None:
        with httpx.Client(base_url=fronted.url, timeout=60) as client:
            for _ in range(5):
                time.sleep(0.3)
                assert client.delete(f"/models/{MODEL}").status_code in (200, 404)

    assert_all_right(hammered(fronted, unload_five_times))


def test_a_killed_worker_heals_under_load(fronted: testing.RunningServer) -> None:
    """A worker SIGKILLed under load through the fronts costs a retry, never a wrong answer."""

    def kill_a_worker() -> None:
        time.sleep(0.5)
        workers = httpx.get(f"{fronted.url}/stats").json()["workers"]
        os.kill(workers[0]["pid"], signal.SIGKILL)
        time.sleep(1.5)

    assert_all_right(hammered(fronted, kill_a_worker))


def test_pipelined_requests_through_a_front_are_answered_in_order(
    fronted: testing.RunningServer,
) -> None:
    """Two requests in one write through a front: two answers, in the order asked."""
    connection = next(on_front(fronted))
    body = json.dumps([list(next(iter(ROWS)))]).encode()
    head = f"POST /models/{MODEL}/invoke HTTP/1.1\r\nhost: x\r\ncontent-length: {len(body)}\r\n"
    ping = b"GET /ping HTTP/1.1\r\nhost: x\r\n\r\n"
    assert connection.sock is not None
    connection.sock.sendall(head.encode() + b"content-type: application/json\r\n\r\n" + body + ping)
    answers = b""
    while not answers.endswith(b"}") or answers.count(b"HTTP/1.1 200 OK") < 2:
        chunk = connection.sock.recv(65536)
        assert chunk, answers
        answers += chunk
    connection.close()
    assert answers.count(b"HTTP/1.1 ") == 2
    assert 0 < answers.index(b'{"predictions":[0]}') < answers.index(b'{"status":"Healthy"}')


def test_sigterm_stops_every_front_after_its_requests(store: Path, serve: Servers) -> None:
    """SIGTERM while a request runs through a front: it is answered, then the main process and
    every front exit, the server with 0."""
    server = serve(store, workers=1, fronts=3, memory_budget="4GiB")
    fronts = front_pids(server)
    assert len(fronts) == 3
    connection = next(on_front(server))
    body = json.dumps({"sleep": 1.5})
    connection.request("POST", "/models/slow/invoke", body=body, headers=HEADERS)
    until_answering(server, 1)
    stopped: list[int] = []
    stopping = threading.Thread(target=lambda: stopped.append(server.stop()))
    stopping.start()
    response = connection.getresponse()
    assert (response.status, json.loads(response.read())) == (200, {"slept": 1.5})
    connection.close()
    stopping.join(60)
    assert stopped == [0] and server.leaked_pids == []
    assert not any(psutil.pid_exists(pid) for pid in fronts)


JSON_TYPE = "content-type: application/json"
INVOKE = raw_request(
    f"/models/{MODEL}/invoke", json.dumps([list(r) for r in ROWS]).encode(), JSON_TYPE
)


def masked(answer: bytes) -> list[bytes]:
    """The answer's lines, the date's, the timings' and the request id's values masked: they
    differ by request."""
    lines = answer.split(b"\r\n")
    varying = (b"date:", b"server-timing:", b"x-request-id:")
    return [line.split(b":")[0] if line.startswith(varying) else line for line in lines]


def test_a_front_answers_hits_while_the_main_process_is_stopped(
    fronted: testing.RunningServer, alone: testing.RunningServer
) -> None:
    """With the main process stopped (SIGSTOP), a hit on a front's connection is still answered:
    the front asked the worker itself. Its bytes are a main process's own, date and timings
    aside."""
    load_once(fronted)
    answered = hit_with_the_main_process_stopped(fronted, INVOKE)
    assert answered.startswith(b"HTTP/1.1 200 OK"), answered
    assert masked(answered_alone(alone, INVOKE)) == masked(answered)


def answered_alone(alone: testing.RunningServer, request: bytes) -> bytes:
    """The answer of a server without fronts to `request`, its model loaded first."""
    connection = connect(alone)
    try:
        raw_invoke(connection, request)
        return raw_invoke(connection, request)
    finally:
        connection.close()


FLAT_ROWS = [value for row in ROWS for value in row]
OIP_ROWS = {"inputs": [{"name": "input-0", "datatype": "FP64", "shape": [3, 4], "data": FLAT_ROWS}]}
BINARY_OUT = {
    **OIP_ROWS,
    "outputs": [{"name": "predict_proba", "parameters": {"binary_data": True}}],
}
WRONG_SHAPE = {
    "inputs": [{"name": "input-0", "datatype": "FP64", "shape": [1, 3], "data": [1, 2, 3]}]
}


def binary_rows(path: str) -> bytes:
    """OIP's binary extension: the JSON header, then the rows as little-endian doubles."""
    tensor = {"name": "input-0", "datatype": "FP64", "shape": [3, 4]}
    header = json.dumps({"inputs": [{**tensor, "parameters": {"binary_data_size": 96}}]}).encode()
    length = f"inference-header-content-length: {len(header)}"
    return raw_request(path, header + struct.pack("<12d", *FLAT_ROWS), length)


def oip(path: str, document: object) -> bytes:
    return raw_request(path, json.dumps(document).encode(), JSON_TYPE)


INFER = f"/v2/models/{MODEL}/infer"
ANSWERED_BY_A_FRONT = {
    "oip": oip(INFER, OIP_ROWS),
    "oip version 1": oip(f"/v2/models/{MODEL}/versions/1/infer", OIP_ROWS),
    "oip binary output": oip(INFER, BINARY_OUT),
    "oip binary input": binary_rows(INFER),
    "oip refusal": oip(INFER, WRONG_SHAPE),
    "torchserve": raw_request(
        f"/predictions/{MODEL}", json.dumps([list(r) for r in ROWS]).encode(), JSON_TYPE
    ),
}


@pytest.mark.parametrize("kind", ANSWERED_BY_A_FRONT)
def test_a_front_answers_each_protocol_as_the_main_process(
    fronted: testing.RunningServer, alone: testing.RunningServer, kind: str
) -> None:
    """OIP's and TorchServe's invocations answered by a front with the main process stopped:
    the bytes the main process answers, date and timings aside."""
    load_once(fronted)
    request = ANSWERED_BY_A_FRONT[kind]
    answered = hit_with_the_main_process_stopped(fronted, request)
    assert answered, "relayed to the main process"
    assert masked(answered_alone(alone, request)) == masked(answered)


def test_a_model_hit_only_through_a_front_stays_loaded(store: Path, serve: Servers) -> None:
    """A front's hits count as uses: a model used only through a front is not unloaded as idle."""
    server = serve(store, workers=1, fronts=2, memory_budget="4GiB", idle_unload_s=1)
    load_once(server)
    loads = len(server.events("load"))
    connection = direct_on_front(server)
    started = time.monotonic()
    while time.monotonic() - started < 3:  # three idle periods
        invoke_rows(connection)
        time.sleep(0.02)
    connection.close()
    assert server.events("unload") == [] and len(server.events("load")) == loads


def test_a_large_body_on_a_fronts_connection_is_answered(fronted: testing.RunningServer) -> None:
    """A body past what a front holds streams through the relay, and a hit after it is right."""
    rows = [list(r) for r in ROWS] * 20_000  # about 1.6 MB of JSON
    connection = direct_on_front(fronted)
    try:
        status, body = connection.call("POST", f"/models/{MODEL}/invoke", rows)
        assert status == 200, body[:200]
        assert json.loads(body) == {"predictions": list(ROWS.values()) * 20_000}
        invoke_rows(connection)
    finally:
        connection.close()


def test_a_hit_past_the_response_timeout_is_refused_as_the_main_process_refuses_it(
    store: Path, serve: Servers
) -> None:
    """A direct hit still running at the server's response timeout gets the main process's 504,
    body and all; the connection answers the next request."""
    server = serve(store, workers=1, fronts=2, memory_budget="4GiB", default_response_timeout_s=1)
    slow = {"sleep": 2}

    def refusal(
        connection: Connection, headers: dict[str, str] | None = None
    ) -> tuple[int, object]:
        status, body = connection.call("POST", "/models/slow/invoke", slow, headers)
        return status, json.loads(body)

    loading = connect(server)
    loading.call("POST", "/models/slow/invoke", {"sleep": 0})  # loaded: now a hit
    loading.close()
    time.sleep(0.5)  # the front's table has the model
    main, front = connect(server), direct_on_front(server)
    try:
        os.kill(server.pid, signal.SIGSTOP)  # what answers is the front
        try:
            refused = refusal(front)
        finally:
            os.kill(server.pid, signal.SIGCONT)
        assert refused[0] == 504 and refused == refusal(main, {"connection": "close"})
        assert front.call("POST", "/models/slow/invoke", {"sleep": 0})[0] == 200
    finally:
        main.close()
        front.close()


def test_sigterm_lets_a_fronts_direct_hit_finish(store: Path, serve: Servers) -> None:
    """SIGTERM while a hit runs on a front's direct connection: the main process drains at once
    (it holds no request), yet the front's hit is answered before the server exits with 0."""
    server = serve(store, workers=1, fronts=2, memory_budget="4GiB")
    loading = connect(server)
    loading.call("POST", "/models/slow/invoke", {"sleep": 0})
    loading.close()
    time.sleep(0.5)  # the front's table has the model
    connection = direct_on_front(server)
    connection.request(
        "POST", "/models/slow/invoke", body=json.dumps({"sleep": 2}), headers=HEADERS
    )
    until_answering(server, 1)
    stopped: list[int] = []
    stopping = threading.Thread(target=lambda: stopped.append(server.stop()))
    stopping.start()
    response = connection.getresponse()
    assert (response.status, json.loads(response.read())) == (200, {"slept": 2})
    connection.close()
    stopping.join(60)
    assert stopped == [0] and server.leaked_pids == []


def test_a_model_busy_only_through_a_front_scales_out(store: Path, serve: Servers) -> None:
    """Requests waiting behind a front's direct batches press for a copy, as waits in the main
    process's queue do: the model busy through the front alone gets a second worker."""
    server = serve(store, workers=2, fronts=2, memory_budget="4GiB")
    loading = connect(server)
    loading.call("POST", "/models/slow/invoke", {"sleep": 0})
    loading.close()
    time.sleep(0.5)  # the front's table has the model
    connections = [direct_on_front(server) for _ in range(3)]

    def busy(connection: Connection) -> None:
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline and not scaled_out():
            assert connection.call("POST", "/models/slow/invoke", {"sleep": 0.3})[0] == 200

    def scaled_out() -> bool:
        return any(e.get("reason") == "scale_out" for e in server.events("load"))

    callers = [threading.Thread(target=busy, args=(c,)) for c in connections]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join(60)
    for connection in connections:
        connection.close()
    assert scaled_out()


def direct_doors(server: testing.RunningServer) -> list[str]:
    """The direct sockets the server's processes listen on."""
    processes = psutil.Process(server.pid).children(recursive=True)
    addresses = [str(c.laddr) for p in processes for c in p.net_connections(kind="unix")]
    return [address for address in addresses if os.path.basename(address).startswith("direct-")]


def test_workers_open_a_direct_socket_only_for_fronts(
    fronted: testing.RunningServer, alone: testing.RunningServer
) -> None:
    assert direct_doors(fronted)
    assert direct_doors(alone) == []


def gone(pid: int) -> bool:
    """Whether `pid` has exited, its sockets closed (a zombie not yet reaped counts)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def live_fronts(server: testing.RunningServer) -> list[int]:
    """The front processes running now, the dead ones not yet reaped left out."""
    pids = []
    for child in psutil.Process(server.pid).children():
        try:
            if "modelhost.fronts" in " ".join(child.cmdline()) and not gone(child.pid):
                pids.append(child.pid)
        except psutil.Error:
            continue
    return pids


def test_a_killed_front_is_restarted_and_answers_hits(store: Path, serve: Servers) -> None:
    """A front SIGKILLed: new connections keep being answered (the kernel gives them to the
    other front), then a new front process starts, gets the table at once and answers hits
    itself. Its death and its start are events, and /metrics counts the restart."""
    server = serve(store, workers=1, fronts=2, memory_budget="4GiB")
    load_once(server)
    killed, kept = live_fronts(server)
    os.kill(killed, signal.SIGKILL)
    while not gone(killed):
        time.sleep(0.01)
    for _ in range(CONNECTIONS):
        load_once(server)
    deadline = time.monotonic() + REPORTED_S
    while len(server.events("front_start")) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)  # the new front says it listens
    restarted = server.events("front_start")[-1]["detail"]["pid"]
    assert restarted not in (killed, kept) and restarted in live_fronts(server)
    answered = hit_with_the_main_process_stopped(server, INVOKE, front=restarted)
    assert answered.startswith(b"HTTP/1.1 200 OK")
    [exit_event] = server.events("front_exit")
    assert exit_event["detail"]["pid"] == killed and exit_event["reason"] == "signal"
    assert scraped(server, "modelhost_front_restarts_total") == 1


def test_a_fronts_direct_hit_counts_in_flight(fronted: testing.RunningServer) -> None:
    """A hit running on a front's direct connection counts in the in-flight gauge within a
    report's interval, and leaves it once answered. No other test here runs `slow` on it."""
    server = fronted
    quick = raw_request("/models/slow/invoke", b'{"sleep": 0}', JSON_TYPE)
    loading = connect(server)
    assert raw_invoke(loading, quick).startswith(b"HTTP/1.1 200 OK")  # loaded
    loading.close()
    assert hit_with_the_main_process_stopped(server, quick)  # the front's table has it
    connection = direct_on_front(server)
    connection.request("POST", "/models/slow/invoke", body='{"sleep": 2}', headers=HEADERS)
    deadline = time.monotonic() + 1.5
    while in_flight(server) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    counted = in_flight(server)
    response = connection.getresponse()
    assert (response.status, json.loads(response.read())) == (200, {"slept": 2})
    connection.close()
    deadline = time.monotonic() + REPORTED_S
    while in_flight(server) > 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (counted, in_flight(server)) == (2, 1)


def test_with_every_front_given_up_the_server_exits_with_an_error(
    store: Path, serve: Servers
) -> None:
    """Fronts that die at start, again and again, are given up; with none left nothing would
    take the port's connections, so the server stops with exit code 1, saying why, for its
    supervisor to start it again."""
    server = serve(store, workers=1, fronts=2, memory_budget="4GiB")
    deadline = time.monotonic() + 60
    while server_running(server) and time.monotonic() < deadline:
        for pid in live_fronts(server):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)
    assert server.stop() == 1
    assert "nothing takes port" in server.log_text()
    assert len(server.events("failure")) == 2


def server_running(server: testing.RunningServer) -> bool:
    try:
        return psutil.Process(server.pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
