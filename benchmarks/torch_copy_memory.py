"""What a second copy of a torch model costs in PSS, by the way its weights are read.

Two processes load the same weights one after the other and both keep them; the figure is the
second process's PSS growth (and the first's PSS once the second holds its copy), once each
has read every weight, as serving does. Memory-mapped
weights stay file-backed pages both processes share, so each is charged half; weights read
into the heap cost their full size in every process.

    .venv/bin/python benchmarks/torch_copy_memory.py [--megabytes 200]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

MIB = 2**20
# each way of loading as the child process runs it: its imports (not counted), then the load
# (`path` is the weights file, or the folder for transformers)
LOADERS = {
    "safetensors load_file (mmap)": ("from safetensors.torch import load_file", "load_file(path)"),
    "safetensors from bytes (read)": (
        "from safetensors.torch import load",
        "load(open(path, 'rb').read())",
    ),
    "torch.load mmap=True": ("", "torch.load(path, mmap=True, weights_only=True)"),
    "torch.load (read)": ("", "torch.load(path, weights_only=True)"),
    "transformers from_pretrained": (
        "from transformers import AutoModel, BertModel",
        "AutoModel.from_pretrained(path, local_files_only=True)",
    ),
}
CHILD = """
import gc, sys, psutil, torch
{setup}
path = sys.argv[1]
before = psutil.Process().memory_full_info().pss
held = {load}
tensors = held.parameters() if hasattr(held, "parameters") else held.values()
sum(float(tensor.sum()) for tensor in tensors)  # every page read, as serving reads them
gc.collect()
print(psutil.Process().memory_full_info().pss - before, flush=True)
sys.stdin.readline()
print(psutil.Process().memory_full_info().pss, flush=True)
"""


def write_weights(folder: Path, megabytes: int) -> dict[str, Path]:
    """One BERT of about `megabytes` of float32 weights: its folder, its safetensors, a .pt."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModel, BertConfig

    layers = max(1, round(megabytes / 28))  # a 768-wide BERT layer is 7.1M floats
    config = BertConfig(num_hidden_layers=layers, vocab_size=8000)
    AutoModel.from_config(config).save_pretrained(folder)
    weights = folder / "model.safetensors"
    torch.save(load_file(weights), folder / "model.pt")
    return {"folder": folder, "safetensors": weights, "pt": folder / "model.pt"}


def target(name: str, paths: dict[str, Path]) -> Path:
    if name.startswith("transformers"):
        return paths["folder"]
    return paths["pt"] if name.startswith("torch") else paths["safetensors"]


def two_copies(setup: str, load: str, path: Path) -> dict[str, float]:
    """PSS growth of the first and of the second process to load, with both holding."""
    code = CHILD.format(setup=setup, load=load)
    first = subprocess.Popen(
        [sys.executable, "-c", code, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert first.stdout is not None and first.stdin is not None
    first_growth = int(first.stdout.readline())
    first_pss_alone = psutil.Process(first.pid).memory_full_info().pss
    second = subprocess.Popen(
        [sys.executable, "-c", code, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert second.stdout is not None and second.stdin is not None
    second_growth = int(second.stdout.readline())
    time.sleep(0.2)
    first_pss_shared = psutil.Process(first.pid).memory_full_info().pss
    for process in (first, second):
        assert process.stdin is not None
        process.stdin.write(b"\n")
        process.stdin.close()
        process.wait(timeout=60)
    first_change = first_pss_shared - first_pss_alone
    return {
        "first_copy_mib": round(first_growth / MIB, 1),
        "second_copy_mib": round(second_growth / MIB, 1),
        "first_after_second_mib": round(first_change / MIB, 1),
        # what the machine's total PSS grew by for the second copy
        "second_copy_total_mib": round((second_growth + first_change) / MIB, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_weights(Path(tmp) / "model", args.megabytes)
        size = paths["safetensors"].stat().st_size / MIB
        results = {"weights_mib": round(size, 1)}
        for name, (setup, load) in LOADERS.items():
            results[name] = two_copies(setup, load, target(name, paths))  # type: ignore[assignment]
            print(name, results[name], file=sys.stderr)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
