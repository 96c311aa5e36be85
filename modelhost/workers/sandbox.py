"""The sandbox of workers that host untrusted models: read-only, no network, no exec.

Landlock confines files, TCP and signals; seccomp refuses the calls Landlock does not see.
A worker confines itself once, with a single thread, before it reads a model: Landlock binds
the calling thread and those it starts after.
"""

from __future__ import annotations

import errno
import os
import socket
import sys
import sysconfig
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from modelhost.workers.views import make_own_view

# scopes signals and abstract sockets from this version (Linux 6.12)
MIN_LANDLOCK_ABI = 6

# libraries, devices and kernel reports
SYSTEM_READ = (
    "/usr",
    "/lib",
    "/lib64",
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/dev/urandom",
    "/dev/random",
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/proc/stat",
    "/sys/devices/system/cpu",
    "/sys/fs/cgroup",
)
SYSTEM_WRITE = ("/dev/null", "/proc/self/clear_refs")  # clear_refs: the load's peak RSS

# beyond Landlock: sockets, exec, other processes' memory, io_uring (unseen by seccomp),
# namespaces and keyrings
DENIED_CALLS = (
    "execve",
    "execveat",
    "connect",
    "bind",
    "listen",
    "accept",
    "accept4",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "inotify_add_watch",
    "fanotify_init",
    "fanotify_mark",
    "shmget",
    "shmat",
    "shmctl",
    "msgget",
    "msgsnd",
    "msgrcv",
    "msgctl",
    "semget",
    "semop",
    "semtimedop",
    "semctl",
    "ipc",
    "fork",
    "vfork",
    "memfd_create",  # a file in memory no path names
    # metadata, which Landlock does not govern
    "chmod",
    "fchmod",
    "fchmodat",
    "chown",
    "fchown",
    "lchown",
    "fchownat",
    "utime",
    "utimes",
    "futimesat",
    "utimensat",
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
)
CLONE_THREAD = 0x10000
# the same user may set another process's limits, priority or policy: (call, argument, the
# caller's value)
OWN_PROCESS_CALLS = (
    ("prlimit64", 0, 0),
    ("sched_setscheduler", 0, 0),
    ("sched_setparam", 0, 0),
    ("sched_setattr", 0, 0),
    ("setpriority", 0, 0),
    ("setpriority", 1, 0),
    ("ioprio_set", 0, 1),
    ("ioprio_set", 1, 0),
)
CAPABILITY_VERSION_3 = 0x20080522  # capset's header
SOCK_TYPE_MASK = 0xF
# unknown to older libseccomp; one number everywhere
NUMBERED_CALLS = {"fchmodat2": 452, "setxattrat": 463, "removexattrat": 466}


@dataclass(frozen=True)
class Support:
    """Whether this machine can sandbox a worker, and if not, why."""

    landlock_abi: int
    missing: str = ""  # why not; empty when it can

    @property
    def available(self) -> bool:
        return not self.missing

    def describe(self) -> str:
        """For the server's start line."""
        if self.available:
            return (
                f"untrusted models load in sandboxed workers (Landlock ABI {self.landlock_abi}, "
                "seccomp, no_new_privs)"
            )
        return f"program formats are refused: no sandbox, as {self.missing}"


def support() -> Support:
    """What this kernel and the installed libraries allow."""
    if not sys.platform.startswith("linux"):
        return Support(0, "the sandbox needs Linux")
    abi = _landlock_abi()
    if abi < MIN_LANDLOCK_ABI:
        found = f"ABI {abi}" if abi else "none"
        return Support(abi, f"Landlock ABI {MIN_LANDLOCK_ABI} (Linux 6.12) is missing ({found})")
    try:
        import pyseccomp  # noqa: F401  (loads libseccomp)
    except (ImportError, OSError) as exc:
        return Support(abi, f"seccomp is unusable ({type(exc).__name__}: {exc})")
    return Support(abi)


@dataclass(frozen=True)
class Untrusted:
    """How workers host untrusted models (--refuse-pickle): sandboxed where the machine can."""

    support: Support
    views: str  # the workers' views' folder (views.py)

    def confine(self, run_dir: Path, also_read: Iterable[Path] = ()) -> str:
        """Confine this worker; else say why, and its programs are refused (fail closed)."""
        if not self.support.available:
            return self.support.missing
        try:
            view = [str(make_own_view(self.views))] if self.views else []
            confine(view, also_read, scratch_folder(run_dir))
        except Exception as exc:  # noqa: BLE001  (said at every refusal, and logged)
            print(f"modelhost worker {os.getpid()}: no sandbox: {exc}", file=sys.stderr)
            return f"the worker could not confine itself ({type(exc).__name__}: {exc})"
        return ""


def scratch_path(run_dir: Path, pid: int) -> Path:
    """Where the worker `pid` writes; the pool removes it when the worker is gone."""
    return run_dir / f"scratch-{pid}"


def scratch_folder(run_dir: Path) -> Path:
    """The worker's own folder, the one it may write: its temporary folder and its home.

    Runtimes unpack and keep settings there.
    """
    folder = scratch_path(run_dir, os.getpid())
    folder.mkdir(mode=0o700)
    os.environ["TMPDIR"] = os.environ["HOME"] = str(folder)
    tempfile.tempdir = str(folder)  # the template may have chosen one already
    return folder


def _landlock_abi() -> int:
    try:
        import landlockpy
    except ImportError:
        return 0
    try:
        return int(landlockpy.abi_version())
    except OSError:
        return 0


def confine(model_roots: Sequence[str], also_read: Iterable[Path], scratch: Path) -> None:
    """Confine this process for good: read the runtime and `model_roots`, write `scratch` only."""
    if len(os.listdir("/proc/self/task")) != 1:
        raise RuntimeError("a worker confines itself before it starts a thread")
    restrict_files([*runtime_paths(), *model_roots, *map(str, also_read)], str(scratch))
    refuse_calls()
    drop_capabilities()


def runtime_paths() -> list[str]:
    """Python's prefixes and libraries, modelhost's package, and the system's."""
    import modelhost

    layout = sysconfig.get_paths()
    python = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    libraries = [layout[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")]
    site = [path for path in sys.path if path.endswith(("site-packages", "dist-packages"))]
    package = str(Path(modelhost.__file__).parent)
    return [*python, *libraries, *site, package, *SYSTEM_READ, f"/proc/{os.getpid()}"]


def restrict_files(readable: Sequence[str], scratch: str) -> None:
    """Landlock: read `readable`, write `scratch` and two files; no exec, TCP or signal out."""
    from landlockpy import AccessFS, AccessNet, Ruleset, Scope

    read = AccessFS.READ_FILE | AccessFS.READ_DIR
    read_write = AccessFS.READ_FILE | AccessFS.WRITE_FILE | AccessFS.TRUNCATE  # open(..., "w")
    scope = Scope.ABSTRACT_UNIX_SOCKET | Scope.SIGNAL
    # every right this kernel knows is handled, so denied unless granted below
    with Ruleset(handled_net=AccessNet.BIND_TCP | AccessNet.CONNECT_TCP, scoped=scope) as rules:
        for path in _existing(readable):
            rules.allow_path(path, read if os.path.isdir(path) else AccessFS.READ_FILE)
        for path in _existing(SYSTEM_WRITE):
            rules.allow_path(path, read_write)
        devices = AccessFS.MAKE_CHAR | AccessFS.MAKE_BLOCK
        rules.allow_path(scratch, rules.handled_fs & ~(AccessFS.EXECUTE | devices))
        rules.restrict()  # sets no_new_privs first


def _existing(paths: Iterable[str]) -> list[str]:
    return sorted({path for path in paths if path and os.path.exists(path)})


def refuse_calls() -> None:
    """seccomp: EPERM for `DENIED_CALLS`, sockets but Unix streams, and forks."""
    import pyseccomp as seccomp

    refused = seccomp.ERRNO(errno.EPERM)
    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    for call in DENIED_CALLS:
        rules.add_rule(refused, call)
    for call, number in NUMBERED_CALLS.items():
        known = seccomp.resolve_syscall(seccomp.Arch.NATIVE, call)
        rules.add_rule(refused, known if known >= 0 else number)
    rules.add_rule(refused, "socket", seccomp.Arg(0, seccomp.NE, socket.AF_UNIX))
    for kind in (socket.SOCK_DGRAM, socket.SOCK_RAW):  # a datagram needs no connect
        for call in ("socket", "socketpair"):
            rules.add_rule(refused, call, seccomp.Arg(1, seccomp.MASKED_EQ, SOCK_TYPE_MASK, kind))
    rules.add_rule(refused, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_THREAD, 0))
    for call, position, value in OWN_PROCESS_CALLS:
        rules.add_rule(refused, call, seccomp.Arg(position, seccomp.NE, value))
    # glibc falls back to clone
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    rules.load()


def drop_capabilities() -> None:
    """Hold none, so a root worker makes no device."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    header = (ctypes.c_uint32 * 2)(CAPABILITY_VERSION_3, 0)
    nothing = (ctypes.c_uint32 * 6)()
    if libc.capset(header, nothing) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"capset: {os.strerror(code)}")
