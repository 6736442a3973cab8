#!/usr/bin/python3
"""dlperf's decode + crop + resize + flip + normalize against torchvision 0.14 (Pillow) on the same crop boxes.

Through `dlperf data crop` (one JPEG -> raw tensor):
  * full-size decode (--no-dct-scale), uint8: identical to Pillow's crop().resize(BILINEAR) (bound: max abs diff 1;
    measured 0), for 4:2:0 / 4:2:2 / 4:4:4 / progressive / grayscale files, flips, upscaled and non-square crops;
  * fp32 NCHW: torchvision's resized_crop + hflip + ToTensor + Normalize within 1e-5;
  * the validation transform: Resize(256) + CenterCrop(224) + ToTensor + Normalize within 1e-5;
  * the default DCT-scaled decode: mean abs diff <= 2 (8-bit levels) and PSNR >= 33 dB against torchvision.
Exit 77 (skip) when torchvision is missing.
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torchvision.transforms as T
    import torchvision.transforms.functional as F
    from PIL import Image
except ImportError as e:  # pragma: no cover
    print(f"skip: {e}")
    sys.exit(77)

DLPERF = os.environ.get("DLPERF", "build/dlperf")
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def crop(tmp, path, args, shape, dtype):
    out = os.path.join(tmp, f"t{crop.n}.bin")
    crop.n += 1
    info = json.loads(subprocess.check_output([DLPERF, "data", "crop", "--in", path, "--out", out] + args))
    return np.fromfile(out, dtype=dtype).reshape(shape), info


crop.n = 0


def fixtures(tmp):
    """JPEG kinds written by Pillow, plus a few synthetic-ImageNet files written by dlperf."""
    rng = np.random.default_rng(0)
    base = np.zeros((301, 437, 3), np.float64)
    yy, xx = np.mgrid[0:301, 0:437]
    base[..., 0] = 128 + 90 * np.sin(xx * 0.05 + yy * 0.013)
    base[..., 1] = 40 + 180 * yy / 301
    base[..., 2] = np.where((xx // 21 + yy // 17) % 2, 200, 60)
    img = Image.fromarray(np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8))
    files = []
    for name, kw in [("s420", dict(subsampling=2)), ("s422", dict(subsampling=1)), ("s444", dict(subsampling=0)),
                     ("prog", dict(subsampling=2, progressive=True))]:
        p = os.path.join(tmp, name + ".JPEG")
        img.save(p, quality=93, **kw)
        files.append(p)
    p = os.path.join(tmp, "gray.JPEG")
    img.convert("L").save(p, quality=92)
    files.append(p)
    subprocess.check_call([DLPERF, "data", "gen", "--out", os.path.join(tmp, "syn"), "--classes", "3", "--per-class", "2",
                           "--val-per-class", "0", "--seed", "5"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for root, _, names in sorted(os.walk(os.path.join(tmp, "syn", "train"))):
        files += [os.path.join(root, n) for n in sorted(names)]
    return files


def main():
    tmp = tempfile.mkdtemp(dir=os.environ.get("DLPERF_TEST_TMP"))
    files = fixtures(tmp)
    rng = np.random.default_rng(1)
    worst_u8 = worst_f32 = worst_val = 0.0
    dct_abs = dct_sq = dct_n = 0.0
    checks = 0
    for k, path in enumerate(files):
        im = Image.open(path)
        rgb = im.convert("RGB")
        W, H = rgb.size
        boxes = []
        for t in range(4):
            w = int(rng.integers(8, W + 1)); h = int(rng.integers(8, H + 1))
            boxes.append((int(rng.integers(0, W - w + 1)), int(rng.integers(0, H - h + 1)), w, h, (k + t) % 2, 224, 224))
        boxes.append((3, 5, 40, 30, 1, 224, 224))     # upscaling
        boxes.append((0, 0, W, H, 0, 160, 128))        # whole image, non-square output (w=160, h=128)
        for x, y, w, h, flip, ow, oh in boxes:
            ref_img = rgb.crop((x, y, x + w, y + h)).resize((ow, oh), Image.BILINEAR)
            if flip:
                ref_img = ref_img.transpose(Image.FLIP_LEFT_RIGHT)
            ref = np.asarray(ref_img).astype(np.int32)
            args = ["--box", f"{x},{y},{w},{h}", "--crop", f"{ow}x{oh}"] + (["--flip"] if flip else [])
            got, _ = crop(tmp, path, args + ["--no-dct-scale", "--dtype", "uint8", "--layout", "NHWC"], (oh, ow, 3), np.uint8)
            d = np.abs(got.astype(np.int32) - ref).max()
            worst_u8 = max(worst_u8, d)
            if d > 1:
                raise AssertionError(f"{path} box {x},{y},{w},{h} flip {flip}: uint8 max abs diff {d} vs Pillow (bound 1)")
            # fp32 NCHW vs torchvision's functional pipeline
            t = F.resized_crop(rgb, y, x, h, w, [oh, ow])
            if flip:
                t = F.hflip(t)
            t = F.normalize(F.to_tensor(t), MEAN, STD).numpy()
            gotf, _ = crop(tmp, path, args + ["--no-dct-scale"], (3, oh, ow), np.float32)
            e = float(np.abs(gotf - t).max())
            worst_f32 = max(worst_f32, e)
            if e > 1e-5:
                raise AssertionError(f"{path} box {x},{y},{w},{h}: fp32 max abs diff {e} vs torchvision (bound 1e-5)")
            # the default (DCT-scaled) decode
            got2, info = crop(tmp, path, args + ["--dtype", "uint8", "--layout", "NHWC"], (oh, ow, 3), np.uint8)
            diff = got2.astype(np.float64) - ref
            dct_abs += np.abs(diff).sum(); dct_sq += (diff ** 2).sum(); dct_n += diff.size
            checks += 1
        # validation transform
        tv = T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(), T.Normalize(MEAN, STD)])(rgb).numpy()
        gotv, _ = crop(tmp, path, ["--val", "--no-dct-scale"], (3, 224, 224), np.float32)
        e = float(np.abs(gotv - tv).max())
        worst_val = max(worst_val, e)
        if e > 1e-5:
            raise AssertionError(f"{path}: val transform max abs diff {e} vs torchvision (bound 1e-5)")
    mae = dct_abs / dct_n
    psnr = 10 * np.log10(255 ** 2 / (dct_sq / dct_n))
    print(f"{checks} crops on {len(files)} files: uint8 max abs diff {worst_u8} (bound 1), fp32 {worst_f32:.2e} "
          f"(bound 1e-5), val {worst_val:.2e} (bound 1e-5); DCT-scaled decode vs torchvision: mean abs diff {mae:.3f}, "
          f"PSNR {psnr:.1f} dB (bounds 2, 33 dB)")
    assert mae <= 2.0 and psnr >= 33, (mae, psnr)
    subprocess.call(["rm", "-rf", tmp])
    return 0


if __name__ == "__main__":
    sys.exit(main())
