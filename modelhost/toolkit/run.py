"""`bench` from options to files."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from modelhost.toolkit.bench import BenchRun, bench_summary, run_bench
from modelhost.toolkit.bench import Progress as RunProgress
from modelhost.toolkit.loadgen import ProcessPlan
from modelhost.toolkit.options import option
from modelhost.toolkit.payloads import Payload, models_named, payloads_by_model, read_payloads
from modelhost.toolkit.traffic import (
    HOT_MODELS_SHARE,
    HOT_REQUESTS_SHARE,
    Popularity,
    Target,
    read_headers,
    read_models,
)
from modelhost.toolkit.workload import workload

if TYPE_CHECKING:  # rich is an extra, so bench can say to install it
    from rich.console import Console

IRIS_ROW = b"[5.1, 3.5, 1.4, 0.2]"


PROCESSES_DEFAULT = max(1, min(4, len(os.sched_getaffinity(0)) // 2))
MOST_CONNECTIONS = 65535  # a user each; a client address has no more ports


@dataclass(frozen=True, kw_only=True)
class BenchOptions:
    url: str = ""  # empty with --endpoint-name
    endpoint_name: str = option(
        "", "a SageMaker endpoint to load-test instead of URL: InvokeEndpoint, SigV4-signed"
    )
    region: str = option("", "the endpoint's AWS region [default: the standard chain's]")
    endpoint_url: str = option(
        "", "another InvokeEndpoint host (a VPC endpoint, a local stand-in) [default: AWS's]"
    )
    target_model: str = option(
        "", "with --endpoint-name: the TargetModel of a multi-model endpoint (--models: several)"
    )
    payloads: Path | None = option(
        None,
        'JSON lines (SageMaker {"Body","ContentType"}, "TargetModel" for one model\'s, or raw '
        "JSON), a folder of files (each sent with the content type of its extension), or a "
        ".npy/.npz [default: one iris row]",
        exists=True,
        show_default=False,
    )
    models: str = option(
        "", "comma-separated model names, or @FILE (one a line) [default: --payloads' models]"
    )
    popularity: str = option(
        "uniform",
        "two-class: --hot-models of the models get --hot-requests of the requests",
        choices=("uniform", "zipf", "two-class"),
    )
    zipf_s: float = option(1.0, "Zipf exponent", minimum=0)
    hot_models: float = option(
        HOT_MODELS_SHARE,
        "two-class: the share of the models that are hot (Aegaeon's trace)",
        minimum=0,
        maximum=1,
    )
    hot_requests: float = option(
        HOT_REQUESTS_SHARE,
        "two-class: the share of the requests they get (Aegaeon's trace)",
        minimum=0,
        maximum=1,
    )
    tenant_from: str = option(
        "",
        "tenants as the server's --tenant-from finds them: header (X-Modelhost-Tenant), "
        "header:NAME (each with --tenants), or name:N (the models' first N folders)",
    )
    tenants: int = option(
        0, "with --tenant-from header: deal the models to N tenants, t000 on", minimum=0
    )
    model_in: str = option(
        "header",
        "X-Amzn-SageMaker-Target-Model on /invocations, /models/{m}/invoke (path), or "
        "TorchServe's /predictions/{m}",
        choices=("header", "path", "predictions"),
    )
    concurrency: int = option(
        0, "closed loop: N users", short="-c", minimum=0, maximum=MOST_CONNECTIONS
    )
    rate_rps: float = option(
        0.0, "open loop: requests per second", flag="--rate", short="-r", minimum=0
    )
    arrivals: str = option("poisson", "open loop schedule", choices=("constant", "poisson"))
    duration_s: float = option(10.0, "seconds measured", flag="--duration", minimum=0)
    requests: int = option(
        0,
        "measure this many requests (after warm-up) instead of a --duration",
        show_default=False,
        minimum=0,
    )
    warmup_s: float = option(
        2.0, "seconds sent first and left out of every figure", flag="--warmup", minimum=0
    )
    processes: int = option(PROCESSES_DEFAULT, "load-generator processes", minimum=1)
    max_in_flight: int = option(
        10_000, "open loop: most requests outstanding per process", minimum=1
    )
    timeout_s: float = option(30.0, "seconds a request", flag="--timeout", minimum=0, above=True)
    client: str = option("aiohttp", choices=("aiohttp", "httpx"))
    seed: int = option(0, minimum=0)
    out: Path = option(
        Path("bench-out"), "folder for summary.json, requests.csv, report.html", file_okay=False
    )
    headers: tuple[str, ...] = option(
        (),
        "'Name: value' sent with every request, as curl's -H (repeatable): TorchServe's "
        "'Authorization: Bearer <inference key>'",
        flag="--header",
        short="-H",
    )
    quiet: bool = option(False, "no progress bar", show_default=False)


def sagemaker_target(options: BenchOptions) -> tuple[str, str]:
    """(invocation URL, region) of --endpoint-name, credentials checked before any load."""
    import botocore.session
    from botocore.exceptions import BotoCoreError

    if options.url or options.model_in != "header":
        raise ValueError("give URL or --endpoint-name (its models go in the header), not both")
    session = botocore.session.get_session()
    try:
        region = options.region or session.get_config_variable("region")
        credentials = session.get_credentials() if region else None
    except BotoCoreError as error:  # a profile that is not there, an expired SSO login
        raise ValueError(f"AWS credentials cannot be read: {error}") from None
    if not region:
        raise ValueError("give --region (or AWS_REGION) for --endpoint-name")
    if credentials is None:
        raise ValueError("no AWS credentials in the standard chain: set AWS_PROFILE or the keys")
    host = options.endpoint_url or f"https://runtime.sagemaker.{region}.amazonaws.com"
    return (
        f"{host.rstrip('/')}/endpoints/{quote(options.endpoint_name, safe='')}/invocations",
        region,
    )


def plan_of(options: BenchOptions) -> ProcessPlan:
    url, sign_region = options.url, ""
    if options.endpoint_name:
        url, sign_region = sagemaker_target(options)
    elif not url:
        raise ValueError("give URL, or --endpoint-name for a SageMaker endpoint")
    if bool(options.concurrency) == bool(options.rate_rps):
        raise ValueError("give one of --concurrency N (closed loop) or --rate R (open loop)")
    if options.duration_s <= 0 and not options.requests:
        raise ValueError(f"--duration must be above 0 s, not {options.duration_s}")
    if options.requests < 0:
        raise ValueError(f"--requests must be 0 (use --duration) or more, not {options.requests}")
    if options.target_model and (options.models or not options.endpoint_name):
        raise ValueError("--target-model goes with --endpoint-name, instead of --models")
    models = options.models or options.target_model
    payloads = read_payloads(options.payloads) if options.payloads else [Payload(IRIS_ROW)]
    names = read_models(models) if models else models_named(payloads)
    payloads_by_model(names or [""], payloads)  # each model has something to send
    pairs = workload(names, options.tenant_from, options.tenants)
    popularity = popularity_of(options, list(pairs.models))
    return ProcessPlan(
        target=Target(url, options.model_in, read_headers(options.headers)),
        popularity=popularity,
        payloads=tuple(payloads),
        duration_s=options.duration_s,
        requests=options.requests,
        warmup_s=options.warmup_s,
        concurrency=options.concurrency,
        rate_rps=options.rate_rps,
        poisson=options.arrivals == "poisson",
        max_in_flight=options.max_in_flight,
        timeout_s=options.timeout_s,
        client=options.client,
        seed=options.seed,
        sign_region=sign_region,
        tenants=pairs.tenants,
        tenant_header=pairs.header,
    )


def popularity_of(options: BenchOptions, models: list[str]) -> Popularity:
    if options.popularity == "zipf":
        return Popularity.zipf(models, options.zipf_s)
    if options.popularity == "two-class":
        for name, share in (
            ("--hot-models", options.hot_models),
            ("--hot-requests", options.hot_requests),
        ):
            if not 0 < share < 1:
                raise ValueError(f"{name} is a share between 0 and 1, not {share}")
        return Popularity.two_class(models, options.hot_models, options.hot_requests)
    return Popularity.uniform(models)


def run_with_progress(
    plan: ProcessPlan, processes: int, console: Console, quiet: bool = False
) -> BenchRun:
    """The run, with a progress bar unless `quiet`."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    if quiet:
        return run_bench(plan, processes)
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[done]} answered, {task.fields[errors]} errors"),
    )
    with Progress(*columns, console=console, transient=True) as bar:
        # by time; with --requests by answers, an estimate
        total = plan.requests or plan.end_s
        task = bar.add_task("bench", total=total, done=0, errors=0)

        def update(p: RunProgress) -> None:
            done = p.done if plan.requests else p.elapsed_s
            bar.update(task, completed=min(done, total), done=p.done, errors=p.errors)

        return run_bench(plan, processes, update)


def bench_command(options: BenchOptions, console: Console | None = None) -> dict[str, Any]:
    from modelhost.toolkit.report.bench import write_bench
    from modelhost.toolkit.report.terminal import bench_tables, console_for, show

    console = console or console_for()
    plan = plan_of(options)
    run = run_with_progress(plan, options.processes, console, options.quiet)
    summary = bench_summary(plan, run)
    show(console, bench_tables(summary), summary["generator"]["warnings"])
    paths = write_bench(options.out, run, summary)
    console.print("wrote " + ", ".join(str(path) for path in paths.values()))
    return summary


def read_summary(path: Path) -> dict[str, Any]:
    summary: dict[str, Any] = json.loads(Path(path).read_text())
    return summary
