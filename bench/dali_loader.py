#!/usr/bin/python3
"""NVIDIA DALI's ImageNet training input pipeline on the CPU only, timed: fn.readers.file (shuffled) ->
fn.decoders.image_random_crop (device "cpu": the decode with RandomResizedCrop's random area/aspect crop fused in, only
the crop's region decoded) -> fn.resize to 224x224 -> fn.crop_mirror_normalize (random horizontal mirror, ImageNet
mean/std, fp32, CHW), batch 32, num_threads N, device_id=None (no GPU at all). Prints one JSON line, the same keys as
bench/torchvision_loader.py.

The images are those of `dlperf data bench --images N` (N samples spread evenly over the dataset, index
floor(i * n / N), in ImageFolder's order), given to the reader as a file list. It runs ceil(N / 32) batches; the
timing starts after the pipeline is built (its threads started, nothing read yet), as `dlperf data bench`'s starts
after its loader is created; the build's seconds are printed apart. Needs the
nvidia-dali-cuda130 package (bench/peers-venv.sh). Run by bench/data_vs_torchvision.sh --peer dali.
"""
import argparse
import json
import os
import sys
import time


def image_files(root):
    """(path, label) in ImageFolder's order: class folders sorted, files sorted within each."""
    exts = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
    classes = sorted(d.name for d in os.scandir(root) if d.is_dir())
    out = []
    for label, c in enumerate(classes):
        for dirpath, _, names in sorted(os.walk(os.path.join(root, c), followlinks=True)):
            out += [(os.path.join(dirpath, n), label) for n in sorted(names) if n.lower().endswith(exts)]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", required=True, help="ImageFolder directory (e.g. <root>/train)")
    ap.add_argument("--workers", type=int, default=1, help="DALI num_threads")
    ap.add_argument("--images", type=int, default=0, help="images per measurement (0: all)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()

    from nvidia.dali import fn, pipeline_def, types
    import nvidia.dali as dali

    files = image_files(a.data)
    n = len(files)
    if a.images and a.images < n:
        files = [files[int(i * n / a.images)] for i in range(a.images)]
    iters = (len(files) + a.batch - 1) // a.batch

    @pipeline_def(batch_size=a.batch, num_threads=a.workers, device_id=None, seed=a.seed + 1)
    def pipe():
        jpegs, labels = fn.readers.file(files=[f for f, _ in files], labels=[l for _, l in files],
                                        random_shuffle=True, name="reader")
        images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                               random_area=[0.08, 1.0], random_aspect_ratio=[3 / 4, 4 / 3])
        images = fn.resize(images, resize_x=224, resize_y=224)
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW",
                                          mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                                          std=[0.229 * 255, 0.224 * 255, 0.225 * 255],
                                          mirror=fn.random.coin_flip(probability=0.5))
        return images, labels

    tb = time.perf_counter()
    p = pipe()
    p.build()
    build_secs = time.perf_counter() - tb
    t0 = time.perf_counter()
    c0 = time.process_time()
    images = 0
    shape = None
    for _ in range(iters):
        x, _ = p.run()
        images += len(x)
        shape = shape or list(x[0].shape())
    secs = time.perf_counter() - t0
    cpu = time.process_time() - c0  # DALI's threads are this process's
    print(json.dumps({"peer": "dali", "dali": dali.__version__, "workers": a.workers, "images": images,
                      "seconds": secs, "img_per_s": images / secs, "main_cpu_seconds": cpu, "workers_cpu_seconds": 0.0,
                      "cpu_ms_per_image": 1e3 * cpu / images, "sample_shape": shape,
                      "build_seconds": build_secs}))


if __name__ == "__main__":
    sys.exit(main())
