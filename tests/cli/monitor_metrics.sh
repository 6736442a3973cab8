#!/bin/bash
# /metrics over HTTP while `dlperf monitor` runs a command: fetched with curl on loopback (bounded time), checked
# by `promtool check metrics` (Debian's prometheus package), and only GET /metrics is served (405 / 404).
# tags: asan light
# timeout: 120
set -u
D=${DLPERF:?} T=${DLPERF_TEST_TMP:-/tmp}/monmetrics.$$
mkdir -p "$T"
pid=""
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v curl >/dev/null || { echo "skipped: curl not installed"; exit 77; }

"$D" monitor -q --interval 100 --metrics-port 0 -- sleep 4 2>"$T/err" &
pid=$!
port=""
for _ in $(seq 50); do  # the server prints its address once it listens
  port=$(grep -so 'serving http://127.0.0.1:[0-9]*/metrics' "$T/err" | sed 's/.*:\([0-9]*\)\/metrics/\1/')
  [ -n "$port" ] && break
  grep -q "without libmicrohttpd" "$T/err" && { echo "skipped: dlperf built without libmicrohttpd"; exit 77; }
  kill -0 $pid 2>/dev/null || { cat "$T/err"; fail "dlperf monitor exited early"; }
  sleep 0.1
done
[ -n "$port" ] || { cat "$T/err"; fail "no /metrics address printed"; }
sleep 0.5
url="http://127.0.0.1:$port/metrics"
code=$(curl -s --max-time 5 -o "$T/metrics.txt" -D "$T/headers" -w '%{http_code}' "$url") || fail "curl $url failed"
[ "$code" = 200 ] || fail "GET /metrics: HTTP $code"
grep -qi '^content-type: text/plain; version=0.0.4' "$T/headers" || { cat "$T/headers"; fail "wrong content type"; }
echo "ok: GET $url: $(wc -l <"$T/metrics.txt") lines"
for name in 'dlperf_cpu_seconds_total{cpu="0",mode="user"}' dlperf_memory_available_bytes \
            dlperf_network_receive_bytes_total dlperf_process_cpu_seconds_total dlperf_process_resident_memory_bytes \
            dlperf_images_processed_total dlperf_data_wait_seconds_total 'dlperf_build_info{version="' \
            dlperf_monitor_cpu_seconds_total 'dlperf_phase_info{phase="command"} 1'; do
  grep -qF "$name" "$T/metrics.txt" || fail "no $name in /metrics"
done
grep -q 'dlperf_network_receive_bytes_total{device="' "$T/metrics.txt" || fail "network metrics lack node_exporter's device label"
grep -q 'dlperf_requests_total' "$T/metrics.txt" && fail "dlperf_requests_total is back (dlperf_serve_requests_total{code} counts requests)"
grep -q '^dlperf_processes 1$' "$T/metrics.txt" || fail "the monitored tree (sleep) is not one process"
code=$(curl -s --max-time 5 -o /dev/null -w '%{http_code}' -X POST "$url"); [ "$code" = 405 ] || fail "POST: HTTP $code"
code=$(curl -s --max-time 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/"); [ "$code" = 404 ] || fail "GET /: HTTP $code"
echo "ok: POST -> 405, GET / -> 404"
wait $pid; rc=$?; pid=""
[ "$rc" = 0 ] || { cat "$T/err"; fail "dlperf monitor exited $rc"; }
if ! command -v promtool >/dev/null; then
  echo "skipped: promtool not installed (Debian package prometheus); the fetch itself passed"
  exit 77
fi
promtool check metrics <"$T/metrics.txt" >"$T/lint" 2>&1; rc=$?
cat "$T/lint"
[ "$rc" = 0 ] || fail "promtool check metrics rejected /metrics"
echo "ok: promtool check metrics accepts /metrics"
