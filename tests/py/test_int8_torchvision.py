#!/usr/bin/python3
# tags: slow
# timeout: 600
"""int8 on the cpu backend (`dlperf infer --top5 --precision int8` and `dlperf serve --precision int8` over HTTP)
against torchvision's fp32 (float64) answers: the model, images and preprocessing of tests/py/test_infer_torchvision.py
(a resnet18 made meaningful by a linear probe; 30 validation JPEGs of a synthetic ImageNet), calibrated by dlperf on
the 40 training images (percentile method, the file beside the weights, reused by the service).

Criteria (per image), int8's rule being bf16's with a wider margin: with z the torch logits and
delta = 0.1 * max_k |z_k|, the top-1 is identical wherever torch's top-1 margin exceeds delta, and the top-5 SETS are identical
except for classes whose torch logit lies within delta of the rank-5/6 boundary ("int8 changes the order" there and
only there); probabilities of the top-5 within 0.1. Printed: top-1 agreement, identical top-5 lists, near-tie swaps.
The margin: this model's class information is a linear probe on the features of a randomly initialized network,
which amplifies feature rounding: int8's largest logit error is 7.2e-2 of the image's largest |logit| here (bf16's
1.2e-2), so delta is 1.4x that. (A ResNet trained by dlperf keeps 100% top-1 agreement with fp32: docs/int8.md.)
Measured (Zen 4, 2 cores): top-1 agreement 30/30, identical top-5 lists 20/30, 2 images with a swap at the rank-5/6
boundary, max |dp| 7.9e-2; the same through the HTTP service.
Exit 77 when torch/torchvision are missing or this build has no cpu backend.
"""
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_infer_torchvision as tv  # noqa: E402  (exits 77 without torch)

np, torch = tv.np, tv.torch


def top5_int8(weights, files, data, extra=()):
    out = os.path.join(tv.TMP, "top5-int8.json")
    r = subprocess.run([tv.DLPERF, "infer", "--top5", "--weights", weights, "--device", "cpu", "--precision", "int8",
                        "--data", data, "--calib-images", "40", "--threads", tv.THREADS, "--json", out, *extra, *files],
                       capture_output=True, text=True, env=tv.ENV)
    if r.returncode != 0:
        print(r.stdout[-2000:], r.stderr[-2000:])
        raise SystemExit(f"dlperf infer --top5 --precision int8 failed with {r.returncode}")
    print("       " + "\n       ".join(line for line in r.stderr.splitlines() if line.startswith("int8:")))
    import json
    with open(out) as f:
        by_path = {e["path"]: e for e in json.load(f)["top5"]}
    logits = np.array([by_path[p]["logits"] for p in files])
    return [([t["class"] for t in by_path[p]["top5"]], [t["prob"] for t in by_path[p]["top5"]]) for p in files], logits


def compare_int8(name, got, z, files, zq=None):
    if zq is not None:
        err = max(np.abs(zq[i] - z[i]).max() / np.abs(z[i]).max() for i in range(len(z)))
        print(f"       ({name}: largest logit error {err:.2e} of the image's largest |logit|)")
    worst, near, same_list, same_top1, decided = 0.0, 0, 0, 0, 0
    for i, (cls, prob) in enumerate(got):
        zi = z[i]
        order = np.argsort(-zi, kind="stable")
        delta = 0.1 * np.abs(zi).max()
        s5, s6 = zi[order[4]], zi[order[5]]
        same_top1 += cls[0] == order[0]
        same_list += cls == order[:5].tolist()
        if zi[order[0]] - zi[order[1]] > delta:
            decided += 1
            if cls[0] != order[0]:
                tv.fail(f"{name}: {os.path.basename(files[i])}: top-1 {cls[0]} != torchvision's {order[0]} "
                        f"(margin {zi[order[0]] - zi[order[1]]:.3f} > delta {delta:.3f})")
        diff = set(cls) ^ set(order[:5].tolist())
        for c in diff:
            if not (s6 - delta <= zi[c] <= s5 + delta):
                tv.fail(f"{name}: {os.path.basename(files[i])}: class {c} (torch logit {zi[c]:.3f}) is in one top-5 "
                        f"only and not within delta {delta:.3f} of the rank-5/6 boundary [{s6:.3f}, {s5:.3f}]")
        near += bool(diff)
        p_ref = torch.softmax(torch.tensor(zi), 0).numpy()
        worst = max(worst, max(abs(p - p_ref[c]) for c, p in zip(cls, prob)))
    if decided < len(got) * 0.8:
        tv.fail(f"{name}: only {decided} of {len(got)} images have a torch top-1 margin above int8's delta")
    ok = worst <= 0.1
    print(f"  {'ok  ' if ok else 'FAIL'} {name:<26} top-1 agreement {same_top1}/{len(got)}, top-5 lists identical "
          f"{same_list}/{len(got)}, top-5 sets up to near-ties ({near} image(s) with a swap at the rank-5/6 boundary); "
          f"max |dp| {worst:.2e} (tolerance 1e-01)")
    if not ok:
        tv.FAILS.append(f"{name}: probabilities differ by {worst:.2e}")


def check_http_int8(weights, files, data, z):
    port_file = os.path.join(tv.TMP, "port-int8")
    err = open(os.path.join(tv.TMP, "serve-int8.err"), "w")
    p = subprocess.Popen([tv.DLPERF, "serve", "--weights", weights, "--device", "cpu", "--precision", "int8",
                          "--calib-data", data, "--calib-images", "40", "--threads", tv.THREADS, "--port", "0",
                          "--port-file", port_file, "--max-batch", "4", "--workers", "1", "--monitor-interval", "0"],
                         stdout=subprocess.DEVNULL, stderr=err, env=tv.ENV)
    try:
        for _ in range(600):
            if os.path.exists(port_file) or p.poll() is not None:
                break
            time.sleep(0.1)
        if p.poll() is not None:
            raise SystemExit(f"dlperf serve exited with {p.returncode}: {open(err.name).read()[-1500:]}")
        port = int(open(port_file).read().strip())
        answers = tv.post_all(f"http://127.0.0.1:{port}/v1/classify", files)
        got = [([t["class"] for t in a["top5"]], [t["prob"] for t in a["top5"]]) for a in answers]
        compare_int8("HTTP POST (cpu int8)", got, z, files)
    finally:
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=120)
        err.close()
        if rc != 0:
            tv.fail(f"dlperf serve --precision int8 exited {rc} after SIGTERM")
    reused = "activation ranges from" in open(err.name).read()
    print(f"       (the service {'reused' if reused else 'did NOT reuse'} the calibration beside the weights)")
    if not reused:
        tv.fail("dlperf serve calibrated again instead of reusing the file beside the weights")


def main():
    r = subprocess.run([tv.DLPERF, "nn", "bench", "--device", "cpu", "--model", "resnet-mini", "--size", "32", "--batch",
                        "1", "--steps", "1", "--warmup", "0", "--infer"], capture_output=True, text=True, env=tv.ENV)
    if r.returncode != 0:
        print("skip: no cpu backend in this build")
        return 77
    data = os.path.join(tv.TMP, "syn")
    subprocess.check_call([tv.DLPERF, "data", "gen", "--out", data, "--classes", "10", "--per-class", "4",
                           "--val-per-class", "3", "--seed", "7"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    classes = sorted(os.listdir(os.path.join(data, "train")))
    train_files, train_labels = [], []
    for c, wnid in enumerate(classes):
        fs = tv.jpegs(os.path.join(data, "train", wnid))
        train_files += fs
        train_labels += [c] * len(fs)
    order = sorted(range(len(train_files)), key=lambda i: (i % 4, train_labels[i]))
    train_files = [train_files[i] for i in order]
    train_labels = [train_labels[i] for i in order]
    val_files = tv.jpegs(os.path.join(data, "val"))
    model = tv.make_model(train_files, train_labels)
    weights = os.path.join(tv.TMP, "resnet18-probe.safetensors")
    tv.save_file({k: v.float() if v.is_floating_point() else v for k, v in model.state_dict().items()}, weights)
    with torch.no_grad():
        z = model.double()(tv.load(val_files).double()).numpy()
    got, zq = top5_int8(weights, val_files, data)
    compare_int8("cpu int8 (infer --top5)", got, z, val_files, zq)
    check_http_int8(weights, val_files, data, z)
    if tv.FAILS:
        print(f"FAIL: {len(tv.FAILS)} check(s): {tv.FAILS[:5]}")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    try:
        rc = main()
    finally:
        shutil.rmtree(tv.TMP, ignore_errors=True)
    sys.exit(rc)
