"""What the frontend tells every worker through the template's environment."""

from __future__ import annotations

import os
from typing import NamedTuple

from modelhost.workers.answers import ANSWER_VARIABLE
from modelhost.workers.devices import DEVICES_VARIABLE
from modelhost.workers.direct import DIRECT_VARIABLE
from modelhost.workers.kept_memory import KEPT_VARIABLE


class WorkerSettings(NamedTuple):
    devices: str = ""  # --devices
    direct: bool = False  # the fronts' requests are taken too
    max_answer_bytes: int = 0  # max_response_size; 0: none
    max_kept_bytes: int = 0  # worker_max_growth; 0: none

    @classmethod
    def popped(cls) -> WorkerSettings:
        """Taken out of the environment: the models' code need not see them."""
        return cls(
            os.environ.pop(DEVICES_VARIABLE, ""),
            os.environ.pop(DIRECT_VARIABLE, "") == "1",
            int(os.environ.pop(ANSWER_VARIABLE, "0")),
            int(os.environ.pop(KEPT_VARIABLE, "0")),
        )
