#!/usr/bin/python3
# timeout: 400
"""Preemptible training: `dlperf train` killed with SIGKILL at random points, again and again, and resumed each
time — as a spot instance, a Kubernetes eviction or a Slurm requeue would do it.

One run (resnet-mini 64 px, batch 8, the ref backend: bit-reproducible), checkpointing every step with
--keep-checkpoints 2, is killed at >= 22 random moments (uniform 0.1..0.7 s after each start: during setup, during
steps, during checkpoint writes) and restarted with the same command each time (--checkpoint DIR --resume DIR: the first start, with no checkpoint
yet, starts from the beginning), then run to its end. Checked:
  - every resume succeeds, and every step line any process printed (step, epoch, loss, lr) equals the uninterrupted
    run's line for that step — so the loss curve matches exactly — and together they cover every step;
  - after every kill the directory holds at most N complete checkpoints plus the one being written (N + 1), and
    no temporary file of an earlier (dead) writer: what a killed writer left is gone once the next one started;
  - at the end: exactly N complete checkpoints, no temporary files, no state file without its model;
  - a second `dlperf train` on the directory while one runs is refused (the writer lock), naming the live PID;
  - SIGTERM (a scheduler's notice): the process finishes its step, writes a checkpoint first and exits 143, and the
    run resumes from that step.
How many kills landed in the middle of a checkpoint save (a temporary file or an unpublished state file was left)
is printed.
"""
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.environ.get("DLPERF_ROOT", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DLPERF = os.environ.get("DLPERF", os.path.join(ROOT, "build", "dlperf"))
TMP = tempfile.mkdtemp(prefix="preempt-", dir=os.environ.get("DLPERF_TEST_TMP"))
KEEP = 2
STEPS = 500  # at least; main() raises it on a CPU fast enough that the kills would outrun the run
KILLS = 22
ENV = dict(os.environ, OMP_WAIT_POLICY="passive")
FAILS = []
CHILDREN = []  # killed on the way out if still running


def fail(msg):
    print("  FAIL", msg)
    FAILS.append(msg)


def train_args(ck, resume, extra=(), steps=None):
    a = [DLPERF, "train", "--data", os.path.join(TMP, "ds"), "--model", "resnet-mini", "--size", "64", "--batch", "8",
         "--device", "ref", "--threads", "1", "--workers", "1", "--steps", str(steps or STEPS), "--lr", "0.05",
         "--no-lr-scaling", "--warmup-steps", "5", "--momentum", "0.9", "--log-every", "1", "--peak", "off",
         "--no-monitor", "--no-eval", *extra]
    if ck:
        a += ["--checkpoint", ck, "--checkpoint-every", "1", "--keep-checkpoints", str(KEEP)]
    if resume:
        a += ["--resume", ck]
    return a


def step_lines(text):
    """{step: (step, epoch, loss, lr)} from the step lines (the timing fields left out)."""
    out = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 8 and f[0] == "step":
            out[int(f[1].split("/")[0])] = (f[1], f[3], f[5], f[7])
    return out


def complete(ck):
    names = set(os.listdir(ck)) if os.path.isdir(ck) else set()
    return sorted(n for n in names if re.fullmatch(r"step-\d+\.safetensors", n)
                  and n.replace(".safetensors", ".state.safetensors") in names)


def temporaries(ck):
    """{pid: [names]} of core/fs temporaries (<name>.tmp.<pid>)."""
    out = {}
    for n in os.listdir(ck) if os.path.isdir(ck) else []:
        m = re.fullmatch(r"step-\d+(?:\.state)?\.safetensors\.tmp\.(\d+)", n)
        if m:
            out.setdefault(int(m.group(1)), []).append(n)
    return out


def orphans(ck):
    names = set(os.listdir(ck)) if os.path.isdir(ck) else set()
    return sorted(n for n in names if re.fullmatch(r"step-\d+\.state\.safetensors", n)
                  and n.replace(".state.safetensors", ".safetensors") not in names)


def main():
    subprocess.check_call([DLPERF, "data", "gen", "--out", os.path.join(TMP, "ds"), "--classes", "3", "--per-class",
                           "12", "--val-per-class", "2", "--size", "64-80", "--seed", "1"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    # How many steps the kills consume depends on the CPU (~23 a kill on a Zen 5 core, where 500 steps ran out after
    # 21 kills): a short run checkpointing every step, as the killed ones do, sets STEPS to 1.5x what 22 kills of
    # at most 0.7 s could take, plus room for the SIGTERM part and the final resume.
    global STEPS
    cal = os.path.join(TMP, "cal")
    t0 = time.time()
    r = subprocess.run(train_args(cal, False, steps=60), capture_output=True, text=True, env=ENV)
    if r.returncode != 0:
        print(r.stderr[-2000:])
        raise SystemExit("the calibration run failed")
    rate = 60 / (time.time() - t0)
    shutil.rmtree(cal, ignore_errors=True)
    STEPS = max(STEPS, int(rate * 0.7 * KILLS * 1.5 / 100 + 2) * 100)
    print(f"calibration: {rate:.0f} steps/s with a checkpoint each (setup included): {STEPS} steps")
    # The uninterrupted run (one thread) goes on beside the killed ones (one thread each): every step line is
    # compared with it once it has ended.
    t0 = time.time()
    ref_err = open(os.path.join(TMP, "err.uninterrupted"), "w+")
    ref = subprocess.Popen(train_args(None, False), stdout=subprocess.DEVNULL, stderr=ref_err, env=ENV)
    CHILDREN.append(ref)
    printed = []  # (where, step, line) of every step line a killed or resumed process printed

    ck = os.path.join(TMP, "ck")
    rng = random.Random(int(os.environ.get("DLPERF_PREEMPT_SEED", "20261201")))
    kills, mid_write, resumes, seen, dead_pids = 0, 0, 0, {}, set()
    while kills < KILLS:
        resume = True  # one command for every (re)start: --resume names the run's own directory, even empty
        resumes += bool(complete(ck))
        err = open(os.path.join(TMP, f"err.{kills}"), "w+")
        p = subprocess.Popen(train_args(ck, resume), stdout=subprocess.DEVNULL, stderr=err, env=ENV)
        delay = rng.uniform(0.1, 0.7)
        try:
            p.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGKILL)
            p.wait()
        err.seek(0)
        text = err.read()
        err.close()
        for s, line in step_lines(text).items():
            printed.append((f"after {kills} kills", s, line))
            seen[s] = line
        if p.returncode == 0:
            break  # the run ended before this kill: too few steps for the kills
        if p.returncode != -signal.SIGKILL:
            fail(f"process {kills} exited {p.returncode}: {text[-800:]}")
            break
        kills += 1
        c = complete(ck)
        tmp = temporaries(ck)
        mid_write += p.pid in tmp or bool(orphans(ck))  # killed between its two renames, or inside a write
        if len(c) > KEEP + 1:
            fail(f"after kill {kills}: {len(c)} complete checkpoints (keep {KEEP}): {c}")
        stale = {pid: n for pid, n in tmp.items() if pid in dead_pids}
        if stale:
            fail(f"after kill {kills}: temporaries of earlier writers still there: {stale}")
        dead_pids.add(p.pid)
        print(f"  kill {kills:2d} at {delay:.2f} s: steps so far {max(seen) if seen else 0}, "
              f"complete checkpoints {[int(n[5:13]) for n in c]}, temporaries {sum(len(v) for v in tmp.values())}"
              f"{', orphan state ' + str(orphans(ck)) if orphans(ck) else ''}")
    if kills < KILLS:
        fail(f"only {kills} kills before the run ended (raise STEPS)")

    # SIGTERM: finish the step, checkpoint first, exit 143
    err = open(os.path.join(TMP, "err.term"), "w+")
    p = subprocess.Popen(train_args(ck, True), stdout=subprocess.DEVNULL, stderr=err, env=ENV)
    for _ in range(200):
        time.sleep(0.05)
        err.seek(0)
        if sum(1 for line in err.read().splitlines() if line.startswith("step ")) >= 3:
            break
    # meanwhile a second writer on the same directory is refused, naming the live one
    r2 = subprocess.run(train_args(ck, True), capture_output=True, text=True, env=ENV)
    if r2.returncode == 0 or f"another dlperf train (pid {p.pid})" not in r2.stderr:
        fail(f"a second live writer was not refused by the lock: exit {r2.returncode}: {r2.stderr[-500:]}")
    else:
        print(f"  a second writer while pid {p.pid} runs: refused ({r2.stderr.strip().splitlines()[0][:110]}...)")
    p.send_signal(signal.SIGTERM)
    rc = p.wait(timeout=120)
    err.seek(0)
    text = err.read()
    err.close()
    term_lines = step_lines(text)
    last = max(term_lines) if term_lines else -1
    if rc != 143:
        fail(f"SIGTERM: exit {rc}, expected 143: {text[-800:]}")
    if not complete(ck) or int(complete(ck)[-1][5:13]) != last:
        fail(f"SIGTERM: the newest checkpoint {complete(ck)[-1:]} is not the last step taken ({last})")
    else:
        print(f"  SIGTERM after step {last}: checkpoint step {last} written, exit {rc}")
    for s, line in term_lines.items():
        printed.append(("SIGTERM run", s, line))
        seen[s] = line

    # the rest, uninterrupted
    r = subprocess.run(train_args(ck, True), capture_output=True, text=True, env=ENV)
    resumes += 1
    if r.returncode != 0:
        fail(f"the final resume failed ({r.returncode}): {r.stderr[-1500:]}")
    for s, line in step_lines(r.stderr).items():
        printed.append(("final run", s, line))
        seen[s] = line
    rc = ref.wait(timeout=300)
    ref_err.seek(0)
    text = ref_err.read()
    ref_err.close()
    if rc != 0:
        print(text[-2000:])
        raise SystemExit("the uninterrupted run failed")
    want = step_lines(text)
    if len(want) != STEPS:
        raise SystemExit(f"the uninterrupted run printed {len(want)} step lines, expected {STEPS}")
    print(f"uninterrupted run (beside the others): {STEPS} steps in {time.time() - t0:.1f} s, last {want[STEPS]}")
    bad = [(w, s, line) for w, s, line in printed if line != want.get(s)]
    for w, s, line in bad[:10]:
        fail(f"step {s} ({w}): {line} != uninterrupted {want.get(s)}")
    missing = [s for s in range(1, STEPS + 1) if s not in seen]
    if missing:
        fail(f"steps never printed by any process: {missing[:10]}")
    c, tmp, orph = complete(ck), temporaries(ck), orphans(ck)
    if len(c) != KEEP or tmp or orph:
        fail(f"at the end: complete {c}, temporaries {tmp}, orphan state files {orph}")
    if int(c[-1][5:13]) != STEPS:
        fail(f"the newest checkpoint is {c[-1]}, expected step {STEPS}")
    print(f"{kills} SIGKILLs ({mid_write} during a checkpoint write), {resumes} resumes, SIGTERM once: every step line "
          f"equals the uninterrupted run's ({len(seen)} steps, last {seen.get(STEPS)}); at the end {c}, no temporaries")
    if FAILS:
        print(f"FAIL: {len(FAILS)} check(s): {FAILS[:5]}")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    try:
        rc = main()
    finally:
        for c in CHILDREN:
            if c.poll() is None:
                c.kill()
                c.wait()
        shutil.rmtree(TMP, ignore_errors=True)
    sys.exit(rc)
