# Sourced by loadgen tests: start_fake_server ARGS... starts "$HELPER --serve-fake $T/port ARGS..." (the tests'
# fake-engine dlperf serve), removes it and $T on exit, waits for its port, and sets SPID and URL. A build without
# libmicrohttpd skips the test (exit 77); a server that does not start fails it.
start_fake_server() {
  "$HELPER" --serve-fake "$T/port" "$@" >"$T/server.json" 2>"$T/server.log" &
  SPID=$!
  trap 'kill -TERM "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null; rm -rf "$T"' EXIT
  for _ in $(seq 100); do
    [ -s "$T/port" ] && break
    if ! kill -0 "$SPID" 2>/dev/null; then
      wait "$SPID"
      [ $? = 77 ] && { echo "skip: this build has no libmicrohttpd"; exit 77; }
      break
    fi
    sleep 0.1
  done
  [ -s "$T/port" ] || { echo "FAIL: the test server did not start"; cat "$T/server.log"; exit 1; }
  URL="http://127.0.0.1:$(cat "$T/port")/v1/classify"
}
