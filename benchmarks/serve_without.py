"""`modelhost serve` with one part of the observability switched off: for benchmarks only.

The server has no switch for its metrics or for observing invocations (they are always on, and
should be); this launcher patches one of them out before serving, so a benchmark can say what
each costs. `observer`: invocations are not observed at all (no in-flight gauge, no exchange: no
metrics, per-model counters or access log for them); `metrics`: the per-request metrics only;
`nothing`: no patch (the same launcher, for a fair comparison). The access log is off unless
`--access-log` is given, so its cost is a run with it against one without.

    python benchmarks/serve_without.py metrics --model-store DIR --port 8080
    python benchmarks/cpu_per_request.py --servers modelhost --without metrics
"""

from __future__ import annotations

import sys
from typing import Any

PARTS = ("nothing", "observer", "metrics")


def switch_off(part: str) -> None:
    from modelhost.http.invocations import Invocations
    from modelhost.observe.metrics import Metrics

    if part == "observer":
        init = Invocations.__init__

        def unobserved(self: Invocations, *args: Any, **kwargs: Any) -> None:
            init(self, *args, **kwargs)
            self.observer = None

        Invocations.__init__ = unobserved  # type: ignore[method-assign]
    elif part == "metrics":
        Metrics.on_exchange = lambda self, exchange: None  # type: ignore[method-assign]


def main() -> None:
    part = sys.argv[1]
    if part not in PARTS:
        sys.exit(f"usage: serve_without.py {{{','.join(PARTS)}}} SERVE-ARGS...")
    switch_off(part)
    from modelhost.cli.main import main as modelhost_main

    sys.argv = ["modelhost", "serve", *sys.argv[2:]]
    modelhost_main()


if __name__ == "__main__":
    main()
