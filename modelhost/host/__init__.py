"""The core: models into memory and out of it, and requests to them.

- `model_host`  the one object the HTTP layer talks to; builds and joins the parts below
- `residency`   each model's way into memory and out of it: load, make room, unload, worker lost
- `copies`      which workers hold each model: loaders, copies arriving, leaving and shed
- `scaling`     the policy of copies: when a busy model gets one more, the floor, scale-in
- `changes`     the signal loads and unloads wait on, and the server's drain
- `invoking`    the invoke path: admission, acquire, deadlines, the retry of a dead worker's batch
- `queues`      each model's queue and batcher, and the frames of its batches
- `registry`    models registered from URLs, and revalidation of loaded artifacts
- `manifests`   each model's own settings and the memory to reserve for it
- `upkeep`      the background loops
- `calls`       what goes in and comes out
"""

from modelhost.host.calls import Invocation, LoadOutcome, Result
from modelhost.host.manifests import estimate_footprint
from modelhost.host.model_host import ModelHost

__all__ = ["Invocation", "LoadOutcome", "ModelHost", "Result", "estimate_footprint"]
