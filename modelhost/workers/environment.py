"""The environment a worker runs in: what the runtimes and handlers need, none of the server's
secrets.

Workers run tenants' code. They never talk to the model store (the frontend downloads) nor
manage the server, so the management token, cloud credentials and whatever else the operator
exported stay in the frontend. What passes: the process basics (paths, locale, time zone, temp
folders), Python's and the runtimes' own variables (threads, CUDA), and SageMaker's container
variables that handlers read.

Workers read models from the disk tier only, so the Hugging Face libraries run offline: they
never fetch from the hub, whatever the model's config names. The thread counts are set by the
template (`limit_threads`), from the server's threads per worker.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping

PASSED = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "TERM",
    "TMPDIR",
    "TEMP",
    "TMP",
    "PWD",
    "PYTHON*",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "LD_LIBRARY_PATH",
    "*_NUM_THREADS",
    "OMP_*",
    "MKL_*",
    "KMP_*",
    "OPENBLAS_*",
    "VECLIB_*",  # macOS Accelerate's thread count, one of config.THREAD_VARIABLES
    "CUDA_*",
    "NVIDIA_*",
    "SAGEMAKER_PROGRAM",
    "SAGEMAKER_SUBMIT_DIRECTORY",
    "SAGEMAKER_REGION",
    "SAGEMAKER_CONTAINER_LOG_LEVEL",
    "SAGEMAKER_MULTI_MODEL",
    "SM_*",
)
NEVER = ("*TOKEN*", "*SECRET*", "*PASSWORD*", "*CREDENTIAL*", "AWS_*", "MODELHOST_*")
OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",  # a bar per load in the server's log
}
# one tokenizer thread per inference thread unless the user says otherwise (its name holds
# TOKEN, which NEVER refuses): its default is a thread per core in every worker
TOKENIZER_THREADS = "TOKENIZERS_PARALLELISM"


def worker_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of `environ` a worker gets, and those that keep it offline."""
    passed = {
        name: value
        for name, value in environ.items()
        if _matches(name, PASSED) and not _matches(name, NEVER)
    }
    tokenizers = {TOKENIZER_THREADS: environ.get(TOKENIZER_THREADS, "false")}
    return {**passed, **tokenizers, **OFFLINE}


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name.upper(), pattern) for pattern in patterns)
