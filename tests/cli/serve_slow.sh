#!/bin/bash
# `dlperf serve` under a slow-client flood, on 127.0.0.1: 300 connections (more than --max-conns 256) each
# trickling header lines (one every second: MHD's idle timeout never fires) and reconnecting whenever cut, for
# ~7 s. Meanwhile GET /healthz on fresh connections must answer within 2 s each time (it gets a slot by evicting the
# oldest header-phase connection), and no slow-header connection may live much past --header-timeout (2 s here).
# Then requests answered after the client half-closes (shutdown(SHUT_WR)): GET, chunked POST of a JPEG, chunked
# POST of a non-JPEG (400). Then --max-conns-per-ip: the 4th connection from one address is refused.
# tags: light
# timeout: 90
set -u
T="$DLPERF_TEST_TMP/serve_slow.$$"
mkdir -p "$T"
SPID=
cleanup() { [ -n "$SPID" ] && kill -TERM "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; [ -f "$T/server.log" ] && sort "$T/server.log" | uniq -c | sort -rn | head -8; exit 1; }
[ "$(ulimit -n)" -ge 1024 ] || ulimit -n 1024 2>/dev/null || { echo "skip: fewer than 1024 descriptors"; exit 77; }
"$DLPERF" data gen --out "$T/data" --classes 1 --per-class 1 --val-per-class 0 --size 40-40 --seed 1 --workers 1 \
  >/dev/null 2>&1 || fail "data gen"
JPEG=$(find "$T/data" -name '*.JPEG' | head -1)
[ -n "$JPEG" ] || fail "no JPEG generated"

start() {  # start ARGS...: the service with the small reference model, on a free port
  rm -f "$T/port"
  "$DLPERF" serve --model resnet-mini --device ref --size 32 --classes 10 --max-batch 1 --monitor-interval 0 \
    --port 0 --port-file "$T/port" "$@" >"$T/server.log" 2>&1 &
  SPID=$!
  for _ in $(seq 300); do
    [ -s "$T/port" ] && return 0
    kill -0 "$SPID" 2>/dev/null || break
    sleep 0.1
  done
  grep -q "libmicrohttpd" "$T/server.log" && { echo "skip: this build has no libmicrohttpd"; exit 77; }
  fail "the service did not start"
}
stop() { kill -TERM "$SPID"; wait "$SPID"; local rc=$?; SPID=; [ $rc = 0 ] || fail "the service exited $rc on SIGTERM"; }

start --header-timeout 2
"$PYTHON" - "$(cat "$T/port")" "$JPEG" <<'PY' || fail "slow-client flood"
import selectors, socket, sys, threading, time
port, jpeg = int(sys.argv[1]), open(sys.argv[2], "rb").read()
ADDR, N, DUR, HEADER_TIMEOUT = ("127.0.0.1", port), 300, 7.0, 2.0

def request(raw, half_close=False, timeout=5.0):
    """Sends raw on a fresh connection; returns (seconds to the whole answer, status, body)."""
    t0 = time.monotonic()
    s = socket.create_connection(ADDR, timeout=timeout)
    s.sendall(raw)
    if half_close:
        s.shutdown(socket.SHUT_WR)
    data = b""
    try:
        while True:
            hdr, sep, body = data.partition(b"\r\n\r\n")
            if sep and b"content-length:" in hdr.lower():
                cl = int(hdr.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                if len(body) >= cl:
                    break
            b = s.recv(65536)
            if not b:
                break
            data += b
    except OSError as e:
        data += b"<%s>" % str(e).encode()
    s.close()
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else 0
    return time.monotonic() - t0, status, data.partition(b"\r\n\r\n")[2] if status else data

# the flood: N connections sending a header line every second, reconnecting when cut
sel = selectors.DefaultSelector()
conns = {}  # socket -> [opened, last line]
lifetimes, opened_total, peak = [], 0, 0
def open_one():
    global opened_total
    s = socket.socket()
    s.setblocking(False)
    try:
        s.connect(ADDR)
    except BlockingIOError:
        pass
    now = time.monotonic()
    conns[s] = [now, now - 1.0]
    sel.register(s, selectors.EVENT_READ)
    opened_total += 1
probes = []
def prober():
    time.sleep(1.5)  # the flood is at full size by then
    while time.monotonic() < t_end - 0.5:
        try:
            probes.append(request(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", timeout=5.0)[:2])
        except OSError as e:
            probes.append((99.0, str(e)))
        time.sleep(0.4)
t_start = time.monotonic()
t_end = t_start + DUR
th = threading.Thread(target=prober)
th.start()
while time.monotonic() < t_end:
    while len(conns) < N:
        open_one()
    peak = max(peak, len(conns))
    for key, _ in sel.select(timeout=0.05):
        s = key.fileobj
        try:
            gone = s.recv(4096) == b""
        except (BlockingIOError, InterruptedError):
            gone = False
        except OSError:
            gone = True
        if gone:
            lifetimes.append(time.monotonic() - conns.pop(s)[0])
            sel.unregister(s)
            s.close()
    now = time.monotonic()
    for s, st in list(conns.items()):
        if now - st[1] >= 1.0:
            st[1] = now
            try:
                s.send(b"GET /slow HTTP/1.1\r\n" if now - st[0] < 0.5 else b"X-Slow: 1\r\n")
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                lifetimes.append(now - conns.pop(s)[0])
                sel.unregister(s)
                s.close()
th.join()
still_open = [time.monotonic() - st[0] for st in conns.values()]
for s in list(conns):
    s.close()
worst = max(probes, key=lambda p: p[0]) if probes else None
print(f"flood: {opened_total} slow connections opened (up to {peak} at once), {len(lifetimes)} cut, longest cut "
      f"after {max(lifetimes, default=0):.2f} s, longest still open {max(still_open, default=0):.2f} s; "
      f"/healthz: {len(probes)} probes, statuses {sorted(set(p[1] for p in probes))}, slowest {worst[0]:.3f} s")
assert len(probes) >= 5, "too few probes ran"
assert all(p[1] == 200 for p in probes), f"a /healthz probe was not answered 200: {probes}"
assert worst[0] < 2.0, f"/healthz took {worst[0]:.2f} s under the flood"
assert lifetimes, "no slow connection was cut"
slack = 2.0  # the reaper's period and a busy shared machine
assert max(lifetimes + still_open) < HEADER_TIMEOUT + slack, "a slow-header connection outlived --header-timeout"

# answers after the client half-closed its side
dt, st, body = request(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", half_close=True)
assert st == 200, f"half-closed GET /healthz: {st}"
chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(jpeg), jpeg)
for _ in range(5):
    dt, st, body = request(b"POST /v1/classify HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked,
                           half_close=True)
    assert st == 200 and b'"top' in body, f"half-closed chunked JPEG POST: {st} {body[:200]}"
dt, st, body = request(b"POST /v1/classify HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                       b"4\r\nabcd\r\n0\r\n\r\n", half_close=True)
assert st == 400, f"half-closed chunked non-JPEG POST: {st}"
print("half-close: GET 200, chunked JPEG 200 (5 of 5), chunked non-JPEG 400")
PY
stop

# --max-conns-per-ip 3: three idle connections held, a fourth from the same address is closed unanswered
start --max-conns-per-ip 3
"$PYTHON" - "$(cat "$T/port")" <<'PY' || fail "--max-conns-per-ip"
import socket, sys, time
addr = ("127.0.0.1", int(sys.argv[1]))
held = [socket.create_connection(addr) for _ in range(3)]
time.sleep(0.3)
s = socket.create_connection(addr, timeout=5)
try:
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    got = s.recv(100)
except OSError:
    got = b""
assert not got.startswith(b"HTTP/1.1 200"), f"a 4th connection was answered: {got!r}"
for h in held:
    h.close()
time.sleep(0.3)
s = socket.create_connection(addr, timeout=5)
s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
assert s.recv(100).startswith(b"HTTP/1.1 200"), "no answer once the held connections closed"
print("per-ip: 4th connection refused, answered again once the 3 closed")
PY
stop
echo PASS
