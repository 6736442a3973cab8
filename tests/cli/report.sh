#!/bin/bash
# The evaluation report (report.html) rendered in headless Chromium: `dlperf run` writes it into a real tiny run's
# directory; `dlperf report` writes it again from the saved results, for the run with every section, for a copy with
# gaps (no monitor series, a failed inference stage, no catalog prediction), for both side by side, and without
# the chart library. Each page: no console or script errors, every chart's canvas drawn (the page's own self-check,
# read from the DOM Chromium dumps), every number in a table equal to the run directory's JSON, every gap stated;
# a screenshot of the full and the gaps page kept under the test's log directory.
# tags: asan
# timeout: 300
set -u
D=${DLPERF:-build/dlperf}
PY=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d "${DLPERF_TEST_TMP:-/tmp}/report-sh.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
CHROME=$(command -v chromium || command -v chromium-browser || true)
[ -n "$CHROME" ] || { echo "skip: no chromium (scripts/setup.sh test installs Debian's chromium)"; exit 77; }
[ -r /usr/share/javascript/chart.js/chart.min.js ] || { echo "skip: no libjs-chart.js (scripts/setup.sh installs it)"; exit 77; }
LOGS=${DLPERF_TEST_LOGDIR:-${DLPERF_TEST_TMP:-/tmp}}/report-sh
mkdir -p "$LOGS"

# page -> $T/<name>.dom (the DOM after the scripts ran) and $T/<name>.err (console lines); optional screenshot
render() {  # file name [screenshot.png]: one Chromium run dumps the DOM and takes the screenshot
  local shot=()
  [ $# -ge 3 ] && shot=(--hide-scrollbars --window-size=1200,10000 "--screenshot=$3")
  timeout 90 "$CHROME" --headless=new --no-sandbox --disable-gpu --no-first-run --disable-extensions \
    --user-data-dir="$T/chrome-$2" --enable-logging=stderr --v=0 --virtual-time-budget=5000 "${shot[@]}" \
    --dump-dom "file://$1" >"$T/$2.dom" 2>"$T/$2.err" || fail "chromium could not render $1 ($(tail -2 "$T/$2.err"))"
  [ $# -lt 3 ] || [ -s "$3" ] || fail "no screenshot $3"
}
# the page's self-check and its tables against the run directories' JSON
check() {  # name mode(full|gaps|nochart|multi) rundir...
  "$PY" - "$T/$1.dom" "$T/$1.err" "$@" <<'PY' || fail "the $2 page ($1)"
import html, json, math, os, re, sys
dom, err, name, mode = sys.argv[1:5]
dirs = sys.argv[5:]
text = open(dom, encoding="utf-8").read()
text = re.sub(r"<script\b.*?</script>", "", text, flags=re.S)  # what the page shows, not its source
# console errors: Chromium prints the page's console messages and uncaught exceptions with "CONSOLE"
console = [l for l in open(err, errors="replace") if "CONSOLE" in l or "Uncaught" in l]
assert not console, "console messages:\n" + "".join(console[:10])
m = re.search(r'<pre id="selfcheck"[^>]*>(.*?)</pre>', text, re.S)
assert m and m.group(1).strip(), "no self-check in the page (its script did not run)"
sc = json.loads(html.unescape(m.group(1)))
assert sc["errors"] == [], sc["errors"]
assert sc["empty"] == [], "charts drawn empty: %s" % sc["empty"]
assert sc["charts"] == sc["charts_expected"], sc
if mode == "nochart":
    assert sc["charts"] == 0 and not sc["chartjs"], sc
    assert "charts unavailable: install libjs-chart.js" in text
else:
    assert sc["chartjs"] and sc["charts"] >= (10 if mode != "gaps" else 5), sc
# every figure shown in a table equals the saved JSON (to the digits shown)
files = {}
def saved(ri, f):
    if (ri, f) not in files:
        files[ri, f] = json.load(open(os.path.join(dirs[ri], f + ".json")))
    return files[ri, f]
def at(o, path):
    for k in path.split("."):
        o = o[int(k)] if isinstance(o, list) else o[k]
    return o
cells = re.findall(r'<td data-k="([^"]*)">([^<]*)</td>', text)
assert len(cells) == sc["cells"] and len(cells) >= (40 if mode != "gaps" else 15), (len(cells), sc["cells"])
keys = set()
for k, shown in cells:
    ri, f, path, scale = k.split("|")
    v = at(saved(int(ri), f), path) * float(scale)
    s = float(shown)
    tol = abs(v) * 0.006 if "e" in shown else 0.51 * 10 ** -(len(shown.split(".")[1]) if "." in shown else 0)
    assert abs(s - v) <= tol + 1e-12, "%s shows %s, the file has %r" % (k, shown, v)
    keys.add((int(ri), f, path))
run = saved(0, "run")
want = ["summary.train_img_per_s", "summary.prep_img_per_s", "summary.usd_per_million_train_images"]
if mode != "gaps":
    want += ["summary.infer_img_per_s", "summary.latency_p50_ms", "summary.latency_p99_ms"]
for w in want:
    assert (0, "run", w) in keys, "run.json's %s is not in a table" % w
if mode in ("full", "nochart"):  # the online phase per precision (dlperf run --online-precisions): int8 beside the rest
    oc = run["summary"]["online_cost"]["precisions"]
    assert [e["precision"] for e in oc if e["served"]] == [run["infer_precision"]], oc
    assert [e["precision"] for e in oc] == [run["infer_precision"], "int8"], oc  # --online-precisions int8
    for k, e in enumerate(oc):
        for f in ("img_per_s", "usd_per_million_images"):
            assert (0, "run", "summary.online_cost.precisions.%d.%s" % (k, f)) in keys, "online_cost %s %s not in a table" % (e["precision"], f)
    assert "Cost per million images by precision (the online phase)" in text
if mode == "full":
    for sec in ("The machine", "The input pipeline", "Training", "The hardware over time", "The online phase",
                "beside the catalog", "Verdict", "CPU busy by mode", "Phase breakdown", "GFLOP/s achieved",
                "Training throughput and data-wait share", "Latency percentiles", "Time to train"):
        assert sec in text, "no section or chart '%s'" % sec
if mode == "gaps":
    for g in ("Cost per million images by precision: not measured", "no monitor series", "the stage failed (exit status 1)", "the stage was not run", "not measured", "Predicted vs measured on this machine: these runs hold no prediction"):
        assert g in text, "the gap '%s' is not stated" % g
    assert "Inference throughput over batch size" not in text, "a chart for the failed stage"
if mode == "multi":
    assert re.search(r'<td class="ratio">[0-9.]+x</td>', text), "no ratio column"
    assert text.count('class="runblock"') == len(dirs) + 1  # the runs overlaid, then one block per run
    assert "(runs overlaid)" in text
    assert "Predicted vs measured on this machine: r1 (dlperf validate; MAPE 12.50%)" in text
    assert '"0|validate|rows.1.measured_img_per_s|1">9.50<' in text
    assert "LoadGen SingleStream latency: r1" in text and "0|loadgen|result.latency_ms.p90|1" in text
print("ok: %s page: %d charts drawn, %d table figures equal to the saved JSON, %d gaps stated" % (
    mode, sc["charts"], len(cells), sc["gaps"]))
PY
}

$D data gen --out "$T/syn" --classes 4 --per-class 8 --val-per-class 4 --size 40-90 --seed 2 >/dev/null 2>&1 || fail "data gen"
$D run --data "$T/syn" --model resnet18 --size 32 --batch 4 --threads 1 --workers 1 --train-seconds 1 \
  --infer-seconds 0.1 --infer-batch 1,4 --bench-images 16 --compare desktop-4090,dgx-a100 --usd-per-hour 1.5 --online-precisions int8 \
  --out "$T/r1" >"$T/run.out" 2>"$T/run.err" || { tail -20 "$T/run.err"; fail "dlperf run"; }
[ -s "$T/r1/report.html" ] || fail "dlperf run wrote no report.html"
grep -q "^report: $T/r1/report.html" "$T/run.out" || fail "dlperf run does not say where the report is"
render "$T/r1/report.html" full "$LOGS/report-full.png"
check full full "$T/r1"

# written again from the saved results, quickly, with the same content
mv "$T/r1/report.html" "$T/r1/report-run.html"
t0=$(date +%s.%N)
$D report "$T/r1" >"$T/rep.out" 2>&1 || fail "dlperf report: $(cat "$T/rep.out")"
dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
awk -v d="$dt" 'BEGIN { exit !(d < 2) }' || fail "dlperf report took $dt s (limit 2 s)"
grep -q "report: $T/r1/report.html written" "$T/rep.out" || fail "dlperf report's line: $(cat "$T/rep.out")"
sz=$(stat -c %s "$T/r1/report.html")
[ "$sz" -lt 2000000 ] || fail "the page is $sz bytes (limit 2 MB)"
# the same page but for the creation time
cmp -s <(sed 's/"created":"[^"]*"//g' "$T/r1/report-run.html") <(sed 's/"created":"[^"]*"//g' "$T/r1/report.html") ||
  fail "the page written again differs from the one dlperf run wrote"
echo "ok: dlperf report wrote it again in $dt s ($sz bytes)"

# gaps: no monitor series, the inference stage failed, no catalog prediction
cp -r "$T/r1" "$T/gaps"
rm -f "$T/gaps"/*-monitor.csv "$T/gaps/infer.json" "$T/gaps/predict.json" "$T/gaps/report.html"
"$PY" - "$T/gaps/run.json" <<'PY' || fail "editing the gaps run"
import json, sys
r = json.load(open(sys.argv[1]))
r["stages"]["infer"]["exit_status"] = 1
r["stages"]["infer"].pop("result", None)
r["stages"]["predict"] = {"exit_status": -1, "ran": False, "seconds": None}
for k in ("infer_img_per_s", "latency_p50_ms", "latency_p99_ms", "usd_per_million_inferences", "compare", "online_cost"):
    r["summary"].pop(k, None)
json.dump(r, open(sys.argv[1], "w"))
PY
$D report "$T/gaps" >/dev/null || fail "dlperf report of the gaps run"
render "$T/gaps/report.html" gaps "$LOGS/report-gaps.png"
check gaps gaps "$T/gaps"

# side by side; the first run also holds a dlperf validate result (made up: a test input) for predicted vs measured
cat >"$T/r1/validate.json" <<'JSON'
{"schema": "dlperf.validate/1", "mape": 0.125, "rows": [
 {"config": "cpu b4 w1", "ok": true, "predicted_img_per_s": 9.5, "measured_img_per_s": 8.25, "ape": 0.1515,
  "predicted_bottleneck": "compute", "observed_regime": "compute-bound"},
 {"config": "cpu b4 w2", "ok": true, "predicted_img_per_s": 10.25, "measured_img_per_s": 9.5, "ape": 0.0789,
  "predicted_bottleneck": "compute", "observed_regime": "compute-bound"}]}
JSON
# and a real LoadGen SingleStream run on the same model (a short one: INVALID by MLPerf's rules, exit status 3)
$D loadgen --sut local --scenario SingleStream --data "$T/syn" --model resnet18 --size 32 --threads 1 --samples 8 \
  --min-duration 0.5 --min-queries 8 --max-batch 1 --json "$T/r1/loadgen.json" >"$T/lg.out" 2>&1
rc=$?; [ $rc -eq 0 ] || [ $rc -eq 3 ] || { tail -5 "$T/lg.out"; fail "dlperf loadgen exited $rc"; }
$D report "$T/r1" "$T/gaps" --out "$T/both.html" >/dev/null || fail "dlperf report of two runs"
render "$T/both.html" multi
check multi multi "$T/r1" "$T/gaps"

# no chart library: the page still writes, with its tables and the reason
out=$(DLPERF_CHARTJS=$T/no-chart.js $D report "$T/r1" --out "$T/nochart.html") || fail "dlperf report without the chart library"
echo "$out" | grep -qF "charts unavailable" || fail "no 'charts unavailable' line: $out"
render "$T/nochart.html" nochart
check nochart nochart "$T/r1"

# refusals
out=$($D report "$T/nowhere" 2>&1); [ $? -ne 0 ] && echo "$out" | grep -qF "$T/nowhere" || fail "a missing directory: $out"
out=$($D report "$T/syn" 2>&1); [ $? -ne 0 ] && echo "$out" | grep -qF "no run.json" || fail "not a run directory: $out"
out=$($D report 2>&1); [ $? -eq 2 ] || fail "no argument: $out"
echo "ok: refusals; screenshots in $LOGS"
