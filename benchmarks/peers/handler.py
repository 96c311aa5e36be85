"""The TorchServe and MMS handler for the race: JSON rows in, `{"predictions": [...]}` out.

Both servers call `handle(data, context)` with one item per request in the batch (one, unless
batching is on), the body under "body" or "data", already decoded when the request's
Content-Type is application/json. The batch's rows are predicted as one matrix and split back,
as modelhost's scikit-learn handler does. Nothing else: no pre-warming, no caching of answers.
"""

import json
import os

import joblib
import numpy as np

_model = None


def handle(data, context):
    global _model
    if _model is None:
        model_dir = context.system_properties["model_dir"]
        _model = joblib.load(os.path.join(model_dir, "model.joblib"))
    if data is None:  # MMS's and TorchServe's initialisation call
        return None
    batches = [_rows(request) for request in data]
    predictions = _model.predict(np.concatenate(batches)).tolist()
    answers, start = [], 0
    for rows in batches:
        answers.append(json.dumps({"predictions": predictions[start : start + len(rows)]}))
        start += len(rows)
    return answers


def _rows(request):
    body = request.get("body")
    if body is None:
        body = request.get("data")
    if isinstance(body, (bytes, bytearray)):
        body = json.loads(body)
    rows = np.asarray(body, dtype=np.float64)
    return rows.reshape(1, -1) if rows.ndim == 1 else rows
