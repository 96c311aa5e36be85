"""Workers x threads per worker on a torch model whose forward pass is CPU-parallel: a small
BERT text classifier (Hugging Face folder, random weights), swept by `modelhost tune`.

Writes the store and the payloads, then runs tune over the grid; its report (tune.json,
tune.csv, tune.html) lands in --out.

    .venv/bin/python benchmarks/torch_threads_sweep.py --workers 1,2 --threads 1,2
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from modelhost.testing.hf_models import TEXTS, hf_classifier

SIZES = {"hidden_size": 256, "intermediate_size": 1024, "num_hidden_layers": 4}
MODEL = "bert-classifier"


def write_store(root: Path) -> Path:
    """The store with one classifier of about 13 MiB, and a payload of 8 texts a request."""
    from modelhost.testing import hf_models

    config = hf_models.bert_config
    hf_models.bert_config = lambda **extra: config(**{**SIZES, **extra})  # type: ignore[assignment]
    try:
        hf_classifier(root / "store" / MODEL)
    finally:
        hf_models.bert_config = config  # type: ignore[assignment]
    payloads = root / "payloads.jsonl"
    payloads.write_text(json.dumps({"inputs": [*TEXTS, *TEXTS]}) + "\n")
    return payloads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--concurrency", default="1,2,4,8,16")
    parser.add_argument("--duration", default="4")
    parser.add_argument("--p99-limit-ms", default="200")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/torch-threads"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    payloads = write_store(args.out)
    command = [
        *(sys.executable, "-m", "modelhost", "tune"),
        *("--model-store", str(args.out / "store"), "--models", MODEL),
        *("--payloads", str(payloads), "--out", str(args.out)),
        *("--grid", f"workers={args.workers}", "--grid", f"threads-per-worker={args.threads}"),
        *("--concurrency", args.concurrency, "--duration", args.duration),
        *("--p99-limit-ms", args.p99_limit_ms, "--serve-arg=--memory-budget=4GiB"),
    ]
    subprocess.run(command, check=True)


if __name__ == "__main__":
    main()
