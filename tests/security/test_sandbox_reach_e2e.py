"""A sandboxed worker's code against what the first sandbox tests did not try: links out of its
scratch folder, writes through its view, inherited descriptors, other processes and their
limits, file modes, forks, Unix datagrams, watches, System V IPC and a root worker's devices.
Each attack fails, and another tenant's model keeps answering."""

from __future__ import annotations

import ctypes
import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.hostile import hostile_store, invoke, two_tenants
from test_sandbox_e2e import SECRET

from modelhost import testing

pytestmark = pytest.mark.e2e

# each attack's outcome: "done", or the error that stopped it
PRELUDE = """
import ctypes, json, os, signal, socket, threading
libc = ctypes.CDLL(None, use_errno=True)

def attempt(action):
    try:
        result = action()
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    if isinstance(result, int) and result < 0:  # a raw system call's failure
        return os.strerror(ctypes.get_errno())
    return "done"

def handle(data, context):
    if data is None:
        return None
    return [
        {name: attempt(action) for name, action in tries(json.loads(r["body"])).items()}
        for r in data
    ]

def view_file():
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(here, "handler.py")  # a hard link to the cache's entry

def scratch(name):
    return os.path.join(os.environ["TMPDIR"], name)
"""

FILES = """
def list_other_views():
    own = view_file()
    while os.path.basename(own) != str(os.getpid()):  # the worker's view, views/SERVER/WORKER
        own = os.path.dirname(own)
    os.listdir(os.path.dirname(own))

def reopen_inherited():
    for fd in os.listdir("/proc/self/fd"):
        target = os.readlink(f"/proc/self/fd/{fd}") if fd.isdigit() else ""
        if target.startswith("/") and target != "/dev/null":
            open(f"/proc/self/fd/{fd}", "ab").close()

def tries(p):
    return {
        "link-host-file": lambda: os.link(p["secret"], scratch("stolen")),
        "link-view-file": lambda: os.link(view_file(), scratch("mine")),
        "write-view-file": lambda: open(view_file(), "ab").write(b"# changed"),
        "truncate-view-file": lambda: os.truncate(view_file(), 0),
        "rename-view-file": lambda: os.rename(view_file(), scratch("moved")),
        "remove-view-file": lambda: os.unlink(view_file()),
        "follow-symlink": lambda: (
            os.symlink(p["secret"], scratch("symlink")), open(scratch("symlink")).read()
        ),
        "list-proc": lambda: os.listdir("/proc"),
        "list-shm": lambda: os.listdir("/dev/shm"),
        "list-views": list_other_views,
        "reopen-inherited": reopen_inherited,
        "frontend-environ": lambda: open(f"/proc/{p['frontend']}/environ", "rb").read(),
    }
"""

PROCESSES = """
def tries(p):
    sibling, frontend = p["sibling"], p["frontend"]
    iovec = (ctypes.c_void_p * 2)(ctypes.cast(ctypes.create_string_buffer(8), ctypes.c_void_p), 8)
    return {
        "kill-sibling": lambda: os.kill(sibling, signal.SIGKILL),
        "pidfd-signal": lambda: signal.pidfd_send_signal(os.pidfd_open(frontend), 0),
        "pidfd-getfd": lambda: libc.syscall(438, os.pidfd_open(frontend), 0, 0),
        "ptrace-attach": lambda: libc.ptrace(16, sibling, None, None),
        "read-memory": lambda: libc.process_vm_readv(sibling, iovec, 1, iovec, 1, 0),
        "io-uring": lambda: libc.syscall(425, 8, ctypes.create_string_buffer(120)),
    }
"""

FORKS = """
def fork_and_leave():
    child = os.fork()
    if child == 0:  # a process of its own, left behind when its worker is killed
        os.setsid()
        os._exit(0)
    os.waitpid(child, 0)

def start_a_thread():
    thread = threading.Thread(target=lambda: None)
    thread.start()
    thread.join()

def tries(p):
    return {"fork": fork_and_leave, "thread": start_a_thread}
"""

DATAGRAMS = """
def tries(p):
    dgram = lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    paired = lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)[0]
    return {
        "named": lambda: dgram().sendto(b"from a sandbox", p["named"]),
        "named-from-a-pair": lambda: paired().sendto(b"from a sandbox", p["named"]),
        "abstract": lambda: dgram().sendto(b"from a sandbox", "\\0" + p["abstract"]),
    }
"""

DEVICES = """
def capabilities():
    for line in open("/proc/self/status"):
        if line.startswith("CapEff:") and int(line.split()[1], 16):
            return None  # one is held
    raise PermissionError(1, "none held")

def tries(p):
    null = 0o600 | 0o020000  # a character device: /dev/null's, harmless
    return {
        "mknod": lambda: os.mknod(scratch("null"), null, os.makedev(1, 3)),
        "capabilities": capabilities,
    }
"""

LIMITS = """
import resource

def tries(p):
    frontend, core = p["frontend"], resource.RLIMIT_CORE
    return {
        "prlimit": lambda: resource.prlimit(frontend, core, (0, 0)),
        "renice": lambda: os.setpriority(os.PRIO_PROCESS, frontend, 19),
        "renice-user": lambda: os.setpriority(os.PRIO_USER, os.getuid(), 19),
        "renice-group": lambda: os.setpriority(os.PRIO_PGRP, 0, 19),  # 0: the server's group
        "scheduler": lambda: os.sched_setscheduler(frontend, os.SCHED_BATCH, os.sched_param(0)),
        "own-limit": lambda: resource.setrlimit(core, resource.getrlimit(core)),
        "own-nice": lambda: os.setpriority(os.PRIO_PROCESS, 0, os.getpriority(os.PRIO_PROCESS, 0)),
    }
"""

WATCHES = """
def watch(path):
    inotify = libc.inotify_init1(0)
    return inotify if inotify < 0 else libc.inotify_add_watch(inotify, path.encode(), 0xFFF)

def tries(p):
    return {"watch-store": lambda: watch(p["store"]), "watch-cache": lambda: watch(p["cache"])}
"""

SHARED_MEMORY = """
libc.shmat.restype = ctypes.c_void_p
MQ_OPEN = 240 if os.uname().machine == "x86_64" else 180

def read_segment(key):
    segment = libc.shmget(key, 0, 0)
    address = libc.shmat(segment, None, 0o10000) if segment >= 0 else None  # SHM_RDONLY
    if segment < 0 or address in (None, 2**64 - 1):
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return ctypes.string_at(address, 16)

def tries(p):
    return {
        "shm": lambda: read_segment(p["key"]),
        "msg": lambda: libc.msgget(p["key"], 0),
        "mq": lambda: libc.syscall(MQ_OPEN, b"q", 0o100, 0o600, None),  # O_CREAT
    }
"""

MODES = """
def tries(p):
    done = {}
    for name in ("secret", "store-file"):
        path = p[name]
        done.update({
            f"chmod-{name}": lambda: os.chmod(path, 0o777),
            f"chown-{name}": lambda: os.chown(path, os.getuid(), os.getgid()),
            f"utime-{name}": lambda: os.utime(path, (0, 0)),
            f"setxattr-{name}": lambda: os.setxattr(path, "user.modelhost", b"x"),
        })
    done["chmod-view-file"] = lambda: os.chmod(view_file(), 0o666)
    return done
"""


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("host")
    (folder / "secret").write_bytes(SECRET)
    (folder / "secret").chmod(0o600)
    return folder


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("store")
    sources = {"files": FILES, "processes": PROCESSES, "modes": MODES, "forks": FORKS}
    sources |= {"datagrams": DATAGRAMS, "devices": DEVICES, "limits": LIMITS}
    sources |= {"watches": WATCHES, "shared-memory": SHARED_MEMORY}
    hostile_store(root, {name: PRELUDE + source for name, source in sources.items()})
    (root / "good/iris.onnx").chmod(0o640)
    return root


@pytest.fixture(scope="module")
def server(
    store: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[testing.RunningServer]:
    with two_tenants(store, tmp_path_factory.mktemp("server")) as running:
        yield running


def attack(server: testing.RunningServer, name: str, **params: object) -> dict[str, str]:
    """Tenant evil's model `name` tries its attacks; what each came to."""
    response = invoke(server, f"evil/{name}", params)
    assert response.status_code == 200, response.text
    outcomes: dict[str, str] = response.json()
    return outcomes


def succeeded(outcomes: dict[str, str]) -> list[str]:
    return [name for name, outcome in outcomes.items() if outcome == "done"]


def good_worker_pid(server: testing.RunningServer) -> int:
    worker = next(e["worker"] for e in server.events("load") if e["model"] == "good/iris.onnx")
    return {e["worker"]: e["detail"]["pid"] for e in server.events("worker_start")}[worker]


def assert_good_answers(server: testing.RunningServer) -> None:
    response = invoke(server, "good/iris.onnx")
    assert response.status_code == 200, response.text


def test_no_link_or_view_reaches_a_file_outside(
    server: testing.RunningServer, outside: Path, store: Path
) -> None:
    """Hard links and symlinks from the scratch folder, writes through the view's hard links
    (the cache's entries), /proc, /dev/shm, the other views and inherited descriptors: all
    refused, and the view's file keeps its bytes."""
    handler = (store / "evil/files/handler.py").read_bytes()
    params = {"secret": str(outside / "secret"), "frontend": server.pid}
    outcomes = attack(server, "files", **params)
    assert not succeeded(outcomes), outcomes
    assert "stolen" not in str(outcomes)
    again = attack(server, "files", **params)  # loaded as it was: the view's file unchanged
    assert not succeeded(again), again
    assert (store / "evil/files/handler.py").read_bytes() == handler
    assert_good_answers(server)


def test_no_signal_trace_or_ring_reaches_another_process(server: testing.RunningServer) -> None:
    """Signals, pidfds, ptrace and process_vm_readv on the other tenant's worker and the
    frontend, and io_uring, are refused; the other tenant's worker lives on."""
    sibling = good_worker_pid(server)
    outcomes = attack(server, "processes", sibling=sibling, frontend=server.pid)
    assert not succeeded(outcomes), outcomes
    os.kill(sibling, 0)  # still there
    assert_good_answers(server)


def test_no_mode_owner_time_or_attribute_changes_outside(
    server: testing.RunningServer, outside: Path, store: Path
) -> None:
    """chmod, chown, utime and setxattr need no open file, so Landlock lets them through:
    seccomp refuses them, on the host's files, the other tenant's model and the view's links."""
    paths = {"secret": outside / "secret", "store-file": store / "good/iris.onnx"}
    before = {name: path.stat() for name, path in paths.items()}
    outcomes = attack(server, "modes", **{name: str(path) for name, path in paths.items()})
    assert not succeeded(outcomes), outcomes
    for name, path in paths.items():
        after = path.stat()
        assert stat.S_IMODE(after.st_mode) == stat.S_IMODE(before[name].st_mode), name
        assert after.st_mtime_ns == before[name].st_mtime_ns, name
        assert not os.listxattr(path), name
    assert_good_answers(server)


def test_no_process_outlives_its_worker(server: testing.RunningServer) -> None:
    """A fork is refused, so no process of a model's leaves its worker's deadlines and the
    server's stop behind (setsid); threads still start."""
    outcomes = attack(server, "forks")
    assert outcomes == {"fork": "Operation not permitted", "thread": "done"}, outcomes
    assert_good_answers(server)


def test_no_datagram_reaches_a_host_socket(server: testing.RunningServer, tmp_path: Path) -> None:
    """A Unix datagram socket needs no connect, which seccomp refuses: it sends to any named
    socket of the host's (syslog's, journald's) unless the socket itself is refused."""
    abstract = f"modelhost-test-{os.getpid()}"
    with (
        socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as named,
        socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as hidden,
    ):
        named.bind(str(tmp_path / "host.sock"))
        hidden.bind("\0" + abstract)
        named.setblocking(False)
        hidden.setblocking(False)
        outcomes = attack(server, "datagrams", named=str(tmp_path / "host.sock"), abstract=abstract)
        assert not succeeded(outcomes), outcomes
        for receiver in (named, hidden):  # a datagram sent is queued before sendto returns
            with pytest.raises(BlockingIOError):
                receiver.recv(64)
    assert_good_answers(server)


def test_a_root_worker_holds_no_capability(server: testing.RunningServer) -> None:
    """Run as root, a worker with its capabilities could make a device in its scratch folder
    (the host's disk, /dev/mem) and read it past Landlock: it holds none."""
    outcomes = attack(server, "devices")
    assert not succeeded(outcomes), outcomes
    assert_good_answers(server)


def test_no_limit_priority_or_policy_of_another_process_changes(
    server: testing.RunningServer,
) -> None:
    """prlimit, setpriority and sched_setscheduler need only the same user, not a signal's or a
    trace's right: on the frontend, one could take its descriptors (RLIMIT_NOFILE) or its CPU
    (nice 19, SCHED_IDLE) from every tenant. The worker's own still change."""
    frontend = server.pid
    limits = Path(f"/proc/{frontend}/limits").read_text()
    nice = os.getpriority(os.PRIO_PROCESS, frontend)
    policy = os.sched_getscheduler(frontend)
    outcomes = attack(server, "limits", frontend=frontend)
    assert succeeded(outcomes) == ["own-limit", "own-nice"], outcomes
    assert Path(f"/proc/{frontend}/limits").read_text() == limits
    assert os.getpriority(os.PRIO_PROCESS, frontend) == nice
    assert os.sched_getscheduler(frontend) == policy
    assert_good_answers(server)


def test_no_watch_sees_another_tenants_files(server: testing.RunningServer, store: Path) -> None:
    """inotify needs no read right Landlock checks: a watch on the other tenant's folder or the
    cache would name its files as they are opened and written."""
    folders = {"store": str(store / "good"), "cache": str(server.log_path.parent / "cache")}
    outcomes = attack(server, "watches", **folders)
    assert not succeeded(outcomes), outcomes
    assert_good_answers(server)


def test_no_system_v_segment_or_queue_of_the_hosts_is_reached(
    server: testing.RunningServer,
) -> None:
    """System V shared memory and queues, and POSIX queues, are reached by key or name, not by
    a path Landlock sees: a segment of the server's user (a database's, another program's)
    would be read."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    key = 0x6D680000 + os.getpid() % 0xFFFF
    segment = libc.shmget(key, 4096, 0o1000 | 0o600)  # IPC_CREAT
    queue = libc.msgget(key, 0o1000 | 0o600)
    assert segment >= 0 and queue >= 0
    try:
        ctypes.memmove(libc.shmat(segment, None, 0), SECRET, len(SECRET))
        outcomes = attack(server, "shared-memory", key=key)
    finally:
        libc.shmctl(segment, 0, None)  # IPC_RMID
        libc.msgctl(queue, 0, None)
    assert not succeeded(outcomes), outcomes
    assert SECRET.decode() not in str(outcomes)
    assert_good_answers(server)
