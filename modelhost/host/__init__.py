"""The core: models into memory and out of it, and requests to them.

- `model_host`  the one object the HTTP layer talks to; joins the parts below
- `residency`   each model's way into memory and out of it: load, make room, unload, worker lost
- `scaling`     copies of a busy model on more workers, and back
- `invoking`    the invoke path: admission, queue and batches, deadlines
- `registry`    models registered from URLs, and revalidation of loaded artifacts
- `manifests`   each model's own settings and the memory to reserve for it
- `upkeep`      the background loops
- `calls`       what goes in and comes out
"""

from modelhost.host.calls import Invocation, LoadOutcome, Result
from modelhost.host.manifests import estimate_footprint
from modelhost.host.model_host import ModelHost

__all__ = ["Invocation", "LoadOutcome", "ModelHost", "Result", "estimate_footprint"]
