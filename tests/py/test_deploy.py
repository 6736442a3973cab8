#!/usr/bin/env python3
"""deploy/: the Kubernetes manifests parse (YAML), have the fields their kinds need, and every dlperf command line
in them (after `dlperf`, or the container args of the dlperf image whose entrypoint is dlperf) names a real
subcommand and only options that subcommand's --help lists; mpirun lines start dlperf. The Dockerfile builds with
scripts/setup.sh and the Makefile target it names. (Nothing here can start a cluster or a container: this checks
what Debian offers — a YAML parser, dlperf's own --help.)"""
# tags: asan light
import os
import re
import subprocess
import sys

ROOT = os.environ.get("DLPERF_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
DLPERF = os.environ.get("DLPERF", os.path.join(ROOT, "build", "dlperf"))
try:
    import yaml
except ImportError:
    print("skipped: no python3-yaml")
    sys.exit(0)

fails = []


def check(cond, what):
    if not cond:
        fails.append(what)
        print("FAIL:", what)


_help = {}


def options_of(sub):
    if sub not in _help:
        r = subprocess.run([DLPERF] + sub.split() + ["--help"], capture_output=True, text=True)
        _help[sub] = set(re.findall(r"--[a-z0-9][a-z0-9-]*", r.stdout + r.stderr)) if r.returncode == 0 else None
    return _help[sub]


def check_dlperf_line(argv, where):
    """argv: what follows `dlperf`."""
    check(len(argv) > 0, f"{where}: dlperf without a subcommand")
    sub = argv[0]
    if sub in ("nn", "data", "gpu", "dist"):
        sub = " ".join(argv[:2])
    opts = options_of(sub)
    check(opts is not None, f"{where}: `dlperf {sub}` is not a subcommand")
    if opts is None:
        return
    for a in argv:
        if a.startswith("--"):
            check(a.split("=")[0] in opts, f"{where}: `dlperf {sub}` has no option {a}")
    print(f"ok   {where}: dlperf {' '.join(argv)}"[:160])


def containers(doc):
    kind = doc.get("kind")
    if kind == "MPIJob":
        for role, spec in doc["spec"]["mpiReplicaSpecs"].items():
            for c in spec["template"]["spec"]["containers"]:
                yield f"{kind}/{role}", c
    elif kind in ("Deployment", "Job"):
        for c in doc["spec"]["template"]["spec"]["containers"]:
            yield kind, c


def main():
    d = os.path.join(ROOT, "deploy")
    files = sorted(f for f in os.listdir(d) if f.endswith(".yaml"))
    check(len(files) >= 3, "deploy/ should hold the MPIJob, the serve Deployment and the train Job")
    kinds = set()
    for f in files:
        docs = [x for x in yaml.safe_load_all(open(os.path.join(d, f))) if x]
        check(len(docs) > 0, f"{f}: no document")
        for doc in docs:
            for key in ("apiVersion", "kind", "metadata", "spec"):
                check(key in doc, f"{f}: a document without {key}")
            kinds.add(doc.get("kind"))
            if doc.get("kind") == "MPIJob":
                spec = doc["spec"]
                check(doc["apiVersion"] == "kubeflow.org/v2beta1", f"{f}: MPIJob apiVersion")
                check(spec.get("slotsPerWorker", 0) >= 1, f"{f}: slotsPerWorker")
                check({"Launcher", "Worker"} <= set(spec["mpiReplicaSpecs"]), f"{f}: Launcher and Worker")
            for where, c in containers(doc):
                where = f"{f} {where}/{c.get('name')}"
                check(bool(c.get("image")), f"{where}: no image")
                cmd = list(c.get("command") or []) + list(c.get("args") or [])
                check(all(isinstance(a, str) for a in cmd), f"{where}: every argument a string")
                if cmd and cmd[0] == "mpirun":
                    check("dlperf" in cmd, f"{where}: mpirun without dlperf")
                    np_ = cmd[cmd.index("-np") + 1] if "-np" in cmd else "0"
                    check(np_.isdigit() and int(np_) >= 1, f"{where}: mpirun -np")
                if "dlperf" in cmd:
                    check_dlperf_line(cmd[cmd.index("dlperf") + 1:], where)
                elif not c.get("command"):  # the image's entrypoint is dlperf
                    check_dlperf_line(cmd, where)
    check({"MPIJob", "Deployment", "Service", "Job"} <= kinds, f"deploy/: kinds {sorted(k for k in kinds if k)}")
    df = open(os.path.join(d, "Dockerfile")).read()
    check(re.search(r"^FROM debian:12", df, re.M) is not None, "Dockerfile: FROM debian:12")
    check("scripts/setup.sh build" in df, "Dockerfile: builds through scripts/setup.sh")
    for target in re.findall(r"make [^&\n]*?(build/dlperf)", df):
        check(os.path.exists(os.path.join(ROOT, "Makefile")), "Makefile")
    check('ENTRYPOINT ["dlperf"]' in df, "Dockerfile: ENTRYPOINT dlperf")
    check(os.path.exists(os.path.join(ROOT, "scripts", "setup.sh")), "scripts/setup.sh exists")
    if fails:
        print(f"{len(fails)} problem(s)")
        sys.exit(1)
    print("deploy/: all manifests check out")


main()
