"""The models' usage counters (`GET /models/{model}`'s `counters`): a request's cost as the
number of names they hold grows to their cap.

Hot traffic (`--hot` models, one exchange each in turn, as a front's reports and the access log
bring them) is recorded and folded after `--seen` other names were counted first: none, half
the cap, the cap. The counters are the frontend's; no server, no workers. `--checkout` runs a
`git archive` of another commit, to compare.

    python benchmarks/usage_counters.py [--hot 100] [--requests 128000] [--tries 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

from _common import add_checkout, markdown_table, use_checkout, write_results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hot", type=int, default=100)
    parser.add_argument("--requests", type=int, default=128_000)
    parser.add_argument("--tries", type=int, default=3)
    add_checkout(parser)
    args = parser.parse_args()
    use_checkout(args)
    from modelhost.observe.usage import MAX_MODELS

    rows = []
    for seen in (0, MAX_MODELS // 2, MAX_MODELS):
        tries = [a_request_us(seen, args.hot, args.requests) for _ in range(args.tries)]
        rows.append({"seen": seen, "us_a_request": statistics.median(tries), "tries": tries})
    table = markdown_table(
        ["names counted before", "µs a request (median)"],
        [[f"{row['seen']:,}", f"{row['us_a_request']:.2f}"] for row in rows],
    )
    print(table)
    results = {"hot": args.hot, "requests": args.requests, "commit": args.commit, "rows": rows}
    write_results("usage-counters", results, table)


def a_request_us(seen: int, hot: int, requests: int) -> float:
    """µs to record and fold one of `requests` exchanges over `hot` models, `seen` names in."""
    from modelhost.observe.usage import ModelUsage

    usage = ModelUsage()
    for index in range(seen):
        usage.record(exchange(f"seen/{index}"))
    usage.fold()
    traffic = [exchange(f"hot/{index % hot}") for index in range(requests)]
    started = time.perf_counter()
    for each in traffic:
        usage.record(each)
    usage.fold()
    return (time.perf_counter() - started) / requests * 1e6


def exchange(model: str) -> object:
    from modelhost.observe.exchange import Exchange

    return Exchange(
        time=0.0,
        method="POST",
        route="/invocations",
        status=200,
        duration_s=0.001,
        bytes_in=16,
        bytes_out=20,
        invocation=True,
        model=model,
        cache="hit",
        timings_ms={"queue": 0.1, "infer": 0.5},
    )


if __name__ == "__main__":
    main()
