"""Helpers users and our tests share: real models, handler folders, archives, a running server.

What only our tests use lives in `tests/helpers/`.
"""

from modelhost.testing.archives import tar_gz_of, zip_of
from modelhost.testing.handlers import mms_handler_folder, sagemaker_folder, slow_handler_folder
from modelhost.testing.models import (
    corrupt_artifact,
    digits_rows,
    dump,
    iris_logreg,
    iris_rows,
    lightgbm_iris,
    mar_of,
    onnx_iris,
    padded_logreg,
    parent_made,
    random_forest,
    run_archiver,
    tensorflow_iris,
    tensorflow_irises,
    torch_iris,
    xgboost_iris,
)
from modelhost.testing.server import (
    RunningServer,
    StepClock,
    copy_artifact,
    free_port,
    json_lines,
    serve_args,
    wait_listening,
)

__all__ = [
    "RunningServer",
    "StepClock",
    "copy_artifact",
    "corrupt_artifact",
    "digits_rows",
    "dump",
    "free_port",
    "iris_logreg",
    "iris_rows",
    "json_lines",
    "lightgbm_iris",
    "mar_of",
    "mms_handler_folder",
    "onnx_iris",
    "padded_logreg",
    "parent_made",
    "random_forest",
    "run_archiver",
    "sagemaker_folder",
    "serve_args",
    "slow_handler_folder",
    "tar_gz_of",
    "tensorflow_iris",
    "tensorflow_irises",
    "torch_iris",
    "wait_listening",
    "xgboost_iris",
    "zip_of",
]
