"""S3 clients for downloading model artifacts: throughput, memory, import cost, error shapes.

Everything runs against a moto S3 server on 127.0.0.1 that this script starts and stops; no
request leaves the machine. Sizes are in MiB (2**20 bytes) and throughputs in MiB/s.

1. Throughput: one random-bytes object of `--size-mb` MiB (multipart-uploaded with boto3) is
   downloaded into a file `--runs` times by each candidate, interleaved (A, B, C, A, B, C, ...) so
   drift hits all alike. Every run checks the size, the first run of each candidate the MD5, and
   records the client process's CPU seconds, the server's, and the requests the server logged:
   - boto3 `download_file` (s3transfer defaults: 8 MiB ranged GETs on 10 threads);
   - boto3 `get_object` read in 1 MiB chunks (one stream, no parallelism);
   - obstore `get_async` streamed in 1 MiB chunks (one stream);
   - obstore `get_range_async` of 8 MiB, 10 in flight, each written at its offset;
   - obstore `get_ranges_async` with the same ranges (one call, every range held in memory;
     obstore coalesces adjacent ranges, so this is one GET);
   - aiobotocore `get_object` read in 1 MiB chunks (one stream).
   Then, per candidate in a fresh process, how far one download raises the peak RSS.
2. Import cost: per library, in a fresh process, the seconds and the RSS/PSS added by importing
   it, by creating one client, and by one HEAD request (the first request starts pools/runtimes).
3. Error shapes: what boto3 and obstore raise for a missing key (HEAD and GET), a wrong secret
   key and an unknown access key (moto's IAM authentication is switched on for these), and a
   refused connection (default retries).

The server is `python -m moto.server` in a subprocess (`--server thread`: ThreadedMotoServer in
this process, sharing the client's GIL and cores, which measured slower), holding the object in
memory (MOTO_S3_DEFAULT_KEY_BUFFER_SIZE). moto reads the whole object for every ranged GET, so
parallel ranged downloads are bound by moto; `--fast-ranges` patches that (see
`patch_moto_ranges`) to compare the clients' parallel paths. With two or more cores the server is
pinned to core 0 and this process and its probes to core 1 (`--no-pin` to turn off).

    pip install -e '.[dev]' obstore aiobotocore   # boto3, moto[server] and psutil are in dev
    python benchmarks/s3_clients.py [--size-mb 200] [--runs 3] [--fast-ranges] [--no-pin]
        [--server process|thread] [--dir FOLDER] [--out benchmarks/results/s3_clients.json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import importlib.metadata
import io
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import psutil

from modelhost.testing import wait_listening

MiB = 2**20
BUCKET = "modelhost-bench"
KEY = "artifacts/model.bin"
MISSING_KEY = "artifacts/missing.bin"
REGION = "us-east-1"
ACCESS_KEY = "testing"
SECRET_KEY = "testing"
CHUNK = 1 * MiB  # streamed reads
PART = 8 * MiB  # ranged reads: s3transfer's default multipart_chunksize
IN_FLIGHT = 10  # ranged reads: s3transfer's default max_concurrency
SERVER_CPU, CLIENT_CPU = 0, 1
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "s3_clients.json"
LIBRARIES = ["boto3", "obstore", "aiobotocore"]
VERSIONS = ["boto3", "botocore", "s3transfer", "obstore", "aiobotocore", "aiohttp", "moto"]
CLIENT_ENV = {
    "AWS_ACCESS_KEY_ID": ACCESS_KEY,
    "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
    "AWS_DEFAULT_REGION": REGION,
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "NO_PROXY": "127.0.0.1,localhost",
    "no_proxy": "127.0.0.1,localhost",
}

T = TypeVar("T")


# --- the moto server --------------------------------------------------------------------------


@dataclass
class Server:
    """A running moto server: where it listens and, as a subprocess, how to read its counters."""

    endpoint: str
    pid: int | None = None
    log: Path | None = None

    def cpu_seconds(self) -> float | None:
        if self.pid is None:
            return None
        times = psutil.Process(self.pid).cpu_times()
        return float(times.user + times.system)

    def requests_served(self) -> int | None:
        """Requests werkzeug has logged so far (subprocess only)."""
        if self.log is None:
            return None
        with self.log.open(errors="replace") as lines:
            return sum(1 for line in lines if line.startswith("127.0.0.1 - - ["))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def moto_server(args: argparse.Namespace, scratch: Path) -> Iterator[Server]:
    """Start moto on a free loopback port; always stop it (by its own handle) on the way out."""
    os.environ["MOTO_S3_DEFAULT_KEY_BUFFER_SIZE"] = str((args.size_mb + 1) * MiB)  # in memory
    port = free_port()
    if args.server == "thread":
        yield from _threaded_server(port, args.fast_ranges)
    else:
        yield from _subprocess_server(port, scratch / "moto.log", args.pin, args.fast_ranges)


def _threaded_server(port: int, fast_ranges: bool) -> Iterator[Server]:
    from moto.server import ThreadedMotoServer

    if fast_ranges:
        patch_moto_ranges()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield Server(f"http://127.0.0.1:{port}")
    finally:
        server.stop()


def _subprocess_server(port: int, log: Path, pin: bool, fast_ranges: bool) -> Iterator[Server]:
    command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    if fast_ranges:
        command = [sys.executable, __file__, "--serve-moto", str(port)]
    with log.open("wb") as sink:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            preexec_fn=(lambda: os.sched_setaffinity(0, {SERVER_CPU})) if pin else None,
        )
    try:
        wait_listening(port, process)
        yield Server(f"http://127.0.0.1:{port}", process.pid, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def patch_moto_ranges() -> None:
    """Keep each moto object's bytes, so a ranged GET costs O(range) as on S3.

    moto 5.x reads the whole object out of its buffer for every GET, ranged or not (~0.1 s for
    200 MiB), so parallel ranged downloads measure moto rather than the client.
    """
    from moto.s3.models import FakeKey

    plain: Any = FakeKey.__dict__["value"]  # the property itself

    def cached(key: Any) -> bytes:
        value: bytes | None = key.__dict__.get("_whole_value")
        if value is None:
            fresh: bytes = plain.fget(key)
            value = key.__dict__["_whole_value"] = fresh
        return value

    def store(key: Any, new_value: bytes) -> None:
        key.__dict__.pop("_whole_value", None)
        plain.fset(key, new_value)

    FakeKey.value = property(cached, store)  # type: ignore[assignment,method-assign]


def serve_moto(port: int) -> None:
    """`--serve-moto PORT`: `python -m moto.server` with `patch_moto_ranges`."""
    from moto.server import main as moto_main

    patch_moto_ranges()
    moto_main(["-H", "127.0.0.1", "-p", str(port)])


def set_auth(endpoint: str, initial_no_auth_actions: str) -> None:
    """moto's switch for IAM authentication: "0" checks every request, "inf" none."""
    request = urllib.request.Request(
        f"{endpoint}/moto-api/reset-auth",
        data=initial_no_auth_actions.encode(),
        headers={"Content-Type": "text/plain"},  # a form body would be parsed away by Flask
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        response.read()


# --- clients ----------------------------------------------------------------------------------


def boto3_client(endpoint: str, key: str = ACCESS_KEY, secret: str = SECRET_KEY) -> Any:
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=key,
        aws_secret_access_key=secret,
    )


def s3_store(endpoint: str, key: str = ACCESS_KEY, secret: str = SECRET_KEY, **options: Any) -> Any:
    from obstore.store import S3Store

    return S3Store(
        BUCKET,
        endpoint=endpoint,
        access_key_id=key,
        secret_access_key=secret,
        region=REGION,
        client_options={"allow_http": True},
        **options,
    )


def aiobotocore_client(endpoint: str) -> Any:
    """An async context manager that gives the client."""
    from aiobotocore.session import get_session

    return get_session().create_client(
        "s3",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
    )


@dataclass
class Clients:
    """One client per library, made once, and the event loop the async ones live on."""

    boto: Any
    store: Any
    aio: Any
    loop: asyncio.AbstractEventLoop
    stack: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)

    @classmethod
    def open(cls, endpoint: str) -> Clients:
        loop = asyncio.new_event_loop()
        stack = contextlib.AsyncExitStack()
        aio = loop.run_until_complete(stack.enter_async_context(aiobotocore_client(endpoint)))
        return cls(boto3_client(endpoint), s3_store(endpoint), aio, loop, stack)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coroutine)

    def close(self) -> None:
        self.run(self.stack.aclose())
        self.loop.close()


def upload(client: Any, size: int) -> dict[str, Any]:
    """Put one random object of `size` bytes with s3transfer (multipart above 8 MiB)."""
    client.create_bucket(Bucket=BUCKET)
    payload = os.urandom(size)
    started = time.perf_counter()
    client.upload_fileobj(io.BytesIO(payload), BUCKET, KEY)
    seconds = time.perf_counter() - started
    head = client.head_object(Bucket=BUCKET, Key=KEY)
    if head["ContentLength"] != size:
        raise AssertionError(f"uploaded {size} bytes, the store has {head['ContentLength']}")
    return {
        "bytes": size,
        "md5": hashlib.md5(payload).hexdigest(),
        "etag": head["ETag"],
        "upload_s": seconds,
        "upload_mib_s": size / MiB / seconds,
    }


# --- download candidates ----------------------------------------------------------------------


def boto3_download_file(clients: Clients, dest: Path) -> None:
    clients.boto.download_file(BUCKET, KEY, str(dest))


def boto3_get_object(clients: Clients, dest: Path) -> None:
    body = clients.boto.get_object(Bucket=BUCKET, Key=KEY)["Body"]
    with dest.open("wb") as sink:
        for chunk in body.iter_chunks(CHUNK):
            sink.write(chunk)


def obstore_get(clients: Clients, dest: Path) -> None:
    clients.run(_obstore_get(clients.store, dest))


async def _obstore_get(store: Any, dest: Path) -> None:
    import obstore

    result = await obstore.get_async(store, KEY)
    with dest.open("wb") as sink:
        async for chunk in result.stream(min_chunk_size=CHUNK):
            sink.write(chunk)


def obstore_range_tasks(clients: Clients, dest: Path) -> None:
    clients.run(_obstore_range_tasks(clients.store, dest))


async def _obstore_range_tasks(store: Any, dest: Path) -> None:
    import obstore

    size = (await obstore.head_async(store, KEY))["size"]
    slots = asyncio.Semaphore(IN_FLIGHT)

    async def fetch(fd: int, start: int) -> None:
        async with slots:
            data = await obstore.get_range_async(
                store, KEY, start=start, end=min(start + PART, size)
            )
            _pwrite_all(fd, memoryview(data), start)

    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        await asyncio.gather(*(fetch(fd, start) for start in range(0, size, PART)))
    finally:
        os.close(fd)


def obstore_get_ranges(clients: Clients, dest: Path) -> None:
    clients.run(_obstore_get_ranges(clients.store, dest))


async def _obstore_get_ranges(store: Any, dest: Path) -> None:
    import obstore

    size = (await obstore.head_async(store, KEY))["size"]
    starts = list(range(0, size, PART))
    ends = [min(start + PART, size) for start in starts]
    parts = await obstore.get_ranges_async(store, KEY, starts=starts, ends=ends, coalesce=0)
    with dest.open("wb") as sink:
        for part in parts:
            sink.write(memoryview(part))


def aiobotocore_get_object(clients: Clients, dest: Path) -> None:
    clients.run(_aiobotocore_get_object(clients.aio, dest))


async def _aiobotocore_get_object(client: Any, dest: Path) -> None:
    response = await client.get_object(Bucket=BUCKET, Key=KEY)
    async with response["Body"] as body:
        with dest.open("wb") as sink:
            async for chunk in body.iter_chunks(CHUNK):
                sink.write(chunk)


def _pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    while data:
        written = os.pwrite(fd, data, offset)
        data, offset = data[written:], offset + written


CANDIDATES: dict[str, Callable[[Clients, Path], None]] = {
    "boto3 download_file (8 MiB x10 threads)": boto3_download_file,
    "boto3 get_object stream": boto3_get_object,
    "obstore get_async stream": obstore_get,
    "obstore get_range_async (8 MiB x10)": obstore_range_tasks,
    "obstore get_ranges_async (8 MiB)": obstore_get_ranges,
    "aiobotocore get_object stream": aiobotocore_get_object,
}


# --- measuring downloads ----------------------------------------------------------------------


def measure_downloads(
    server: Server, clients: Clients, expected: dict[str, Any], runs: int, scratch: Path
) -> list[dict[str, Any]]:
    dest = scratch / "download.bin"
    results = []
    for run in range(runs):
        for name, download in CANDIDATES.items():
            result = _one_download(server, clients, download, dest, expected, check_md5=run == 0)
            results.append({"client": name, "run": run, **result})
            print(
                f"  run {run} {name}: {result['mib_s']:.1f} MiB/s, {result['requests']} requests",
                file=sys.stderr,
            )
    return results


def _one_download(
    server: Server,
    clients: Clients,
    download: Callable[[Clients, Path], None],
    dest: Path,
    expected: dict[str, Any],
    check_md5: bool,
) -> dict[str, Any]:
    dest.unlink(missing_ok=True)
    requests_before, server_cpu_before = server.requests_served(), server.cpu_seconds()
    cpu_before, started = time.process_time(), time.perf_counter()
    download(clients, dest)
    seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu_before
    time.sleep(0.2)  # let the server log its last request
    size = dest.stat().st_size
    if size != expected["bytes"]:
        raise AssertionError(f"{download.__name__}: {size} bytes, expected {expected['bytes']}")
    if check_md5 and _md5(dest) != expected["md5"]:
        raise AssertionError(f"{download.__name__}: MD5 differs from the uploaded bytes")
    return {
        "seconds": seconds,
        "mib_s": size / MiB / seconds,
        "client_cpu_s": cpu,
        "server_cpu_s": _delta(server.cpu_seconds(), server_cpu_before),
        "requests": _delta(server.requests_served(), requests_before),
        "md5_checked": check_md5,
    }


def _md5(path: Path) -> str:
    digest = hashlib.md5()
    with path.open("rb") as source:
        while chunk := source.read(8 * MiB):
            digest.update(chunk)
    return digest.hexdigest()


def _delta(after: float | None, before: float | None) -> float | None:
    return None if after is None or before is None else after - before


def summarize(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    summary = {}
    for name in CANDIDATES:
        rows = [row for row in results if row["client"] == name]
        speeds = [row["mib_s"] for row in rows]
        summary[name] = {
            "median_mib_s": statistics.median(speeds),
            "min_mib_s": min(speeds),
            "max_mib_s": max(speeds),
            "client_cpu_s": statistics.median(row["client_cpu_s"] for row in rows),
            "server_cpu_s": _median_or_none([row["server_cpu_s"] for row in rows]),
            "requests": _median_or_none([row["requests"] for row in rows]),
        }
    return summary


def _median_or_none(values: list[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return statistics.median(present) if present else None


# --- import cost, each library in a fresh process ----------------------------------------------


def measure_imports(endpoint: str, runs: int) -> dict[str, dict[str, Any]]:
    samples: dict[str, list[dict[str, Any]]] = {lib: [] for lib in LIBRARIES}
    for _ in range(runs):
        for lib in LIBRARIES:
            samples[lib].append(_run_probe(lib, endpoint))
    return {lib: _median_stages(runs_of_lib) for lib, runs_of_lib in samples.items()}


def _run_probe(lib: str, endpoint: str) -> dict[str, Any]:
    return _run_json(["--probe", lib, "--endpoint", endpoint])


def _run_json(arguments: list[str]) -> dict[str, Any]:
    """Run this script again in a fresh process; its last line of output is JSON."""
    command = [sys.executable, __file__, *arguments]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _median_stages(samples: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        stage: {
            metric: statistics.median(sample[stage][metric] for sample in samples)
            for metric in samples[0][stage]
        }
        for stage in samples[0]
    }


def probe(lib: str, endpoint: str) -> None:
    """In a fresh process: time and memory after import, client, first HEAD; JSON on stdout."""
    stages: dict[str, dict[str, float]] = {}
    base = psutil.Process().memory_full_info()
    started = time.perf_counter()
    measuring = [0.0]  # seconds spent reading memory, kept out of the stage times

    def mark(stage: str) -> None:
        elapsed = time.perf_counter() - started - measuring[0]
        now = psutil.Process().memory_full_info()
        measuring[0] = time.perf_counter() - started - elapsed
        stages[stage] = {
            "seconds": elapsed,
            "rss_mib": (now.rss - base.rss) / MiB,
            "pss_mib": (now.pss - base.pss) / MiB,
        }

    PROBES[lib](endpoint, mark)
    print(json.dumps(stages))


def _probe_boto3(endpoint: str, mark: Callable[[str], None]) -> None:
    import boto3  # noqa: F401

    mark("import")
    client = boto3_client(endpoint)
    mark("client")
    client.head_object(Bucket=BUCKET, Key=KEY)
    mark("request")


def _probe_obstore(endpoint: str, mark: Callable[[str], None]) -> None:
    import obstore
    import obstore.store  # noqa: F401

    mark("import")
    store = s3_store(endpoint)
    mark("client")
    obstore.head(store, KEY)
    mark("request")


def _probe_aiobotocore(endpoint: str, mark: Callable[[str], None]) -> None:
    import aiobotocore.session  # noqa: F401

    mark("import")

    async def client_and_head() -> None:
        async with aiobotocore_client(endpoint) as client:
            mark("client")
            await client.head_object(Bucket=BUCKET, Key=KEY)
            mark("request")

    asyncio.run(client_and_head())


PROBES: dict[str, Callable[[str, Callable[[str], None]], None]] = {
    "boto3": _probe_boto3,
    "obstore": _probe_obstore,
    "aiobotocore": _probe_aiobotocore,
}


def measure_peaks(endpoint: str, folder: Path) -> dict[str, float]:
    """Per candidate, in a fresh process: how far one download raises the peak RSS."""
    return {
        name: _run_json(["--probe-download", name, "--endpoint", endpoint, "--dir", str(folder)])[
            "peak_rss_mib"
        ]
        for name in CANDIDATES
    }


def probe_download(name: str, endpoint: str, folder: Path) -> None:
    clients = Clients.open(endpoint)
    dest = folder / f"peak-{os.getpid()}.bin"
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := current RSS (Linux >= 4.0)
    before = psutil.Process().memory_info().rss
    try:
        CANDIDATES[name](clients, dest)
    finally:
        dest.unlink(missing_ok=True)
    peak = _vm_hwm()
    clients.close()
    print(json.dumps({"peak_rss_mib": max(0, peak - before) / MiB}))


def _vm_hwm() -> int:
    """This process's peak RSS in bytes (unlike ru_maxrss, not inherited across fork/exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


# --- error shapes -----------------------------------------------------------------------------


def error_shapes(endpoint: str) -> list[dict[str, Any]]:
    refused = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    good, bad_key = boto3_client(endpoint), boto3_client(endpoint, key="AKIANOSUCHKEY")
    down = boto3_client(refused)
    store, down_store = s3_store(endpoint), s3_store(refused)  # default retries: 10, a few seconds
    cases: list[tuple[str, str, Callable[[], object]]] = [
        (
            "boto3",
            "missing key: head_object",
            lambda: good.head_object(Bucket=BUCKET, Key=MISSING_KEY),
        ),
        (
            "boto3",
            "missing key: get_object",
            lambda: good.get_object(Bucket=BUCKET, Key=MISSING_KEY),
        ),
        (
            "boto3",
            "connection refused: get_object",
            lambda: down.get_object(Bucket=BUCKET, Key=KEY),
        ),
        ("obstore", "missing key: head", lambda: _obstore_call("head", store, MISSING_KEY)),
        ("obstore", "missing key: get", lambda: _obstore_call("get", store, MISSING_KEY)),
        ("obstore", "connection refused: get", lambda: _obstore_call("get", down_store, KEY)),
    ]
    shapes = [_shape(library, case, call) for library, case, call in cases]
    with _iam_authentication(endpoint) as (key_id, secret):
        shapes += _auth_shapes(endpoint, key_id, secret, bad_key)
    return shapes


def _auth_shapes(endpoint: str, key_id: str, secret: str, bad_key: Any) -> list[dict[str, Any]]:
    ok = boto3_client(endpoint, key=key_id, secret=secret)
    wrong = boto3_client(endpoint, key=key_id, secret="wrong-secret")
    wrong_store = s3_store(endpoint, key=key_id, secret="wrong-secret")
    ok.head_object(Bucket=BUCKET, Key=KEY)  # the right secret passes: the errors below are real
    cases: list[tuple[str, str, Callable[[], object]]] = [
        ("boto3", "wrong secret: head_object", lambda: wrong.head_object(Bucket=BUCKET, Key=KEY)),
        ("boto3", "wrong secret: get_object", lambda: wrong.get_object(Bucket=BUCKET, Key=KEY)),
        (
            "boto3",
            "unknown access key: get_object",
            lambda: bad_key.get_object(Bucket=BUCKET, Key=KEY),
        ),
        ("obstore", "wrong secret: head", lambda: _obstore_call("head", wrong_store, KEY)),
        ("obstore", "wrong secret: get", lambda: _obstore_call("get", wrong_store, KEY)),
    ]
    return [_shape(library, case, call) for library, case, call in cases]


@contextlib.contextmanager
def _iam_authentication(endpoint: str) -> Iterator[tuple[str, str]]:
    """An IAM user allowed s3:*, then moto checks signatures until the block ends."""
    import boto3

    iam = boto3.client(
        "iam",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
    )
    iam.create_user(UserName="bench")
    policy = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
    }
    iam.put_user_policy(UserName="bench", PolicyName="s3", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName="bench")["AccessKey"]
    set_auth(endpoint, "0")
    try:
        yield key["AccessKeyId"], key["SecretAccessKey"]
    finally:
        set_auth(endpoint, "inf")


def _obstore_call(operation: str, store: Any, key: str) -> object:
    import obstore

    if operation == "head":
        return obstore.head(store, key)
    return obstore.get(store, key).bytes()


def _shape(library: str, case: str, call: Callable[[], object]) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        call()
    except Exception as error:  # noqa: BLE001 - the point is to see what comes out
        return {"library": library, "case": case, **_describe(error), "seconds": _since(started)}
    return {"library": library, "case": case, "exception": None, "seconds": _since(started)}


def _describe(error: Exception) -> dict[str, Any]:
    kind = type(error)
    response = getattr(error, "response", None) or {}
    return {
        "exception": f"{kind.__module__}.{kind.__qualname__}",
        "bases": [f"{base.__module__}.{base.__qualname__}" for base in kind.__mro__[1:-2]],
        "code": response.get("Error", {}).get("Code"),
        "error_message": response.get("Error", {}).get("Message"),
        "http_status": response.get("ResponseMetadata", {}).get("HTTPStatusCode"),
        "str": " ".join(str(error).split())[:400],
    }


def _since(started: float) -> float:
    return time.perf_counter() - started


# --- report -----------------------------------------------------------------------------------


def markdown_table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"
    return str(value).replace("|", "\\|")


def report(measured: dict[str, Any], summary: dict[str, Any]) -> str:
    imports, errors, peaks = measured["imports"], measured["errors"], measured["peak_rss_mib"]
    throughput = markdown_table(
        [
            "client",
            "median MiB/s",
            "min",
            "max",
            "client CPU s",
            "server CPU s",
            "requests",
            "peak +RSS MiB",
        ],
        [
            [
                name,
                s["median_mib_s"],
                s["min_mib_s"],
                s["max_mib_s"],
                s["client_cpu_s"],
                s["server_cpu_s"],
                s["requests"],
                peaks[name],
            ]
            for name, s in summary.items()
        ],
    )
    cost = markdown_table(
        [
            "library",
            "import s",
            "+client s",
            "+HEAD s",
            "PSS MiB import/client/HEAD",
            "RSS MiB after HEAD",
        ],
        [
            [
                lib,
                i["import"]["seconds"],
                i["client"]["seconds"] - i["import"]["seconds"],
                i["request"]["seconds"] - i["client"]["seconds"],
                "/".join(f"{i[stage]['pss_mib']:.1f}" for stage in ("import", "client", "request")),
                i["request"]["rss_mib"],
            ]
            for lib, i in imports.items()
        ],
    )
    shapes = markdown_table(
        ["library", "case", "exception", "code", "message", "s"],
        [
            [
                e["library"],
                e["case"],
                e.get("exception"),
                e.get("code"),
                e.get("error_message") or e.get("str", "")[:120],
                e["seconds"],
            ]
            for e in errors
        ],
    )
    return f"{throughput}\n\n{cost}\n\n{shapes}"


def versions() -> dict[str, str]:
    found = {}
    for package in VERSIONS:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            found[package] = importlib.metadata.version(package)
    return found


def machine(pin: bool) -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cores": os.cpu_count(),
        "load_average_at_end": os.getloadavg(),  # other work on the machine skews the numbers
        "pinned": {"server_cpu": SERVER_CPU, "client_cpu": CLIENT_CPU} if pin else None,
    }


# --- main -------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=200, help="object size in MiB")
    parser.add_argument("--runs", type=int, default=3, help="downloads per client (and probes)")
    parser.add_argument("--server", choices=["process", "thread"], default="process")
    parser.add_argument(
        "--pin",
        action=argparse.BooleanOptionalAction,
        default=(os.cpu_count() or 1) >= 2,
        help="server on core 0, client on core 1 (process server only)",
    )
    parser.add_argument(
        "--fast-ranges",
        action="store_true",
        help="patch moto so a ranged GET does not read the whole object (see patch_moto_ranges)",
    )
    parser.add_argument("--dir", type=Path, help="make the temp dir for downloads in this folder")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON results")
    parser.add_argument("--deadline", type=int, default=1800, help="give up after this many s")
    parser.add_argument("--probe", choices=LIBRARIES, help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    parser.add_argument("--serve-moto", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--probe-download", choices=list(CANDIDATES), help=argparse.SUPPRESS)
    return parser.parse_args()


def _on_deadline(signum: int, frame: object) -> None:
    raise TimeoutError("benchmark deadline passed")


def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    with (
        tempfile.TemporaryDirectory(prefix="s3-clients-", dir=args.dir) as scratch_dir,
        moto_server(args, Path(scratch_dir)) as server,
    ):
        clients = Clients.open(server.endpoint)
        try:
            uploaded = upload(clients.boto, args.size_mb * MiB)
            print(f"uploaded {args.size_mb} MiB in {uploaded['upload_s']:.1f} s", file=sys.stderr)
            runs = measure_downloads(server, clients, uploaded, args.runs, Path(scratch_dir))
        finally:
            clients.close()
        imports = measure_imports(server.endpoint, args.runs)
        peaks = measure_peaks(server.endpoint, Path(scratch_dir))
        errors = error_shapes(server.endpoint)
    return {
        "upload": uploaded,
        "runs": runs,
        "peak_rss_mib": peaks,
        "imports": imports,
        "errors": errors,
    }


def main() -> None:
    args = parse_args()
    os.environ.update(CLIENT_ENV)
    if args.probe:
        probe(args.probe, args.endpoint)
        return
    if args.serve_moto:
        serve_moto(args.serve_moto)
        return
    if args.probe_download:
        probe_download(args.probe_download, args.endpoint, args.dir)
        return
    pin = args.pin and args.server == "process"
    if pin:
        os.sched_setaffinity(0, {CLIENT_CPU})
    signal.signal(signal.SIGALRM, _on_deadline)
    signal.alarm(args.deadline)
    measured = benchmark(argparse.Namespace(**{**vars(args), "pin": pin}))
    signal.alarm(0)
    summary = summarize(measured["runs"])
    print(report(measured, summary))
    settings = {
        key: str(value) for key, value in vars(args).items() if key not in ("probe", "endpoint")
    }
    results = {
        "settings": settings,
        "machine": machine(pin),
        "versions": versions(),
        "summary": summary,
        **measured,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
