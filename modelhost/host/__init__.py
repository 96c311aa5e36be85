"""The core: models into memory and out of it, and requests to them.

- `model_host`  the object the HTTP layer talks to; builds and joins the parts
- `residency`   load, make room, unload, worker lost
- `copies`      which workers hold each model
- `scaling`     when a model gets one more copy, and scale-in
- `changes`     what loads and unloads wait on
- `invoking`    admission, deadlines, retries
- `queues`      each model's queue and batcher
- `registry`    models registered from URLs
- `manifests`   each model's settings and memory reservation
- `idle`        which models have gone unused past their idle time
- `upkeep`      the background loops
"""

from modelhost.cache.memory import State
from modelhost.host.calls import Invocation, LoadOutcome, Result
from modelhost.host.manifests import estimate_footprint
from modelhost.host.model_host import ModelHost

__all__ = ["Invocation", "LoadOutcome", "ModelHost", "Result", "State", "estimate_footprint"]
