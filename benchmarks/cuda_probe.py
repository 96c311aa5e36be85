"""Where a worker's CUDA memory goes: NVML's count for this process against torch's allocator.

python benchmarks/cuda_probe.py /tmp/gpu-check/store/clf-00   # a gpu_check.py model folder
"""

from __future__ import annotations

import os
import sys

MiB = 2**20
TEXT = "the cat sat on the mat"


def main(folder: str) -> None:
    import pynvml
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    cuda = torch.cuda

    def show(step: str) -> None:
        processes = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
        nvml = sum(p.usedGpuMemory or 0 for p in processes if p.pid == os.getpid())
        figures = (nvml, cuda.memory_allocated(), cuda.memory_reserved())
        print(
            f"{step:26} nvml / allocated / reserved MiB: "
            + " / ".join(f"{figure / MiB:.1f}" for figure in figures)
        )

    torch.zeros(1, device="cuda:0")
    show("first tensor")
    ones = torch.ones(8, 8, device="cuda:0")
    ones @ ones
    cuda.synchronize()
    show("8x8 matmul (cuBLAS)")
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(folder, local_files_only=True)
    model = model.eval().to("cuda:0")
    show("model moved in")
    for texts in (1, 8):
        with torch.inference_mode():
            model(**tokenizer([TEXT] * texts, return_tensors="pt").to("cuda:0"))
        cuda.synchronize()
        show(f"a call of {texts}")
    model = model.to("cpu")
    cuda.empty_cache()
    show("moved out, cache emptied")


if __name__ == "__main__":
    main(sys.argv[1])
