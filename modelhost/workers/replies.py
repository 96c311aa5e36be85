"""A worker's reply as its caller gets it, or the error it stands for."""

from __future__ import annotations

from typing import TypeVar, cast

from modelhost.errors import DeadlineExceeded, WorkerDied
from modelhost.workers.handle import WorkerHandle
from modelhost.workers.messages import Failed, Infer, Reply, Request

ReplyT = TypeVar("ReplyT", bound=Reply)


def checked(reply: Reply, expect: type[ReplyT]) -> ReplyT:
    """The reply as `expect`, its call's kind (`Calls.answer` drops a worker answering any
    other); a failure raised as the exception it was."""
    if isinstance(reply, Failed):
        raise reply.failure.rebuild()
    return cast(ReplyT, reply)


def gone(worker: WorkerHandle) -> WorkerDied:
    return WorkerDied(f"worker {worker.worker_id} has died; retry is safe")


def missed(
    worker: WorkerHandle, kind: type[Request], model: str, timeout_s: float, own: bool = False
) -> Exception:
    """The error of a call past its deadline, the model's `own` or the server's."""
    if kind is Infer:
        what, setting = "a batch", "--default-response-timeout-s"
        own_setting = "response_timeout_s (TorchServe's response_timeout)"
    else:
        what, setting = f"the {kind.__name__.lower()}", "--worker-load-timeout-s"
        own_setting = "load_timeout_s (TorchServe's startup_timeout)"
    return DeadlineExceeded(
        f"worker {worker.worker_id} (pid {worker.pid}) did not finish {what} of model {model} "
        f"within {timeout_s:g} s, so it was killed and is being replaced; check the model's "
        f"handler, or raise {'its ' + own_setting if own else setting}"
    )
