"""Model folders with MMS handlers and SageMaker inference scripts, each around iris."""

from __future__ import annotations

from pathlib import Path

from modelhost.testing.models import iris_logreg

# ---------------------------------------------------------------------------- handler folders

_BODY_PARSER = '''
def _body(request):
    """The request body as JSON, whichever form MMS hands it in (bytes, str, or decoded)."""
    body = request.get("body") if request.get("body") is not None else request.get("data")
    if isinstance(body, (bytes, bytearray)):
        body = body.decode("utf-8")
    return json.loads(body) if isinstance(body, str) else body
'''

_MMS_HANDLER = (
    '''"""An MMS-style handler: loads model.joblib from model_dir on first call."""

import json
import os

import joblib
import numpy as np

_model = None

'''
    + _BODY_PARSER
    + """

def _rows(request):
    body = _body(request)
    if isinstance(body, dict):
        body = body.get("instances", body.get("inputs"))
    rows = np.asarray(body, dtype=float)
    return rows.reshape(1, -1) if rows.ndim == 1 else rows


def handle(data, context):
    global _model
    if _model is None:
        model_dir = context.system_properties["model_dir"]
        _model = joblib.load(os.path.join(model_dir, "model.joblib"))
    if data is None:  # MMS calls handle(None, context) once at load time
        return None
    return [
        {"predictions": _model.predict(_rows(request)).tolist(), "handler": "custom handler"}
        for request in data
    ]
"""
)

_SLOW_HANDLER = (
    '''"""An MMS-style handler that sleeps, so a test can kill its worker mid-call."""

import json
import time

SLEEP_FROM_BODY = {from_body}
FIXED_SLEEP_S = {fixed_sleep_s}

'''
    + _BODY_PARSER
    + """

def _sleep_s(request):
    if not SLEEP_FROM_BODY:
        return FIXED_SLEEP_S
    body = _body(request)
    return float(body.get("sleep", 0.0)) if isinstance(body, dict) else 0.0


def handle(data, context):
    if data is None:
        return None
    replies = []
    for request in data:
        seconds = _sleep_s(request)
        time.sleep(seconds)
        replies.append({{"slept": seconds}})
    return replies
"""
)

_SAGEMAKER_MODEL_FN = '''"""SageMaker-style inference code; the container supplies the other _fn."""

import os

import joblib


def model_fn(model_dir):
    return joblib.load(os.path.join(model_dir, "model.joblib"))
'''

_SAGEMAKER_FULL = """

def input_fn(request_body, request_content_type):
    if isinstance(request_body, (bytes, bytearray)):
        request_body = request_body.decode("utf-8")
    rows = json.loads(request_body)
    return [rows] if rows and not isinstance(rows[0], list) else rows


def predict_fn(input_data, model):
    return model.predict(input_data).tolist()


def output_fn(prediction, accept):
    return json.dumps({"predictions": prediction, "handler": "sagemaker"}), "application/json"
"""


def mms_handler_folder(path: Path) -> Path:
    """An iris folder with an MMS `handler.py` tagging its output."""
    path = Path(path)
    iris_logreg(_fresh_folder(path) / "model.joblib")
    (path / "handler.py").write_text(_MMS_HANDLER)
    return path


def slow_handler_folder(
    path: Path, sleep_s_param: bool = True, fixed_sleep_s: float = 60.0
) -> Path:
    """An MMS handler folder whose handle() sleeps, then returns `{"slept": s}`.

    With `sleep_s_param` it sleeps for the body's `{"sleep": s}`, else `fixed_sleep_s`.
    """
    path = _fresh_folder(Path(path))
    source = _SLOW_HANDLER.format(from_body=bool(sleep_s_param), fixed_sleep_s=float(fixed_sleep_s))
    (path / "handler.py").write_text(source)
    return path


def sagemaker_folder(path: Path, full: bool = False) -> Path:
    """An iris folder with `code/inference.py`; `full` adds input_fn, predict_fn, output_fn."""
    path = Path(path)
    iris_logreg(_fresh_folder(path) / "model.joblib")
    (path / "code").mkdir(exist_ok=True)
    source = _SAGEMAKER_MODEL_FN
    if full:
        source = source.replace("import os\n", "import json\nimport os\n") + _SAGEMAKER_FULL
    (path / "code" / "inference.py").write_text(source)
    return path


def _fresh_folder(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
