#!/usr/bin/python3
"""PyTorch's side of bench/train_vs_pytorch.sh: torchvision ResNet training steps on random tensors.

Its best case: no input pipeline at all (one random batch, reused), channels_last, SGD with momentum, fp32 or bf16
autocast on the CPU, torch.set_num_threads(N) (Debian's torch defaults to 1 thread here). Prints one JSON line:
img/s, ms per step, the torch version, its BLAS, the thread count.
"""
import argparse
import json
import os
import time

import torch
import torchvision


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=8)
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = getattr(torchvision.models, a.model)(num_classes=a.classes)
    model = model.to(memory_format=torch.channels_last).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(a.batch, 3, a.size, a.size).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, a.classes, (a.batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        if a.precision == "bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = loss_fn(model(x), y)
        else:
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(a.warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    dt = time.perf_counter() - t0
    cfg = torch.__config__.show()
    blas = next((l.split("=", 1)[1] for l in cfg.replace(",", "\n").split() if l.startswith("BLAS_INFO=")), "?")
    if blas == "generic":  # Debian: whatever libblas.so.3 points to (OpenBLAS with python3-torch's dependencies)
        lib = os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3")
        blas = "generic -> " + lib if os.path.exists(lib) else blas
    mkldnn = "oneDNN" if torch.backends.mkldnn.is_available() else "no oneDNN"
    print(json.dumps({
        "img_per_s": a.batch * a.steps / dt,
        "ms_per_step": 1e3 * dt / a.steps,
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "blas": blas,
        "convolutions": mkldnn,
        "threads": torch.get_num_threads(),
        "precision": a.precision,
        "steps": a.steps,
        "warmup": a.warmup,
    }))


if __name__ == "__main__":
    main()
