"""The toolkit: `bench` load-tests an endpoint, `tune` sweeps server settings, `simulate` replays
an access log through eviction policies, `cost` turns throughput and latency into money.

Each works against any HTTP endpoint speaking the SageMaker invocation contract; `tune` also
starts `modelhost serve` itself. Needs the `toolkit` extra (aiohttp, rich, matplotlib).
"""
