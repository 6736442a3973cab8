#!/usr/bin/python3
"""The OpenVINO side of bench/int8_vs_openvino.sh (int8 through NNCF post-training quantization, fp32, bf16), the
top-1 agreements, the report, and the table of oneDNN kernels per ISA cap.

    int8_vs_openvino.py fit-head --weights W.safetensors --images DIR --threads T --out W2.safetensors [--model M]
    int8_vs_openvino.py prepare --weights W.safetensors --calib DIR --calib-images N --eval DIR --threads T --dir OUT
                                [--model resnet50]
    int8_vs_openvino.py openvino --ir OUT/ov-fp32.xml|OUT/ov-int8.xml --hint f32|bf16 --images DIR --threads T
                                 --out FILE [--batch 32] [--warmup 2] [--iters 4] [--min-duration 3]
    int8_vs_openvino.py report --dir OUT --precisions "fp32 bf16 int8" --repeat R [--json FILE]
    int8_vs_openvino.py kernels --dir LOGS [--json FILE]

prepare: loads the safetensors weights dlperf runs (tools/torchvision_to_safetensors.py's names: a converted
torchvision state_dict or a dlperf checkpoint) into torchvision's model, strictly (num_batches_tracked may be
absent), converts it with ov.convert_model (input 1x3xHxW fp32 NCHW) and saves it (OUT/ov-fp32.xml), then quantizes
it with nncf.quantize on the --calib JPEGs (the first --calib-images of them, sorted; subset_size = that count,
NNCF's defaults otherwise: the PERFORMANCE preset, symmetric int8 weights per output channel, activations per
tensor, fast bias correction) and saves that (OUT/ov-int8.xml). Every image goes through dlperf's serving
preprocessing, Resize(256) + CenterCrop(224) + ToTensor + Normalize (dlperf's transform is Pillow's bit for bit:
docs/inference.md). Then the top-1 class of every --eval JPEG in OpenVINO fp32 (hint f32), bf16 (hint bf16, where
the CPU has bf16 instructions) and int8 (hint f32: what NNCF did not quantize stays fp32) goes to OUT/ov-top1.json,
and what was done (versions, NNCF's settings, times) to OUT/ov-prepare.json.
openvino: one compiled model per batch size (static shapes: the IR reshaped to 1 and to --batch),
INFERENCE_NUM_THREADS=T, PERFORMANCE_HINT=LATENCY, NUM_STREAMS=1 and the precision hint; synchronous infer() calls
on the same preprocessed tensor, timed like bench/infer_vs_pytorch.py (its functions: warm-up, then at least --iters
calls AND --min-duration seconds; batch 1: each call's latency; --batch: images/s).
report: reads <side>-<prec>-<round>.json (dlperf infer --json, and this script's openvino output), the top-1 files
(ov-top1.json, dlperf-top1-<prec>.txt: dlperf infer --top5's output), and prints per precision the median of the
rounds of each side and the median of the per-round ratios dlperf / OpenVINO (the two ran back to back in each
round, so a round's ratio is a pair measured under the same load), each engine's int8 speed-up over its own fp32
and bf16, the top-1 agreements, and the issue-32 targets.
kernels: reads the ONEDNN_VERBOSE=1 logs of `int8_vs_openvino.sh --kernels` (cap-<cap>-<prec>-b<batch>.log) and
tabulates, per ISA cap, precision and batch size, the convolution implementations of the last forward call (the
lines between the last two inner_product executions: the run makes one warm-up and one timed call) with their
counts and data types, and the ISA oneDNN reported.
"""
import argparse
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from infer_vs_pytorch import dlperf_point, lat_summary, median, record, timed  # noqa: E402,F401

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def jpegs(d):
    files = []
    for root, _, names in sorted(os.walk(d)):
        files += [os.path.join(root, n) for n in sorted(names) if n.lower().endswith((".jpg", ".jpeg"))]
    if not files:
        raise SystemExit(f"no JPEGs under {d}")
    return sorted(files)


def preprocess(files, size=224):
    """dlperf's serving transform (docs/inference.md, Preprocessing): N x 3 x size x size fp32 NCHW."""
    import numpy as np
    import torchvision.transforms as T
    from PIL import Image
    tf = T.Compose([T.Resize(round(size * 256 / 224)), T.CenterCrop(size), T.ToTensor(), T.Normalize(MEAN, STD)])
    return np.stack([tf(Image.open(f).convert("RGB")).numpy() for f in files]).astype(np.float32)


def load_model(path, arch):
    """torchvision's `arch` with the safetensors weights dlperf loads: strictly, except num_batches_tracked (dlperf
    checkpoints may leave it out) and DataParallel's 'module.' prefix (dlperf accepts it)."""
    import torch
    import torchvision
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
    from torchvision_to_safetensors import load_file
    sd, meta = load_file(path, with_metadata=True)
    sd = {k[len("module."):] if k.startswith("module.") else k: v for k, v in sd.items()}
    arch = arch or meta.get("dlperf.arch") or "resnet50"
    if "fc.weight" not in sd:
        raise SystemExit(f"{path}: no fc.weight: not ResNet weights in torchvision's names")
    m = getattr(torchvision.models, arch)(num_classes=sd["fc.weight"].shape[0])
    missing, unexpected = m.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in sd.items()},
                                            strict=False)
    missing = [k for k in missing if not k.endswith("num_batches_tracked")]
    if missing or unexpected:
        raise SystemExit(f"{path} does not fit torchvision's {arch}: missing {missing[:5]}, unexpected {unexpected[:5]}")
    return m.eval(), arch


def cmd_fit_head(a):
    """A stand-in for a trained model when none is given: torchvision's random backbone (from the --weights file) with
    its fc replaced by a ridge regression of the one-hot class (the directory's sorted class folders) on the pooled
    features of the --images JPEGs, fp32, solved in float64. A random network alone sends most images to one class,
    so its top-1 agreements say little; this one separates the classes on its own features, with margins that int8
    can flip. The result has as many classes as folders (fc.weight rows) and goes to --out for both engines."""
    import numpy as np
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
    from torchvision_to_safetensors import save_file
    torch.set_num_threads(a.threads)
    m, arch = load_model(a.weights, a.model)
    files = jpegs(a.images)
    classes = sorted({os.path.relpath(os.path.dirname(f), a.images) for f in files})
    y = np.array([classes.index(os.path.relpath(os.path.dirname(f), a.images)) for f in files])
    x = torch.from_numpy(preprocess(files))
    m.fc = torch.nn.Identity()
    with torch.inference_mode():
        feats = torch.cat([m(x[i:i + 8]) for i in range(0, len(x), 8)]).double().numpy()
    mu = feats.mean(0)
    f = feats - mu
    k = f @ f.T
    lam = 1e-3 * np.trace(k) / len(k)
    onehot = np.eye(len(classes))[y] - 1.0 / len(classes)
    w = f.T @ np.linalg.solve(k + lam * np.eye(len(k)), onehot)  # (features, classes)
    bias = -mu @ w
    fit = (np.argmax(f @ w, 1) == y).mean()
    sd = {k2: v for k2, v in m.state_dict().items()}
    sd["fc.weight"] = torch.from_numpy(w.T.astype(np.float32).copy())
    sd["fc.bias"] = torch.from_numpy(bias.astype(np.float32))
    save_file(sd, a.out)
    print(f"fit-head: {arch} with a ridge-regression fc over {len(classes)} classes on {len(files)} images "
          f"(fits {100 * fit:.0f}% of them) -> {a.out}")


def compile_cfg(threads, hint):
    return {"INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": hint, "PERFORMANCE_HINT": "LATENCY",
            "NUM_STREAMS": 1}


def top1(core, model, x, threads, hint, batch=16):
    import numpy as np
    model.reshape([batch, 3, x.shape[2], x.shape[3]])
    cm = core.compile_model(model, "CPU", compile_cfg(threads, hint))
    r = cm.create_infer_request()
    out = []
    for i in range(0, len(x), batch):
        xb = np.zeros((batch,) + x.shape[1:], np.float32)
        n = min(batch, len(x) - i)
        xb[:n] = x[i:i + n]
        y = r.infer({0: xb})[cm.output(0)]
        out += [int(c) for c in np.argmax(y[:n], axis=1)]
    return out


def cmd_prepare(a):
    import warnings

    import nncf
    import numpy as np
    import openvino as ov
    import torch
    warnings.filterwarnings("ignore", category=FutureWarning)
    torch.set_num_threads(a.threads)
    os.makedirs(a.dir, exist_ok=True)
    info = {"weights": a.weights, "openvino": ov.get_version(), "nncf": nncf.__version__, "torch": torch.__version__,
            "threads": a.threads}
    m, info["model"] = load_model(a.weights, a.model)
    calib_files = jpegs(a.calib)
    if len(calib_files) < a.calib_images:
        raise SystemExit(f"--calib {a.calib} has {len(calib_files)} JPEGs, fewer than --calib-images {a.calib_images}")
    calib_files = calib_files[:a.calib_images]
    eval_files = jpegs(a.eval)
    xc, xe = preprocess(calib_files), preprocess(eval_files)
    with torch.no_grad():
        om = ov.convert_model(m, example_input=torch.from_numpy(xc[:1]))
    ov.save_model(om, os.path.join(a.dir, "ov-fp32.xml"), compress_to_fp16=False)
    t0 = time.perf_counter()
    # NNCF's defaults for a CNN on the CPU, the subset being all the calibration images, one at a time (the IR's
    # input is 1x3xHxW)
    qm = nncf.quantize(om, nncf.Dataset([xc[i:i + 1] for i in range(len(xc))]), subset_size=len(xc))
    info["quantize_s"] = time.perf_counter() - t0
    ov.save_model(qm, os.path.join(a.dir, "ov-int8.xml"), compress_to_fp16=False)
    fq = sum(1 for op in qm.get_ops() if op.get_type_name() == "FakeQuantize")
    info["nncf_settings"] = {"api": "nncf.quantize(ov_model, nncf.Dataset(calibration), subset_size=N)",
                             "subset_size": len(xc), "preset": "default (PERFORMANCE: symmetric)",
                             "fast_bias_correction": True, "fake_quantize_nodes": fq}
    info["calib_images"] = [os.path.relpath(f, a.calib) for f in calib_files]
    core = ov.Core()
    caps = list(core.get_property("CPU", "OPTIMIZATION_CAPABILITIES"))
    info["cpu"], info["cpu_capabilities"] = core.get_property("CPU", "FULL_DEVICE_NAME"), caps
    tops = {"images": [os.path.relpath(f, a.eval) for f in eval_files], "classes": int(m.fc.out_features)}
    for prec, path, hint in (("fp32", "ov-fp32.xml", "f32"), ("bf16", "ov-fp32.xml", "bf16"),
                             ("int8", "ov-int8.xml", "f32")):
        if prec == "bf16" and "BF16" not in caps:
            continue
        tops[prec] = top1(core, core.read_model(os.path.join(a.dir, path)), xe, a.threads, hint)
    with open(os.path.join(a.dir, "ov-top1.json"), "w") as f:
        json.dump(tops, f)
    with open(os.path.join(a.dir, "ov-prepare.json"), "w") as f:
        json.dump(info, f, indent=1)
    tops["distinct_fp32_top1"] = len(set(tops["fp32"]))
    agree = sum(x == y for x, y in zip(tops["fp32"], tops["int8"])) / len(eval_files)
    print(f"OpenVINO {info['openvino']}, NNCF {info['nncf']}: fp32 IR and int8 IR ({fq} FakeQuantize nodes, "
          f"{len(xc)} calibration images, quantized in {info['quantize_s']:.1f} s); int8 top-1 = fp32 top-1 on "
          f"{100 * agree:.1f}% of {len(eval_files)} images ({tops['distinct_fp32_top1']} distinct fp32 top-1 classes)")


def conv_kernels(cm):
    """OpenVINO's convolution kernels as compiled (the runtime model's primitiveType, e.g. brgconv_avx512_I8, and
    runtimePrecision): {"<primitiveType> <precision>": count}."""
    kinds = {}
    for op in cm.get_runtime_model().get_ops():
        rt = op.get_rt_info()
        if "layerType" not in rt or rt["layerType"].astype(str) != "Convolution":
            continue
        k = " ".join(rt[f].astype(str) if f in rt else "?" for f in ("primitiveType", "runtimePrecision"))
        kinds[k] = kinds.get(k, 0) + 1
    return kinds


def cmd_openvino(a):
    import numpy as np
    import openvino as ov
    files = jpegs(a.images)
    x = preprocess([files[i % len(files)] for i in range(max(a.batch, 1))])
    core = ov.Core()
    om = core.read_model(a.ir)
    cfg = compile_cfg(a.threads, a.hint)
    out = {"peer": "openvino", "ir": os.path.basename(a.ir), "hint": a.hint, "openvino": ov.get_version(),
           "version": ov.get_version(), "cpu": core.get_property("CPU", "FULL_DEVICE_NAME"), "config": cfg}

    def compiled(batch):
        om.reshape([batch, 3, x.shape[2], x.shape[3]])
        cm = core.compile_model(om, "CPU", cfg)
        return cm, cm.create_infer_request()
    cm1, r1 = compiled(1)
    out["threads"] = int(cm1.get_property("INFERENCE_NUM_THREADS"))
    eff = cm1.get_property("INFERENCE_PRECISION_HINT")
    out["effective_precision"] = eff.to_string() if hasattr(eff, "to_string") else str(eff)
    out["conv_kernels"] = conv_kernels(cm1)
    x1 = np.ascontiguousarray(x[:1])
    ts1 = timed(lambda: r1.infer({0: x1}, share_inputs=True), a)
    del cm1, r1
    if a.streams <= 1:
        cmb, rb = compiled(a.batch)
        xb = np.ascontiguousarray(x[:a.batch])
        tsb = timed(lambda: rb.infer({0: xb}, share_inputs=True), a)
    else:
        # OpenVINO's throughput mode: N streams of threads/N threads, one request per stream, the batch split over
        # them (what dlperf infer --streams N does); a timed call starts every request and waits for all of them
        per = -(-a.batch // a.streams)
        tcfg = dict(cfg, PERFORMANCE_HINT="THROUGHPUT", NUM_STREAMS=a.streams)
        om.reshape([per, 3, x.shape[2], x.shape[3]])
        cmb = core.compile_model(om, "CPU", tcfg)
        reqs = [cmb.create_infer_request() for _ in range(a.streams)]
        parts = [np.ascontiguousarray(x[:a.batch][i * per:(i + 1) * per]) for i in range(a.streams)]
        parts = [p if len(p) == per else np.resize(p, (per,) + p.shape[1:]) for p in parts]

        def all_streams():
            for r, xp in zip(reqs, parts):
                r.start_async({0: xp}, share_inputs=True)
            for r in reqs:
                r.wait()
        tsb = timed(all_streams, a)
        out["config_batch"] = dict(tcfg, requests=a.streams, batch_per_request=per,
                                   streams_compiled=int(cmb.get_property("NUM_STREAMS")))
    record(out, a, ts1, tsb)


def dlperf_top1(path, root):
    """dlperf infer --top5's output: a line with the image's path, then '  1. <class> ...'."""
    out, cur = {}, None
    with open(path) as f:
        for line in f:
            m = re.match(r"\s+1\.\s+(\d+)\s", line)
            if m and cur is not None:
                out[cur] = int(m.group(1))
                cur = None
            elif line.strip() and not line.startswith(" ") and not line.startswith("("):
                p = line.strip()
                cur = os.path.relpath(p, root) if os.path.isabs(p) and root else p
    return out


def agreement(a_map, b_map):
    keys = [k for k in a_map if k in b_map]
    if not keys:
        return None
    return {"agree": sum(a_map[k] == b_map[k] for k in keys), "images": len(keys),
            "percent": 100.0 * sum(a_map[k] == b_map[k] for k in keys) / len(keys)}


def cmd_report(a):
    precs = a.precisions.split()
    summary, rounds = {}, range(1, a.repeat + 1)
    for prec in precs:
        s = {}
        for side in ("dlperf", "openvino"):
            rs = []
            for r in rounds:
                p = os.path.join(a.dir, f"{side}-{prec}-{r}.json")
                if os.path.exists(p):
                    with open(p) as f:
                        rs.append(json.load(f))
            if len(rs) != a.repeat:
                s[side] = None
                continue
            if side == "dlperf":
                batch = max(q["batch"] for q in rs[0]["results"])
                b1 = [dlperf_point(d, 1)["latency_ms"]["p50"] for d in rs]
                tp = [dlperf_point(d, batch)["images_per_s"] for d in rs]
                extra = {"plan": rs[0].get("plan", {}).get("backend_plan", rs[0].get("plan", {}))}
            else:
                b1 = [t["batch1_latency_ms"]["p50"] for t in rs]
                tp = [t["batch_images_per_s"] for t in rs]
                extra = {"effective_precision": rs[0].get("effective_precision"),
                         "conv_kernels": rs[0].get("conv_kernels"), "threads": rs[0].get("threads"),
                         "version": rs[0].get("version")}
            s[side] = {"b1_p50_ms": median(b1), "batch_images_per_s": median(tp),
                       "rounds": {"b1_p50_ms": b1, "batch_images_per_s": tp}, **extra}
        if s["dlperf"] and s["openvino"]:
            d, o = s["dlperf"]["rounds"], s["openvino"]["rounds"]
            s["ratio_per_round"] = {"b1_latency": [x / y for x, y in zip(d["b1_p50_ms"], o["b1_p50_ms"])],
                                    "throughput": [x / y for x, y in zip(d["batch_images_per_s"],
                                                                         o["batch_images_per_s"])]}
            s["ratio"] = {k: median(v) for k, v in s["ratio_per_round"].items()}
        summary[prec] = s
    b = a.batch
    print(f"\nResNet-50 inference, dlperf --device cpu vs OpenVINO (int8: NNCF post-training quantization), "
          f"{a.threads} threads, same weights, preprocessed tensors; median of {a.repeat} round(s), ratio = median "
          f"of the rounds' dlperf/OpenVINO pairs")
    print(f"{'':6} {'batch 1 p50 ms':>30} {'batch %d images/s' % b:>32}")
    print(f"{'':6} {'dlperf':>9} {'OpenVINO':>9} {'ratio':>10} {'dlperf':>10} {'OpenVINO':>10} {'ratio':>10}")
    for prec in precs:
        s = summary[prec]
        d, o = s["dlperf"], s["openvino"]
        fd = (lambda v, w: f"{v:{w}.2f}") if d else (lambda v, w: f"{'-':>{w}}")
        fo = (lambda v, w: f"{v:{w}.2f}") if o else (lambda v, w: f"{'-':>{w}}")
        r = s.get("ratio")
        print(f"{prec:6} {fd(d and d['b1_p50_ms'], 9)} {fo(o and o['b1_p50_ms'], 9)} "
              f"{(format(r['b1_latency'], '9.2f') + 'x') if r else '-':>10} "
              f"{fd(d and d['batch_images_per_s'], 10)} {fo(o and o['batch_images_per_s'], 10)} "
              f"{(format(r['throughput'], '9.2f') + 'x') if r else '-':>10}")
    for prec in precs:
        s = summary[prec]
        if s["openvino"]:
            kk = ", ".join(f"{n} x {k}" for k, n in sorted((s["openvino"]["conv_kernels"] or {}).items(),
                                                            key=lambda kv: -kv[1]))
            print(f"OpenVINO {prec}: compiled precision {s['openvino']['effective_precision']}; convolutions "
                  f"(kernel, precision): {kk}")
        if s["dlperf"] is None:
            print(f"dlperf {prec}: not measured ({a.missing.get(prec, 'no result')})")
    speed = {}
    for side in ("dlperf", "openvino"):
        if "int8" not in summary or not summary["int8"][side]:
            continue
        q = summary["int8"][side]
        for base in ("fp32", "bf16"):
            if base in summary and summary[base][side]:
                bb = summary[base][side]
                speed[f"{side}_int8_over_{base}"] = {"throughput": q["batch_images_per_s"] / bb["batch_images_per_s"],
                                                     "b1_latency": q["b1_p50_ms"] / bb["b1_p50_ms"]}
    for k, v in speed.items():
        side, base = k.split("_int8_over_")
        print(f"{'dlperf' if side == 'dlperf' else 'OpenVINO'} int8 over its own {base}: batch-{b} throughput "
              f"{v['throughput']:.2f}x, batch-1 p50 latency {v['b1_latency']:.2f}x")

    # top-1 agreements
    with open(os.path.join(a.dir, "ov-top1.json")) as f:
        ov_t = json.load(f)
    ov_maps = {p: dict(zip(ov_t["images"], ov_t[p])) for p in ("fp32", "bf16", "int8") if p in ov_t}
    dl_maps = {}
    for p in ("fp32", "bf16", "int8"):
        path = os.path.join(a.dir, f"dlperf-top1-{p}.txt")
        if os.path.exists(path) and os.path.getsize(path):
            m = dlperf_top1(path, a.eval)
            if m:
                dl_maps[p] = m
    agree = {}
    for p in ("bf16", "int8"):
        if p in ov_maps:
            agree[f"openvino_{p}_vs_openvino_fp32"] = agreement(ov_maps[p], ov_maps["fp32"])
        if p in dl_maps and "fp32" in dl_maps:
            agree[f"dlperf_{p}_vs_dlperf_fp32"] = agreement(dl_maps[p], dl_maps["fp32"])
    for p in ("fp32", "bf16", "int8"):
        if p in dl_maps and p in ov_maps:
            agree[f"dlperf_{p}_vs_openvino_{p}"] = agreement(dl_maps[p], ov_maps[p])
    if "fp32" in dl_maps and "fp32" in ov_maps:
        agree.setdefault("dlperf_fp32_vs_openvino_fp32", agreement(dl_maps["fp32"], ov_maps["fp32"]))
    with open(os.path.join(a.dir, "ov-prepare.json")) as f:
        prep = json.load(f)
    ns = prep["nncf_settings"]
    print(f"OpenVINO {prep['openvino']}, NNCF {prep['nncf']}: {ns['api']} with N = {ns['subset_size']}, "
          f"{ns['fake_quantize_nodes']} FakeQuantize nodes, quantized in {prep['quantize_s']:.1f} s")
    print(f"\ntop-1 agreement on the {len(ov_t['images'])} eval images (what int8 and bf16 cost each engine; the "
          f"cross-engine lines check that both ran the same weights and inputs); OpenVINO fp32 gave "
          f"{len(set(ov_t['fp32']))} distinct top-1 classes:")
    for k, v in agree.items():
        if v:
            print(f"  {k.replace('_vs_', ' vs ').replace('_', ' '):34} {v['agree']:4d}/{v['images']:<4d} "
                  f"{v['percent']:6.1f}%")
    if "int8" in precs and "int8" not in dl_maps:
        print("  dlperf int8: not measured (see above)")
    # top-1 accuracy against the eval images' classes (the sorted class folders: dlperf's and fit-head's indices),
    # where the model has as many classes as the dataset
    folders = sorted({os.path.dirname(k) for k in ov_t["images"]})
    truth = {k: folders.index(os.path.dirname(k)) for k in ov_t["images"]}
    acc = {}
    if ov_t.get("classes") == len(folders):
        for eng, maps in (("dlperf", dl_maps), ("openvino", ov_maps)):
            for p, mp in maps.items():
                acc[f"{eng}_{p}"] = agreement(mp, truth)
    if acc:
        print("top-1 accuracy against the eval images' classes: " + ", ".join(
            f"{k.replace('_', ' ')} {v['percent']:.1f}%" for k, v in acc.items() if v))
    if a.weights_note:
        print(f"  ({a.weights_note})")

    # issue 32's targets (CPU with VNNI and no AMX: against dlperf's fp32; with AMX: its bf16)
    tg = {}
    si = summary.get("int8", {})
    if si.get("ratio"):
        tg["vs_openvino_int8_throughput"] = {"ratio": si["ratio"]["throughput"], "target": ">= 1.1",
                                             "met": si["ratio"]["throughput"] >= 1.1}
        tg["vs_openvino_int8_b1_latency"] = {"ratio": si["ratio"]["b1_latency"], "target": "<= 0.9",
                                             "met": si["ratio"]["b1_latency"] <= 0.9}
    base = "bf16" if a.amx else "fp32"
    if f"dlperf_int8_over_{base}" in speed:
        v = speed[f"dlperf_int8_over_{base}"]["throughput"]
        tg[f"int8_over_own_{base}_throughput"] = {"ratio": v, "target": ">= 1.6", "met": v >= 1.6}
    if "dlperf_int8_vs_dlperf_fp32" in agree and agree["dlperf_int8_vs_dlperf_fp32"]:
        v = agree["dlperf_int8_vs_dlperf_fp32"]["percent"]
        tg["int8_top1_agreement_with_fp32"] = {"percent": v, "target": ">= 98", "met": v >= 98}
    if tg:
        print("\nissue 32's targets (" + ("AMX: int8 against dlperf's bf16" if a.amx else
                                          "no AMX: int8 against dlperf's fp32") + "):")
        for k, v in tg.items():
            val = v.get("ratio", v.get("percent"))
            print(f"  {k:36} {val:7.2f} ({v['target']}: {'met' if v['met'] else 'NOT met'})")
    else:
        print("\nissue 32's targets: not judged (no dlperf int8 result)")
    if a.json:
        with open(a.json, "x") as f:
            json.dump({"schema": "dlperf.bench-int8-vs-openvino/1", "batch": b, "threads": a.threads,
                       "rounds": a.repeat, "by_precision": summary, "int8_speedup": speed, "top1_agreement": agree, "top1_accuracy": acc,
                       "openvino_prepare": prep, "dlperf_missing": a.missing, "targets": tg,
                       "command": a.command}, f, indent=1)


def cmd_kernels(a):
    rows = []
    for name in sorted(os.listdir(a.dir)):
        m = re.match(r"cap-(.+)-(fp32|bf16|int8)-b(\d+)\.log$", name)
        if not m:
            continue
        cap, prec, batch = m.group(1), m.group(2), int(m.group(3))
        with open(os.path.join(a.dir, name), errors="replace") as f:
            lines = f.read().splitlines()
        isa = next((ln.split("isa:", 1)[1].strip() for ln in lines
                    if ln.startswith("onednn_verbose,") and ",info,cpu,isa:" in ln), "?")
        # exec lines as [exec, cpu, primitive, implementation, prop kind, descriptors, ...]: oneDNN 3.2 writes
        # onednn_verbose,exec,cpu,...; later versions onednn_verbose,v1,primitive,exec,cpu,...
        ex = []
        for ln in lines:
            f = ln.split(",")
            if f[0] == "onednn_verbose" and "exec" in f[1:4]:
                f = f[f.index("exec", 1):]
                if len(f) > 5 and f[1] == "cpu":
                    ex.append(f)
        ips = [i for i, f in enumerate(ex) if f[2] == "inner_product"]
        err = next((ln for ln in lines if ln.startswith("error:")), None)
        if len(ips) < 2:
            rows.append({"cap": cap, "precision": prec, "batch": batch, "isa": isa, "convs": {},
                         "note": err or "no complete forward call in the log (the run failed?)"})
            continue
        last = ex[ips[-2] + 1:ips[-1] + 1]
        convs = {}
        for f in last:
            if f[2] != "convolution":
                continue
            dts = re.findall(r"(src|wei|dst)_(\w+?):", f[5])
            key = f"{f[3]} {f[4].replace('forward_', 'fwd_')} " + "/".join(t for _, t in dts)
            convs[key] = convs.get(key, 0) + 1
        rows.append({"cap": cap, "precision": prec, "batch": batch, "isa": isa, "convs": convs,
                     "inner_product": last[-1][3]})
    if not rows:
        raise SystemExit(f"no cap-*.log under {a.dir}")
    caps, precs = a.caps.split(), ["fp32", "bf16", "int8"]
    rows.sort(key=lambda r: (caps.index(r["cap"]) if r["cap"] in caps else len(caps), precs.index(r["precision"]),
                             r["batch"]))
    print("\noneDNN convolution implementations of one forward call (ONEDNN_VERBOSE=1, the last call), per "
          "ONEDNN_MAX_CPU_ISA cap: implementation, propagation kind, src/wei/dst types x count")
    for r in rows:
        head = f"{r['cap']:18} {r['precision']:5} b{r['batch']:<3} (oneDNN isa: {r['isa']})"
        if not r["convs"]:
            print(f"{head}\n    {r['note']}")
            continue
        print(head)
        for k, n in sorted(r["convs"].items(), key=lambda kv: -kv[1]):
            print(f"    {n:3d} x {k}")
    if a.json:
        with open(a.json, "x") as f:
            json.dump({"schema": "dlperf.bench-int8-kernels/1", "rows": rows}, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--weights", required=True)
    p.add_argument("--model", default="")
    p.add_argument("--calib", required=True)
    p.add_argument("--calib-images", type=int, required=True)
    p.add_argument("--eval", required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--dir", required=True)
    h = sub.add_parser("fit-head")
    h.add_argument("--weights", required=True)
    h.add_argument("--model", default="")
    h.add_argument("--images", required=True)
    h.add_argument("--threads", type=int, required=True)
    h.add_argument("--out", required=True)
    o = sub.add_parser("openvino")
    o.add_argument("--ir", required=True)
    o.add_argument("--hint", choices=["f32", "bf16"], required=True)
    o.add_argument("--images", required=True)
    o.add_argument("--threads", type=int, required=True)
    o.add_argument("--batch", type=int, default=32)
    o.add_argument("--streams", type=int, default=1, help="the batch over N streams (THROUGHPUT hint); batch 1 as is")
    o.add_argument("--warmup", type=int, default=2)
    o.add_argument("--iters", type=int, default=4)
    o.add_argument("--min-duration", type=float, default=3.0)
    o.add_argument("--out", required=True)
    r = sub.add_parser("report")
    r.add_argument("--dir", required=True)
    r.add_argument("--eval", default="", help="the eval images' directory (dlperf --top5 prints absolute paths)")
    r.add_argument("--precisions", default="fp32 int8")
    r.add_argument("--repeat", type=int, default=1)
    r.add_argument("--batch", type=int, default=32)
    r.add_argument("--threads", type=int, default=0)
    r.add_argument("--amx", type=int, default=0)
    r.add_argument("--missing", default="{}", help="JSON: precision -> why dlperf has no row")
    r.add_argument("--weights-note", default="")
    r.add_argument("--command", default="")
    r.add_argument("--json")
    k = sub.add_parser("kernels")
    k.add_argument("--dir", required=True)
    k.add_argument("--caps", default="", help="the caps' order in the table")
    k.add_argument("--json")
    a = ap.parse_args()
    if a.cmd == "report":
        a.missing = json.loads(a.missing)
    return {"prepare": cmd_prepare, "fit-head": cmd_fit_head, "openvino": cmd_openvino, "report": cmd_report, "kernels": cmd_kernels}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
