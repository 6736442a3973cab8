#!/usr/bin/python3
"""torchvision's ImageNet training input pipeline, timed: ImageFolder + DataLoader with RandomResizedCrop(224) +
RandomHorizontalFlip + ToTensor + Normalize, batch 32, shuffled, num_workers worker processes. Prints one JSON line.

The images used are the same as `dlperf data bench --images N`: N samples spread evenly over the dataset
(index floor(i * n / N)), so both pipelines read the same files. Run by bench/data_vs_torchvision.sh.
"""
import argparse
import json
import resource
import sys
import time

import torch
from torch.utils.data import DataLoader, Subset
from torchvision import datasets, transforms


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", required=True, help="ImageFolder directory (e.g. <root>/train)")
    ap.add_argument("--workers", type=int, default=1, help="DataLoader num_workers (worker processes)")
    ap.add_argument("--images", type=int, default=0, help="images per measurement (0: all)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    torch.set_num_threads(1)  # the main process only collects batches; workers get 1 thread each anyway
    torch.manual_seed(a.seed)
    tf = transforms.Compose([
        transforms.RandomResizedCrop(224),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])
    ds = datasets.ImageFolder(a.data, tf)
    n = len(ds)
    if a.images and a.images < n:
        ds = Subset(ds, [int(i * n / a.images) for i in range(a.images)])
    dl = DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers, drop_last=False)
    t0 = time.perf_counter()
    c0 = time.process_time()
    images = 0
    it = iter(dl)
    for x, y in it:
        images += x.shape[0]
    secs = time.perf_counter() - t0
    main_cpu = time.process_time() - c0
    del it  # joins the worker processes, so their CPU time is in RUSAGE_CHILDREN
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    workers_cpu = ch.ru_utime + ch.ru_stime
    print(json.dumps({"workers": a.workers, "images": images, "seconds": secs, "img_per_s": images / secs,
                      "main_cpu_seconds": main_cpu, "workers_cpu_seconds": workers_cpu,
                      "cpu_ms_per_image": 1e3 * (main_cpu + workers_cpu) / images}))


if __name__ == "__main__":
    sys.exit(main())
