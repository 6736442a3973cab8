#!/usr/bin/env python3
"""What PyTorch 2.x's own oneDNN (3.13 in torch 2.15) runs for one ResNet-50 training step, per kind of primitive:
the implementations it picks, milliseconds and GFLOP/s — the same breakdown bench/onednn_versions.sh prints for the
oneDNN 2.6 dlperf builds against and PyPI's 3.2, so the three versions' convolution kernels can be compared on one
machine (issue 14: "decide by measurement whether a newer oneDNN serves better").

    bench/torch_onednn_kinds.py [--threads N] [--batch 32] [--size 224] [--precision bf16|fp32] [--json FILE]
    bench/torch_onednn_kinds.py --parse VERBOSE_LOG [--json FILE]      (a saved ONEDNN_VERBOSE log, no torch needed)

Run it with the Python of bench/peers-venv.sh: $(bench/peers-venv.sh | tail -1)/bin/python bench/torch_onednn_kinds.py
The step: torchvision's resnet50 in channels_last, SGD with momentum, bf16 under torch.autocast("cpu") (or fp32),
random tensors; two steps warm up, the third runs with oneDNN's verbose mode on (in a child process, whose stdout is
the log). A convolution's GFLOP come from its problem descriptor: 2 x mb x oc x oh x ow x ic / g x kh x kw — one
pass's worth for forward, backward data and backward weights alike. Only what oneDNN runs is counted: PyTorch's
own batch norm, ReLU and optimizer kernels are not in the log.
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys

DESC = re.compile(r"mb(\d+)_(?:g(\d+))?ic(\d+)oc(\d+)_(?:id\d+od\d+kd\d+sd\d+dd\d+pd\d+_)?ih(\d+)oh(\d+)kh(\d+)sh\d+dh\d+ph\d+"
                  r"_iw(\d+)ow(\d+)kw(\d+)")


def conv_gflop(desc):
    m = DESC.search(desc)
    if not m:
        return 0.0
    mb, g, ic, oc, _, oh, kh, _, ow, kw = (int(x) if x else 1 for x in m.groups())
    return 2.0 * mb * oc * oh * ow * (ic // g) * kh * kw * 1e-9


def parse(lines):
    """{(primitive, prop_kind): {"calls", "ms", "gflop", "impls"}} from ONEDNN_VERBOSE exec lines (the 3.x format
    with or without the v1,primitive fields)."""
    out = collections.OrderedDict()
    for line in lines:
        f = line.strip().split(",")
        if not f or f[0] != "onednn_verbose" or "exec" not in f:
            continue
        i = f.index("exec")
        if "graph" in f[:i] or len(f) < i + 10:
            continue
        prim, impl, prop, desc = f[i + 2], f[i + 3], f[i + 4], f[i + 8]
        try:
            ms = float(f[-1])
        except ValueError:
            continue
        k = (prim, prop)
        e = out.setdefault(k, {"calls": 0, "ms": 0.0, "gflop": 0.0, "impls": []})
        e["calls"] += 1
        e["ms"] += ms
        if prim == "convolution":
            e["gflop"] += conv_gflop(desc)
        if impl not in e["impls"]:
            e["impls"].append(impl)
    return out


def report(kinds, header, json_path):
    print(header)
    print(f"{'primitive':14s} {'kind':18s} {'calls':>5s} {'ms':>9s} {'GFLOP':>7s} {'GFLOP/s':>8s}  implementations")
    total = 0.0
    for (prim, prop), e in sorted(kinds.items(), key=lambda x: -x[1]["ms"]):
        total += e["ms"]
        rate = f"{e['gflop'] / e['ms'] * 1e3:8.0f}" if e["gflop"] > 0 and e["ms"] > 0 else f"{'':8s}"
        print(f"{prim:14s} {prop:18s} {e['calls']:5d} {e['ms']:9.1f} {e['gflop']:7.1f} {rate}  {' '.join(e['impls'])}")
    conv = [e for (p, _), e in kinds.items() if p == "convolution"]
    cms, cg = sum(e["ms"] for e in conv), sum(e["gflop"] for e in conv)
    if cms > 0:
        print(f"{'convolutions':33s} {sum(e['calls'] for e in conv):5d} {cms:9.1f} {cg:7.1f} {cg / cms * 1e3:8.0f}")
    print(f"{'every oneDNN primitive':33s} {'':5s} {total:9.1f}")
    if json_path:
        out = {"header": header, "kinds": [dict(primitive=p, prop_kind=k, **e) for (p, k), e in kinds.items()],
               "convolutions": {"ms": cms, "gflop": cg}, "total_ms": total}
        with open(json_path + ".tmp", "w") as f:
            json.dump(out, f, indent=1)
        os.replace(json_path + ".tmp", json_path)


def child(a):
    import torch
    import torchvision
    torch.set_num_threads(a.threads)
    m = torchvision.models.resnet50().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(a.batch, 3, a.size, a.size).to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (a.batch,))

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            loss = torch.nn.functional.cross_entropy(m(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    step()
    step()
    sys.stdout.flush()
    with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
        step()
    sys.stdout.flush()
    print(f"# torch {torch.__version__}, oneDNN in torch {torch.backends.mkldnn.is_available()}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--precision", default="bf16", choices=["bf16", "fp32"])
    ap.add_argument("--parse")
    ap.add_argument("--json")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a)
        return 0
    if a.parse:
        with open(a.parse) as f:
            kinds = parse(f)
        header = f"oneDNN primitives in {a.parse}"
    else:
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", "--threads", str(a.threads),
                            "--batch", str(a.batch), "--size", str(a.size), "--precision", a.precision],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stderr[-2000:], file=sys.stderr)
            return 1
        kinds = parse(r.stdout.splitlines())
        ver = next((l[2:] for l in r.stderr.splitlines() if l.startswith("# torch")), "torch")
        onednn = next((l.split(",")[-1].strip() for l in r.stdout.splitlines() if ",info,oneDNN v" in l), "")
        header = (f"ResNet-50 training step b{a.batch} {a.size}px {a.precision}, channels_last, {a.threads} threads: "
                  f"{ver}; {onednn or 'oneDNN version not printed'}; one step's oneDNN primitives")
    if not kinds:
        print("torch_onednn_kinds: no oneDNN exec lines found", file=sys.stderr)
        return 1
    report(kinds, header, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
