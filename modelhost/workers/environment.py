"""The environment a worker runs in: what the runtimes and handlers need, none of the server's
secrets.

Workers run tenants' code. They never talk to the model store (the frontend downloads) nor
manage the server, so the management token, cloud credentials and whatever else the operator
exported stay in the frontend. What passes: the process basics (paths, locale, time zone, temp
folders), Python's and the runtimes' own variables (threads, CUDA), and SageMaker's container
variables that handlers read.
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


def worker_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of `environ` a worker gets."""
    return {
        name: value
        for name, value in environ.items()
        if _matches(name, PASSED) and not _matches(name, NEVER)
    }


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name.upper(), pattern) for pattern in patterns)
