"""TorchServe's `PUT /models/{model}?min_worker=&max_worker=` on the host's copies."""

from __future__ import annotations

import contextlib

from modelhost.errors import ModelhostError, ModelNotLoaded
from modelhost.host.residency import Residency
from modelhost.host.scaling import Scaling


async def scale_workers(
    residency: Residency, scaling: Scaling, name: str, min_workers: int | None, max_workers: int
) -> int:
    """Set the range of copies and reach its floor; return the copies the model is on."""
    scaling.set_range(name, min_workers, max_workers)
    if min_workers == 0:
        return await scale_to_zero(residency, name)
    if name in residency.loads or residency.memory.get(name) is None:
        await residency.ensure_loaded(name)
    await scaling.fill_floor(name)
    await scaling.drop_above_limit(name)
    resident = residency.memory.get(name)
    return len(resident.workers) if resident else 0


async def scale_to_zero(residency: Residency, name: str) -> int:
    """Unload, after a load under way; the next request loads it, where TorchServe's 503s."""
    if name in residency.loads:
        with contextlib.suppress(ModelhostError):  # a failed load leaves nothing to unload
            await residency.ensure_loaded(name)
    with contextlib.suppress(ModelNotLoaded):  # not loaded, or unloaded meanwhile
        await residency.unload(name)
    return 0
