"""The environment a worker runs in: what runtimes and handlers need, none of the secrets.

Workers run tenants' code and never talk to the store, so tokens and credentials stay in the
frontend. Hugging Face runs offline: models come from the disk tier only.
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
    "VECLIB_*",  # macOS Accelerate's thread count
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
# its default is a thread per core in every worker; NEVER would refuse it (TOKEN)
TOKENIZER_THREADS = "TOKENIZERS_PARALLELISM"


def worker_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables a worker gets, and those that keep it offline."""
    passed = {
        name: value
        for name, value in environ.items()
        if _matches(name, PASSED) and not _matches(name, NEVER)
    }
    tokenizers = {TOKENIZER_THREADS: environ.get(TOKENIZER_THREADS, "false")}
    return {**passed, **tokenizers, **OFFLINE}


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name.upper(), pattern) for pattern in patterns)
