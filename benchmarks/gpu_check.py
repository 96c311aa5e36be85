"""The GPU check: Hugging Face classifiers churned through one device's budget.

    python benchmarks/gpu_check.py                 # on a CUDA machine (scripts/device_gpu.sh)
    python benchmarks/gpu_check.py --device cpu    # a dry run: small models, a fake device

It builds classifiers with random weights, three times as many as fit the device budget, starts
a real server on them, and reports: the device's memory by NVML (on the CPU, the server's own
charge) against the budget; answers equal to the same model called in this process; a wake
from host memory against a load from disk; and hits at concurrency 16 against the in-process
floor on the same device. Figures go to docs/performance.md, with the machine.
"""

from __future__ import annotations

import argparse
import json
import random
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import _common
import httpx

MiB = 2**20
LAYER_PARAMETERS = 12  # a BERT layer holds about 12 * hidden^2 weights
TEXT = "the cat sat on the mat"
BODY = json.dumps({"inputs": [TEXT]})
HEADERS = {"content-type": "application/json"}


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--model-mib", type=float, help="each model's weights (cuda 200, cpu 2)")
    parser.add_argument("--fit", type=int, default=4, help="models the device budget holds")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--churn-s", type=float, help="the Zipf churn's length (cuda 90, cpu 4)")
    parser.add_argument("--hits-s", type=float, help="each hit run's length (cuda 20, cpu 2)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/gpu-check"))
    parser.add_argument("--out", type=Path, default=None, help="a folder for the JSON and table")
    args = parser.parse_args(argv)
    on_cuda = args.device == "cuda"
    args.model_mib = args.model_mib or (200.0 if on_cuda else 2.0)
    args.churn_s = args.churn_s or (90.0 if on_cuda else 4.0)
    args.hits_s = args.hits_s or (20.0 if on_cuda else 2.0)
    return args


def build_models(root: Path, count: int, model_mib: float) -> list[str]:
    """`count` classifiers of about `model_mib` of weights each, seeded apart."""
    from modelhost.testing.hf_models import hf_classifier

    hidden = 768 if model_mib >= 32 else 128
    layers = max(1, round(model_mib * MiB / (LAYER_PARAMETERS * hidden * hidden * 4)))
    sizes = {
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": hidden // 64,
        "intermediate_size": 4 * hidden,
        "initializer_range": 0.02,
    }
    names = [f"clf-{i:02d}" for i in range(count)]
    for seed, name in enumerate(names):  # one at a time: the seed is torch's global one
        if not (root / name / "config.json").exists():
            hf_classifier(root / name, seed=seed, **sizes)
    return names


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.glob("*.safetensors"))


class DeviceWatch:
    """The device's memory as NVML reports it, sampled on a thread, less its use at start."""

    def __init__(self, interval_s: float = 0.05) -> None:
        import pynvml

        pynvml.nvmlInit()
        self.nvml, self.interval_s = pynvml, interval_s
        self.handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        self.start_bytes = self.used_bytes()
        self.most_bytes = 0
        self.unattributed_most_bytes = 0  # the device's figure past its processes' sum
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def used_bytes(self) -> int:
        return int(self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used)

    def _watch(self) -> None:
        while not self._stop.wait(self.interval_s):
            used = self.used_bytes() - self.start_bytes
            processes = self.nvml.nvmlDeviceGetComputeRunningProcesses(self.handle)
            unattributed = used - sum(p.usedGpuMemory or 0 for p in processes)
            self.most_bytes = max(self.most_bytes, used)
            self.unattributed_most_bytes = max(self.unattributed_most_bytes, unattributed)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.most_bytes


class StatsWatch:
    """The server's own charge to the device, where no NVML reads the fake one."""

    def __init__(self, url: str, interval_s: float = 0.05) -> None:
        self.url, self.interval_s, self.most_bytes = url, interval_s, 0
        self.unattributed_most_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as http:
            while not self._stop.wait(self.interval_s):
                devices = http.get("/stats").json()["devices"]
                self.most_bytes = max(self.most_bytes, sum(d["usedBytes"] for d in devices))

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.most_bytes


def call(http: httpx.Client, name: str) -> dict[str, Any]:
    """One invocation: its status, latency, answering tier and Server-Timing parts."""
    from modelhost.observe.exchange import parse_server_timing

    started = time.perf_counter()
    response = http.post(f"/models/{name}/invoke", content=BODY, headers=HEADERS)
    return {
        "model": name,
        "status": response.status_code,
        "ms": (time.perf_counter() - started) * 1000,
        "tier": response.headers.get("x-modelhost-tier", ""),
        "timing": parse_server_timing(response.headers.get("server-timing", "")),
        "body": response.json() if response.status_code == 200 else response.text,
    }


def drive(url: str, names: list[str], clients: int, duration_s: float) -> list[dict[str, Any]]:
    """`clients` threads, each calling the model `names` gives next until the time is up."""
    deadline = time.monotonic() + duration_s
    picks = iter(names)
    lock = threading.Lock()

    def client() -> list[dict[str, Any]]:
        done = []
        with httpx.Client(base_url=url, timeout=120) as http:
            while not done or time.monotonic() < deadline:  # one call at least: a late thread
                with lock:
                    name = next(picks)
                done.append(call(http, name))
        return done

    with ThreadPoolExecutor(clients) as pool:
        runs = [pool.submit(client) for _ in range(clients)]
        return [result for run in runs for result in run.result()]


def zipf(names: list[str], seed: int = 0) -> Any:
    weights = [1 / (rank + 1) for rank in range(len(names))]
    rng = random.Random(seed)
    while True:
        yield from rng.choices(names, weights, k=1024)


def summary(results: list[dict[str, Any]], duration_s: float) -> dict[str, Any]:
    latencies = sorted(r["ms"] for r in results if r["status"] == 200)
    p99 = latencies[int(0.99 * (len(latencies) - 1))] if latencies else float("nan")
    return {
        "requests": len(results),
        "errors": dict(Counter(r["status"] for r in results if r["status"] != 200)),
        "error_examples": {r["status"]: r["body"] for r in results if r["status"] != 200},
        "per_s": round(len(latencies) / duration_s, 1),
        "p50_ms": round(_common.median(latencies), 2),
        "p99_ms": round(p99, 2),
        "tiers": dict(Counter(r["tier"] for r in results)),
    }


def answers_match(store: Path, http: httpx.Client, names: list[str], device: str) -> list[str]:
    """The models whose served scores differ from the same model called in this process."""
    import numpy as np

    from modelhost.testing.hf_models import LABELS, reference_outputs

    wrong = []
    for name in names:
        logits = reference_outputs(store / name, [TEXT], "classification")[0]
        expected = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
        served = {row["label"]: row["score"] for row in call(http, name)["body"][0]}
        got = np.array([served[label] for label in LABELS])
        if not np.allclose(got, expected, atol=2e-3 if device == "cuda" else 1e-5):
            wrong.append(name)
    return wrong


def wake_against_load(server: Any, http: httpx.Client, names: list[str]) -> dict[str, float]:
    """One model loaded from disk, sent to sleep by as many others as that takes, then woken
    from host memory."""
    first, others = names[0], names[1:]
    http.delete(f"/models/{first}")
    slept = len(server.events("sleep"))
    loaded = call(http, first)
    for name in others:
        call(http, name)
        if any(event["model"] == first for event in server.events("sleep")[slept:]):
            break
    woken = call(http, first)
    load_ms = loaded["timing"].get("load", 0.0) + loaded["timing"].get("wake", 0.0)
    wake_ms = woken["timing"].get("wake", float("nan"))
    return {
        "load_from_disk_ms": round(load_ms, 2),
        "wake_from_host_ms": round(wake_ms, 2),
        "woken_tier": woken["tier"],
        "ratio": round(load_ms / wake_ms, 1) if wake_ms else float("nan"),
    }


def in_process_floor(folder: Path, device: str, clients: int, duration_s: float) -> dict[str, Any]:
    """The same model called in this process on the same device by `clients` threads."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(folder, local_files_only=True)
    model = model.eval().to("cuda:0" if device == "cuda" else "cpu")
    lock, deadline = threading.Lock(), time.monotonic() + duration_s

    def client() -> list[float]:
        done = []
        while not done or time.monotonic() < deadline:
            started = time.perf_counter()
            with lock:  # a fast tokenizer is not safe across threads
                encoded = tokenizer([TEXT], return_tensors="pt")
            with torch.inference_mode():
                model(**encoded.to(model.device)).logits.float().cpu()
            done.append((time.perf_counter() - started) * 1000)
        return done

    with ThreadPoolExecutor(clients) as pool:
        runs = [pool.submit(client) for _ in range(clients)]
        results = [
            {"status": 200, "ms": ms, "tier": "in-process"} for r in runs for ms in r.result()
        ]
    return summary(results, duration_s)


def serve_settings(args: argparse.Namespace, budget_bytes: int) -> dict[str, object]:
    devices = {"devices": "cuda:0"} if args.device == "cuda" else {}
    fake = {} if args.device == "cuda" else {"fake_devices": f"1x{budget_bytes}+{MiB}"}
    return {
        "workers": args.workers,
        "memory_budget": "60%",
        "preload_runtimes": "torch",
        "device_budget": str(budget_bytes),
        "eviction_policy": "lru",
        "admission": "none",
        "max_workers_per_model": 1,  # one copy a model: copies on more devices are not built
        **devices,
        **fake,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    from modelhost import testing

    store = args.work / "store"
    names = build_models(store, 3 * args.fit, args.model_mib)
    model_bytes = folder_bytes(store / names[0])
    # a worker's context once its first call loaded the kernels: about 1,095 MB on the H200
    context_bytes = 1100 * MiB if args.device == "cuda" else MiB
    budget_bytes = int(args.fit * model_bytes * 1.1) + args.workers * context_bytes
    watch = DeviceWatch() if args.device == "cuda" else None
    settings = serve_settings(args, budget_bytes)
    work = args.work / "server"
    with testing.RunningServer(
        testing.serve_args(store, work / "cache", **settings), work
    ) as server:
        stats = watch or StatsWatch(server.url)
        with httpx.Client(base_url=server.url, timeout=120) as http:
            wrong = answers_match(store, http, names[:3], args.device)
            wake = wake_against_load(server, http, names)
        churn_results = drive(server.url, zipf(names), args.clients, args.churn_s)
        hot = drive(server.url, iter(lambda: names[0], None), args.clients, args.hits_s)
        most_bytes = stats.stop()
        refused = [e for e in server.events("failure") if e.get("reason") == "device_move"]
        checks = server.events("device_check")
        with httpx.Client(base_url=server.url, timeout=30) as http:
            devices = http.get("/stats").json()["devices"]
    floor = in_process_floor(store / names[0], args.device, args.clients, args.hits_s)
    hits = summary(hot, args.hits_s)
    return {
        "device": args.device,
        "models": len(names),
        "model_bytes": model_bytes,
        "budget_bytes": budget_bytes,
        "contexts_bytes": sum(d["contextBytes"] for d in devices),
        "device_most_bytes": most_bytes,
        "within_budget": most_bytes <= budget_bytes,
        "unattributed_most_bytes": stats.unattributed_most_bytes,
        "moves_refused": len(refused),  # models left on the CPU: a fake's or CUDA's refusal
        "refusals": sorted({e["detail"]["error"] for e in refused}),
        # at a move, what the driver counted for its worker past what the ledger charged it
        "driver_past_ledger_most_bytes": max(
            (e["bytes"] - e["detail"]["charged_bytes"] for e in checks), default=0
        ),
        "answers_differ": wrong,
        "wake": wake,
        "churn": summary(churn_results, args.churn_s),
        "hits": hits,
        "in_process_floor": floor,
        "hits_against_floor": round(hits["per_s"] / floor["per_s"], 2) if floor["per_s"] else None,
        "devices": devices,
    }


def table(results: dict[str, Any]) -> str:
    wake, churn, hits, floor = (results[k] for k in ("wake", "churn", "hits", "in_process_floor"))
    driver_past = round(results["driver_past_ledger_most_bytes"] / MiB, 1)
    unattributed = round(results["unattributed_most_bytes"] / MiB, 1)
    rows = [
        ("device memory, most (MiB)", round(results["device_most_bytes"] / MiB, 1)),
        ("device budget (MiB), contexts included", round(results["budget_bytes"] / MiB, 1)),
        ("within budget", results["within_budget"]),
        ("device past its processes' sum, most (MiB)", unattributed),
        ("driver past the ledger at a move, most (MiB)", driver_past),
        ("moves refused (models left on the CPU)", results["moves_refused"]),
        ("answers differing from in-process", len(results["answers_differ"])),
        ("load from disk (ms)", wake["load_from_disk_ms"]),
        ("wake from host memory (ms)", wake["wake_from_host_ms"]),
        ("load / wake", wake["ratio"]),
        ("churn: requests, errors", f"{churn['requests']}, {churn['errors'] or 0}"),
        ("churn: p50 / p99 (ms)", f"{churn['p50_ms']} / {churn['p99_ms']}"),
        ("churn: tiers", churn["tiers"]),
        ("hits at 16: per s, p99 (ms)", f"{hits['per_s']}, {hits['p99_ms']}"),
        ("in-process floor: per s, p99 (ms)", f"{floor['per_s']}, {floor['p99_ms']}"),
        ("hits / floor", results["hits_against_floor"]),
    ]
    return _common.markdown_table(["figure", "value"], rows)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    results = run(args)
    text = table(results)
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "gpu_check.json").write_text(json.dumps(results, indent=2) + "\n")
        (args.out / "gpu_check.md").write_text(text + "\n")
    else:
        print(_common.write_results("gpu-check", results, text))
    return results


if __name__ == "__main__":
    main()
