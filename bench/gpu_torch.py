#!/usr/bin/env python3
"""bench/gpu_torch.py — PyTorch's side of the GPU comparison in bench/gpu.sh: torchvision ResNet-50 on the same
GPU as dlperf, the way people run it well in eager mode: AMP (fp16 autocast + GradScaler), channels_last,
cudnn.benchmark, SGD with momentum, a fixed device-resident batch (no input pipeline, as dlperf's `gpu bench`).
Training at one batch size, inference (eval, inference_mode, fp16 autocast) at others; each timed with CUDA
events over the timed steps after warm-up. Writes JSON with img/s per configuration.

  python3 bench/gpu_torch.py --train-batch 256 --infer-batches 1,256 --json torch.json
"""
import argparse
import json
import statistics
import sys
import time


def timed(fn, warmup, steps, torch):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
    ev[0].record()
    for i in range(steps):
        fn()
        ev[i + 1].record()
    torch.cuda.synchronize()
    ms = [ev[i].elapsed_time(ev[i + 1]) for i in range(steps)]
    return statistics.median(ms), ms


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train-batch", type=int, default=256)
    ap.add_argument("--infer-batches", default="1,256")
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()

    import torch
    import torchvision

    if not torch.cuda.is_available():
        print("gpu_torch: torch sees no CUDA device", file=sys.stderr)
        return 1
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    res = {
        "schema": "dlperf.torch_gpu_bench/1",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "argv": sys.argv,
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "cudnn": torch.backends.cudnn.version(),
        "cuda": torch.version.cuda,
        "device": torch.cuda.get_device_name(0),
        "runs": [],
    }
    hw = a.image

    def add(mode, batch, med, ms, extra=None):
        r = {"mode": mode, "batch": batch, "precision": "fp16-amp", "step_ms": med,
             "step_ms_p10": sorted(ms)[len(ms) // 10], "step_ms_p90": sorted(ms)[(9 * len(ms)) // 10],
             "images_per_s": batch / (med * 1e-3)}
        if extra:
            r.update(extra)
        res["runs"].append(r)
        print(f"torch {mode} batch {batch}: {r['images_per_s']:.0f} img/s, {med:.3f} ms/step", flush=True)

    # training
    if a.train_batch > 0:
        t0 = time.time()
        model = torchvision.models.resnet50().to(dev).to(memory_format=torch.channels_last)
        model.train()
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-5)
        scaler = torch.amp.GradScaler("cuda") if hasattr(torch.amp, "GradScaler") else torch.cuda.amp.GradScaler()
        crit = torch.nn.CrossEntropyLoss()
        x = torch.randn(a.train_batch, 3, hw, hw, device=dev).to(memory_format=torch.channels_last)
        y = torch.randint(0, 1000, (a.train_batch,), device=dev)

        def step():
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.float16):
                loss = crit(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()

        med, ms = timed(step, a.warmup, a.steps, torch)
        add("train", a.train_batch, med, ms, {"setup_s": time.time() - t0,
                                              "max_memory_bytes": torch.cuda.max_memory_allocated()})
        del model, opt, x, y
        torch.cuda.empty_cache()

    # inference
    model = torchvision.models.resnet50().to(dev).to(memory_format=torch.channels_last).eval()
    for b in [int(v) for v in a.infer_batches.split(",") if v]:
        x = torch.randn(b, 3, hw, hw, device=dev).to(memory_format=torch.channels_last)

        def fwd():
            with torch.inference_mode(), torch.autocast("cuda", dtype=torch.float16):
                model(x)

        med, ms = timed(fwd, a.warmup, a.steps if b > 1 else 4 * a.steps, torch)
        add("infer", b, med, ms)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
