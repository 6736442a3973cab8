#!/bin/bash
# The GPU source through a stand-in NVML library (tests/fixtures/monitor/fake_nvml.c, built here): dlopen of a
# given library, every query, "not supported" asked once then left out, power from the energy counter, energy
# totals, and the GPU metrics in /metrics accepted by promtool. Also the NVML-absent path through the CLI.
# tags: asan light
# timeout: 120
set -u
D=${DLPERF:?} PY=${PYTHON:-/usr/bin/python3} ROOT=${DLPERF_ROOT:-.} T=${DLPERF_TEST_TMP:-/tmp}/mongpu.$$
mkdir -p "$T" && trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$D" monitor --list --nvml-lib "$T/none.so" >"$T/list" || fail "--list failed"
grep -q "^gpu .*not available.*none.so not found" "$T/list" || { cat "$T/list"; fail "NVML absent: no clean message"; }
echo "ok: $(grep '^gpu' "$T/list")"

CC=${CC:-cc}
command -v "$CC" >/dev/null || { echo "skipped: no C compiler to build the stand-in NVML"; exit 77; }
"$CC" -shared -fPIC -O1 -o "$T/libfake_nvml.so" "$ROOT/tests/fixtures/monitor/fake_nvml.c" || fail "cannot build fake NVML"
export FAKE_NVML_LOG="$T/calls"
"$D" monitor --interval 100 --sources gpu --nvml-lib "$T/libfake_nvml.so" --json "$T/m.json" --jsonl "$T/m.jsonl" \
  --metrics-port 0 -- sh -c 'sleep 0.6; curl -s --max-time 5 -o "$0/metrics.txt" "$(grep -o "http://[0-9.:]*/metrics" "$0/err")"; sleep 0.6' "$T" \
  2>"$T/err"
rc=$?
cat "$T/err"
[ "$rc" = 0 ] || fail "exit $rc"
"$PY" - "$T" <<'PYEOF' || fail "GPU values wrong"
import json, sys
t = sys.argv[1]
mon = json.load(open(t + "/m.json"))["monitor"]
src = mon["sources"]["gpu"]
assert src["available"] is True and src["note"] == "0: Fake H100 0, 1: Fake H100 1", src
m = mon["total"]["metrics"]
def near(name, stat, want, tol):
    got = m[name][stat]
    assert abs(got - want) <= tol, (name, stat, got, want)
near("gpu.0.util_pct", "mean", 75, 0)
near("gpu.0.mem_used_bytes", "max", 10 * 2**30, 0)
near("gpu.1.mem_used_bytes", "max", 20 * 2**30, 0)
near("gpu.0.power_w", "mean", 250, 10)          # from the energy counter, not the 300 W instantaneous reading
near("gpu.1.power_w", "mean", 100, 0)           # no energy counter: the instantaneous power
near("gpu.0.sm_clock_mhz", "p50", 1980, 0)
near("gpu.0.mem_clock_mhz", "max", 2619, 0)
near("gpu.0.temp_celsius", "p95", 65, 0)
near("gpu.0.pcie_tx_bytes_per_s", "mean", 1000 * 1024, 0)
near("gpu.0.pcie_rx_bytes_per_s", "mean", 2000 * 1024, 0)
assert "gpu.1.pcie_tx_bytes_per_s" not in m     # not supported: no value at all
wall = mon["total"]["end_s"] - mon["total"]["start_s"]
near("gpu.0.power_w", "energy_j", 250 * wall, 0.05 * 250 * wall)
calls = dict((l.split()[0], [int(x) for x in l.split()[1:]]) for l in open(t + "/calls"))
assert calls["energy"][1] == 1 and calls["pcie"][1] == 1, calls   # "not supported" asked once
assert calls["energy"][0] == mon["samples"] + 1, (calls, mon["samples"])
lines = [json.loads(l) for l in open(t + "/m.jsonl")]
g1 = [l for l in lines if l["set"] == "gpu" and l["instance"] == "1"]
assert g1 and all(l["pcie_tx_bytes_per_s"] is None for l in g1)
print("ok: 2 fake GPUs, power %.1f W from energy, %d samples" % (m["gpu.0.power_w"]["mean"], mon["samples"]))
PYEOF
grep -q '^dlperf_gpu_power_watts{gpu="0"} 300$' "$T/metrics.txt" || fail "no GPU power in /metrics"
grep -q '^dlperf_gpu_utilization_ratio{gpu="0"} 0.75$' "$T/metrics.txt" || fail "no GPU utilization in /metrics"
grep -q '^dlperf_gpu_energy_joules_total{gpu="0"} ' "$T/metrics.txt" || fail "no GPU energy in /metrics"
grep -q '^dlperf_gpu_memory_used_bytes{gpu="1"} 21474836480$' "$T/metrics.txt" || fail "no GPU memory in /metrics"
grep -q '^dlperf_gpu_info{gpu="1",name="Fake H100 1",uuid="GPU-fake-1"} 1$' "$T/metrics.txt" || fail "no GPU info"
echo "ok: GPU metrics served"
if command -v promtool >/dev/null; then
  promtool check metrics <"$T/metrics.txt" || fail "promtool rejects the GPU metrics"
  echo "ok: promtool accepts them"
fi
