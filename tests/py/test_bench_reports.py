#!/usr/bin/python3
# tags: light
"""The reports of bench/infer_vs_pytorch.sh, bench/data_vs_torchvision.sh, bench/onednn_versions.sh, bench/torch_onednn_kinds.py and bench/int8_vs_openvino.py on made-up figures, without running any
benchmark and without the peers installed (no torch, OpenVINO or DALI needed): the ratios, the targets each peer is
judged by (issue 7 against PyTorch 1.x, issue 14 against OpenVINO and DALI, none against PyTorch 2.x inference), and
the report JSON's keys from before it had several peers. Pure standard library; well under a second.
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.environ.get("DLPERF_ROOT", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
fails = 0


def check(cond, what):
    global fails
    print(("ok   " if cond else "FAIL ") + what)
    fails += not cond


def peer_file(d, peer, prec, version, b1, tp):
    out = {"peer": peer, "precision": prec, "threads": 2, "batch": 32, "version": version,
           "batch1_latency_ms": {"p50": b1, "mean": b1 * 1.01}, "batch_images_per_s": tp}
    if peer == "torch":
        out["torch"] = version
    if peer == "openvino":
        out["effective_precision"] = "f32" if prec == "fp32" else "bf16"
    with open(os.path.join(d, f"{peer}-{prec}-1.json"), "w") as f:
        json.dump(out, f)


def dlperf_file(d, prec, b1, tp):
    with open(os.path.join(d, f"dlperf-{prec}-1.json"), "w") as f:
        json.dump({"results": [{"batch": 1, "latency_ms": {"p50": b1, "mean": b1}},
                               {"batch": 32, "images_per_s": tp}], "plan": {}}, f)


def report(d, peers, out):
    return subprocess.run([sys.executable, os.path.join(ROOT, "bench/infer_vs_pytorch.py"), "report", "--dir", d,
                           "--precisions", "fp32 bf16", "--peers", peers, "--json", out],
                          capture_output=True, text=True)


with tempfile.TemporaryDirectory() as d:
    # PyTorch 1.x alone: the report as before (issue 7's bf16 targets, the old top-level keys)
    for prec, (b1, tp) in {"fp32": (40.0, 20.0), "bf16": (40.0, 20.0)}.items():
        peer_file(d, "torch", prec, "1.13.0a0", b1, tp)
    dlperf_file(d, "fp32", 20.0, 40.0)
    dlperf_file(d, "bf16", 10.0, 60.0)
    r = report(d, "torch", os.path.join(d, "one.json"))
    check(r.returncode == 0, f"report, PyTorch 1.x only: exit 0 ({r.stderr.strip()[-300:]})")
    check("issue 7" in r.stdout and "(>= 2.5: met)" in r.stdout and "(<= 0.5: met)" in r.stdout,
          "PyTorch 1.x: issue 7's bf16 targets, 3.0x and 0.25x both met")
    j = json.load(open(os.path.join(d, "one.json")))
    bf = j["by_precision"]["bf16"]
    check(abs(bf["ratio_throughput"] - 3.0) < 1e-9 and abs(bf["ratio_b1_latency"] - 0.25) < 1e-9,
          "the old keys: by_precision.bf16.ratio_throughput 3.0, ratio_b1_latency 0.25")
    check(j["targets"].get("bf16_throughput_met") is True and bf["torch_version"] == "1.13.0a0",
          "the old keys: targets.bf16_throughput_met, torch_version")

    # OpenVINO and PyTorch 2.x: issue 14's targets against OpenVINO at fp32 and bf16, none against PyTorch 2.x
    for prec in ("fp32", "bf16"):
        peer_file(d, "torch", prec, "2.15.0", 30.0, 30.0)
    peer_file(d, "openvino", "fp32", "2026.4", 20.0, 38.0)   # dlperf fp32: 20 ms (1.0x), 40 img/s (1.05x)
    peer_file(d, "openvino", "bf16", "2026.4", 12.5, 50.0)   # dlperf bf16: 10 ms (0.8x), 60 img/s (1.2x)
    r = report(d, "openvino torch", os.path.join(d, "two.json"))
    check(r.returncode == 0, f"report, OpenVINO + PyTorch 2.x: exit 0 ({r.stderr.strip()[-300:]})")
    out = r.stdout
    check("issue 14, fp32 vs OpenVINO fp32" in out and "ratio 1.05 (>= 1.1: NOT met)" in out
          and "ratio 1.00 (<= 0.9: NOT met)" in out, "OpenVINO fp32: 1.05x and 1.00x, both NOT met")
    check("issue 14, bf16 vs OpenVINO bf16" in out and "ratio 1.20 (>= 1.1: met)" in out
          and "ratio 0.80 (<= 0.9: met)" in out, "OpenVINO bf16: 1.20x and 0.80x, both met")
    check("none stated against PyTorch 2.15.0" in out and "issue 7" not in out, "PyTorch 2.x: no inference target")
    j = json.load(open(os.path.join(d, "two.json")))
    check(j["peers"] == ["openvino", "torch"] and j["targets"]["openvino_bf16"]["throughput_met"] is True
          and j["targets"]["openvino_fp32"]["b1_latency_met"] is False, "JSON: per-peer targets")
    check(abs(j["by_precision"]["fp32"]["ratios"]["torch"]["throughput"] - 40 / 30) < 1e-9,
          "JSON: ratios per peer (fp32 vs PyTorch 2.x 1.33x)")

with tempfile.TemporaryDirectory() as d:
    # data: DALI judged by issue 14 (>= 2x at each thread count, no speed-up target), torchvision by issue 2
    def data_files(peer_ips, dl_ips):
        for w, (p, q) in enumerate(zip(peer_ips, dl_ips), 1):
            with open(os.path.join(d, f"tv.{w}.1.json"), "w") as f:
                json.dump({"img_per_s": p, "cpu_ms_per_image": 1000 * w / p, "dali": "2.4.0"}, f)
            with open(os.path.join(d, f"dl.{w}.1.json"), "w") as f:
                json.dump({"runs": [{"img_per_s": q, "cpu_seconds": 1.0, "images": q}]}, f)

    data_files([200.0, 380.0], [450.0, 700.0])
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench/data_vs_torchvision_report.py"), d, "1 2", "1", "dali"],
                       capture_output=True, text=True)
    out = r.stdout
    check(r.returncode == 0 and "DALI 2.4.0 vs dlperf" in out, f"data report, DALI: exit 0 ({r.stderr.strip()[-300:]})")
    check("2.25x" in out and "dlperf >= 2.0x DALI: met" in out and "1.84x" in out and "NOT met" in out,
          "DALI: 2.25x met at 1 thread, 1.84x NOT met at 2")
    check("target >= 1.8x" not in out, "DALI: no speed-up target")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench/data_vs_torchvision_report.py"), d, "1 2", "1"],
                       capture_output=True, text=True)
    check(r.returncode == 0 and "dlperf >= 2.5x torchvision: NOT met" in r.stdout and "target >= 1.8x" in r.stdout,
          "torchvision (the default peer): issue 2's 2.5x and 1.8x speed-up targets")

with tempfile.TemporaryDirectory() as d:
    # oneDNN 2.x vs 3.x (bench/onednn_versions.sh): best of the rounds per primitive, totals weighted by count,
    # the ratio 3.x / 2.x, and exit 1 when the forward outputs disagree
    def layers_file(r, v, ms, checksum=100.0):
        with open(os.path.join(d, f"r{r}-v{v}.jsonl"), "w") as f:
            f.write(json.dumps({"onednn": f"{v}.0.0", "batch": 32, "size": 224, "precision": "fp32", "max_isa": ""}) + "\n")
            # "l2 3x3 128-128" forward is the report's reference rate (dlperf's peak shape)
            for layer, count in (("l2 3x3 128-128", 3), ("b 1x1", 1)):
                for op, k in (("conv fwd", 1.0), ("conv bwd weights", 2.0), ("bn fwd", 0.1)):
                    f.write(json.dumps({"layer": layer, "count": count, "op": op, "ms": ms * k, "impl": f"impl{v}",
                                        "checksum": checksum if op == "conv fwd" else 0,
                                        "gflop": 7.4 if op.startswith("conv") else 0}) + "\n")

    layers_file(1, 2, 10.0)
    layers_file(2, 2, 12.0)  # a slower round: the best (10) counts
    layers_file(1, 3, 8.0, 100.00001)
    layers_file(2, 3, 9.0, 100.00001)
    rep = os.path.join(ROOT, "bench/onednn_versions_report.py")
    r = subprocess.run([sys.executable, rep, "--dir", d, "--rounds", "2", "--json", os.path.join(d, "v.json")],
                       capture_output=True, text=True)
    check(r.returncode == 0 and "forward outputs agree" in r.stdout, f"oneDNN versions report: exit 0 ({r.stderr.strip()[-300:]})")
    j = json.load(open(os.path.join(d, "v.json")))
    # conv fwd: (3 + 1) * 10 = 40 ms vs 32; bwd weights 80 vs 64; bn: 4 vs 3.2; step 124 vs 99.2
    check(abs(j["per_step_ms"]["v2"]["conv fwd"] - 40) < 1e-9 and abs(j["step_ms"]["v3"] - 99.2) < 1e-9
          and abs(j["ratio"] - 0.8) < 1e-9, "oneDNN versions: best round per primitive, weighted by count, ratio 0.80")
    # efficiency (2.x): reference 7.4 GFLOP in 10 ms = 740 GFLOP/s; forward 29.6 GFLOP in 40 ms (100%), backward
    # weights 29.6 in 80 ms (370, 50%), convolutions 59.2 in 120 ms; the step 3 x 29.6 GFLOP in 124 ms (716, 96.8%)
    e = j["efficiency"]["v2"]
    check(abs(e["reference_gflops"] - 740) < 1e-6 and abs(e["kinds"]["conv bwd weights"]["gflops"] - 370) < 1e-6
          and abs(e["kinds"]["convolutions"]["gflops"] - 59.2 / 0.120) < 1e-6
          and abs(e["step_gflops"] - 88.8 / 0.124) < 1e-6 and abs(e["step_share"] - 88.8 / 0.124 / 740) < 1e-9,
          f"oneDNN versions: GFLOP/s per kind and the step's share of the reference rate ({e})")
    check("least efficient passes (2.0.0): b 1x1 bwd weights 50%, l2 3x3 128-128 bwd weights 50%" in r.stdout
          and " 97%   <- the most a training step" in r.stdout, "oneDNN versions: efficiency lines printed")
    layers_file(1, 3, 8.0, 101.0)
    layers_file(2, 3, 9.0, 101.0)
    r = subprocess.run([sys.executable, rep, "--dir", d, "--rounds", "2"], capture_output=True, text=True)
    check(r.returncode == 1 and "MISMATCH l2 3x3 128-128" in r.stdout, "oneDNN versions: outputs 1% apart are a mismatch, exit 1")

with tempfile.TemporaryDirectory() as d:
    # PyTorch's oneDNN per kind of primitive (bench/torch_onednn_kinds.py --parse): a saved verbose log in 3.x's
    # format with and without the v1,primitive fields; a convolution's GFLOP from its problem descriptor
    log = os.path.join(d, "v.log")
    with open(log, "w") as f:
        f.write("onednn_verbose,v1,info,oneDNN v3.13.3 (commit x)\n"
                "onednn_verbose,v1,primitive,exec,cpu,convolution,brgconv_1x1:avx512_core_bf16,forward_training,"
                "src:bf16::blocked:acdb::f0 wei:bf16::blocked:AcdB64a2b::f0,attr-scratchpad:user,alg:convolution_direct,"
                "mb32_ic64oc256_ih56oh56kh1sh1dh0ph0_iw56ow56kw1sw1dw0pw0,5.0\n"
                "onednn_verbose,exec,cpu,convolution,jit_bf16:avx512_core_bf16,backward_weights,src_bf16 wei_bf16,"
                "attr-scratchpad:user ,alg:convolution_direct,mb32_ic64oc64_ih56oh56kh3sh1dh0ph1_iw56ow56kw3sw1dw0pw1,"
                "10.0\n"
                "onednn_verbose,v1,primitive,exec,cpu,convolution,jit_bf16:avx512_core_bf16,backward_weights,src wei,"
                "attr-scratchpad:user,alg:convolution_direct,mb32_g2ic64oc64_ih56oh56kh3sh1dh0ph1_iw56ow56kw3sw1dw0pw1,"
                "2.0\n"
                "onednn_verbose,v1,primitive,exec,cpu,reorder,jit:uni,undef,src dst,attr-scratchpad:user,,64x3x7x7,0.5\n"
                "onednn_verbose,v1,graph,exec,cpu,1,sdp,x,y,z,strict,larger_partition_kernel_t,dnnl_backend,9.0\n")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench/torch_onednn_kinds.py"), "--parse", log,
                        "--json", os.path.join(d, "k.json")], capture_output=True, text=True)
    check(r.returncode == 0, f"torch_onednn_kinds --parse: exit 0 ({r.stderr.strip()[-300:]})")
    if r.returncode == 0:
        k = {(e["primitive"], e["prop_kind"]): e for e in json.load(open(os.path.join(d, "k.json")))["kinds"]}
        fwd, bww = k[("convolution", "forward_training")], k[("convolution", "backward_weights")]
        # 1x1 64->256 at 56x56, b32: 2*32*256*3136*64 = 3.288 GFLOP; 3x3 64->64: 2*32*64*3136*64*9 = 7.398, and
        # with 2 groups half of it
        check(abs(fwd["gflop"] - 2 * 32 * 256 * 3136 * 64 * 1e-9) < 1e-9 and fwd["calls"] == 1
              and abs(bww["gflop"] - 1.5 * 2 * 32 * 64 * 3136 * 64 * 9 * 1e-9) < 1e-9 and bww["calls"] == 2
              and abs(bww["ms"] - 12.0) < 1e-9 and ("reorder", "undef") in k and len(k) == 3,
              f"torch_onednn_kinds: calls, ms and GFLOP per kind, groups halve, graph lines skipped ({k})")


def int8_vs_openvino_report():
    """bench/int8_vs_openvino.py's report and kernel table (issue 32) on made-up files: the paired ratios, the int8
    speed-ups, the top-1 agreements and accuracy, the targets, a missing dlperf int8 row, both verbose formats."""
    script = os.path.join(ROOT, "bench/int8_vs_openvino.py")
    with tempfile.TemporaryDirectory() as d:
        imgs = [f"n0{c}/img{i}.JPEG" for c in (1, 2) for i in range(8)]
        truth = [0] * 8 + [1] * 8
        int8 = truth[:]
        int8[3] = 1  # one flip against fp32
        json.dump({"images": imgs, "classes": 2, "fp32": truth, "int8": int8}, open(os.path.join(d, "ov-top1.json"), "w"))
        json.dump({"openvino": "2026.4", "nncf": "3.4.0", "quantize_s": 1.0, "nncf_settings": {
            "api": "nncf.quantize", "subset_size": 16, "fake_quantize_nodes": 71}}, open(os.path.join(d, "ov-prepare.json"), "w"))
        for prec, b1, tp in (("fp32", 40.0, 25.0), ("int8", 10.0, 100.0)):
            json.dump({"batch1_latency_ms": {"p50": b1}, "batch_images_per_s": tp, "effective_precision": "f32",
                       "conv_kernels": {"brgconv_avx512_I8 u8": 53}, "threads": 2, "version": "2026.4"},
                      open(os.path.join(d, f"openvino-{prec}-1.json"), "w"))
        for prec, top in (("fp32", truth), ("int8", int8[:2] + [1] + int8[3:])):  # dlperf int8: two flips
            with open(os.path.join(d, f"dlperf-top1-{prec}.txt"), "w") as f:
                f.writelines(f"/ds/val/{k}\n  1.     {c}   50.000%  x\n  2.     {1 - c}   40.000%  y\n" for k, c in zip(imgs, top))
        dlperf_file(d, "fp32", 41.0, 24.0)
        dlperf_file(d, "int8", 9.0, 110.0)
        args = [sys.executable, script, "report", "--dir", d, "--eval", "/ds/val", "--precisions", "fp32 int8",
                "--threads", "2"]
        r = subprocess.run(args + ["--json", os.path.join(d, "r.json")], capture_output=True, text=True)
        check(r.returncode == 0, f"int8_vs_openvino report: exit 0 ({r.stderr.strip()[-300:]})")
        if r.returncode == 0:
            j = json.load(open(os.path.join(d, "r.json")))
            t, a = j["targets"], j["top1_agreement"]
            check(abs(j["by_precision"]["int8"]["ratio"]["throughput"] - 1.1) < 1e-9
                  and abs(j["by_precision"]["int8"]["ratio"]["b1_latency"] - 0.9) < 1e-9
                  and t["vs_openvino_int8_throughput"]["met"] and t["vs_openvino_int8_b1_latency"]["met"]
                  and abs(t["int8_over_own_fp32_throughput"]["ratio"] - 110 / 24) < 1e-9
                  and abs(j["int8_speedup"]["openvino_int8_over_fp32"]["throughput"] - 4.0) < 1e-9,
                  f"int8_vs_openvino: ratios, int8 speed-ups, targets (>= 1.1x, <= 0.9x, >= 1.6x) ({t})")
            check(a["openvino_int8_vs_openvino_fp32"]["agree"] == 15 and a["dlperf_int8_vs_dlperf_fp32"]["agree"] == 14
                  and a["dlperf_fp32_vs_openvino_fp32"]["agree"] == 16 and not t["int8_top1_agreement_with_fp32"]["met"]
                  and j["top1_accuracy"]["dlperf_int8"]["agree"] == 14,
                  f"int8_vs_openvino: top-1 agreements and accuracy, 87.5% < 98% not met ({a})")
        os.remove(os.path.join(d, "dlperf-int8-1.json"))
        os.remove(os.path.join(d, "dlperf-top1-int8.txt"))
        r = subprocess.run(args + ["--missing", json.dumps({"int8": "no int8 in this build"})], capture_output=True,
                           text=True)
        check(r.returncode == 0 and "not measured (no int8 in this build)" in r.stdout and "not judged" in r.stdout,
              f"int8_vs_openvino: without a dlperf int8 result the rest is reported ({r.stderr.strip()[-300:]})")
        conv = "convolution,{impl},forward_inference,src_u8::blocked:acdb::f0 wei_s8::blocked:Acdb64a::f0 dst_u8::blocked:acdb::f0,,,mb1,1.0"
        ip = "inner_product,brgemm:avx512_core,forward_inference,src_u8 wei_s8 dst_f32,,,mb1,0.1"
        for name, pre in (("cap-avx512_core_vnni-int8-b1.log", "onednn_verbose,exec,cpu,"),
                          ("cap-avx2-int8-b1.log", "onednn_verbose,v1,primitive,exec,cpu,")):
            with open(os.path.join(d, name), "w") as f:
                f.write(pre.replace("exec,cpu,", "").replace("primitive,", "") + "info,cpu,isa:Intel AVX-512 with Intel DL Boost\n")
                f.write(pre + conv.format(impl="brgconv:avx512_core_vnni") + "\n" + pre + ip + "\n")  # the warm-up
                f.write("".join(pre + conv.format(impl=i) + "\n" for i in ("brgconv:avx512_core_vnni",) * 2 + ("jit:x",)))
                f.write(pre + ip + "\n")
        r = subprocess.run([sys.executable, script, "kernels", "--dir", d, "--caps", "avx512_core_vnni avx2", "--json",
                            os.path.join(d, "k.json")], capture_output=True, text=True)
        check(r.returncode == 0, f"int8_vs_openvino kernels: exit 0 ({r.stderr.strip()[-300:]})")
        if r.returncode == 0:
            rows = json.load(open(os.path.join(d, "k.json")))["rows"]
            want = {"brgconv:avx512_core_vnni fwd_inference u8/s8/u8": 2, "jit:x fwd_inference u8/s8/u8": 1}
            check([x["cap"] for x in rows] == ["avx512_core_vnni", "avx2"] and all(x["convs"] == want for x in rows)
                  and rows[0]["isa"] == "Intel AVX-512 with Intel DL Boost",
                  f"int8_vs_openvino kernels: the last call's convolutions, caps in order, both verbose formats ({rows})")


int8_vs_openvino_report()

print(f"{'all passed' if not fails else f'{fails} failed'}")
sys.exit(1 if fails else 0)
