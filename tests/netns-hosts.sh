#!/bin/bash
# Emulated hosts on one machine: N network namespaces (dlpn-h0 .. dlpn-h<N-1>, each with its own host name through a
# UTS namespace at exec time) joined by veth pairs (MTU 9000) through a bridge that lives in a namespace of its own
# (dlpn-sw), so nothing in the caller's namespace changes. Every link is shaped in both directions with tc: a token
# bucket (tbf, the rate) with netem under it (the one-way delay; a kernel built without sch_netem, as this
# development machine's, gets the rate alone and the script says so: the delay is then the veth's own, ~20 us round
# trip). Open MPI starts ranks in the namespaces through an agent this script writes (DIR/agent, its plm_rsh_agent:
# `ip netns exec dlpn-hI unshare --uts sh -c ...`, which gives up like ssh's ServerAlive when the host's link has been
# down for DLPN_ALIVE_S seconds, 15 by default), with the TCP BTL on the veths only (`--mca btl tcp,self`: no shared
# memory between "hosts"). Needs root (ip netns, veth, bridge, tc). docs/scale-out.md has the why of each option.
#
#   tests/netns-hosts.sh run N [--rate 1gbit] [--delay 0.1ms] [--mtu 9000] [--pml ob1|ucx] [--dir DIR] -- COMMAND...
#       makes the hosts, runs COMMAND (in the caller's namespace) with these variables set, then tears everything
#       down (trap on EXIT/INT/TERM), and exits with COMMAND's status:
#         DLPN_DIR       the directory holding hostfile, hosts, agent and mpirun
#         DLPN_HOSTFILE  Open MPI hostfile ("dlpn-h0 slots=1" per host; /etc/netns/dlpn-hI/hosts resolves the names)
#         DLPN_MPIRUN    a script that runs mpirun on host 0 (the head node) with the options for this network:
#                        the agent, btl tcp,self and oob on veth0; add -np N --hostfile "$DLPN_HOSTFILE" PROGRAM.
#                        --pml ucx: Open MPI's UCX messaging layer instead of ob1 + the TCP BTL, on its tcp transport
#                        over veth0 (UCX_TLS=tcp,self: still no shared memory between hosts)
#         DLPN_RTT_MS    measured round trip (TCP connect) host 0 -> host N-1 (ms)
#         DLPN_NS_PREFIX dlpn-h (host I is ${DLPN_NS_PREFIX}I, its address 10.77.0.<I+1>, its interface veth0)
#   tests/netns-hosts.sh tcp [BYTES] (as the COMMAND of run) the links' own goodput: every host sends BYTES (1e9) to
#       the next over one TCP connection while it receives from the one before (the ring's pattern), each in its
#       namespace; prints each host's Gbit/s out and in, its CPU time, and the machine's busy CPU and load meanwhile
#   tests/netns-hosts.sh ring [BYTES] [SEG] (as the COMMAND of run) a ring allreduce of BYTES (64 MiB) of floats over
#       plain TCP sockets, no MPI (tests/netns-ring.c, compiled here with cc): both directions of every link at once,
#       SEG-byte (1 MiB) segments pipelined, the reduction included; prints each host's busbw and reduction time
#   tests/netns-hosts.sh check     exit 0 if namespaces can be made here, else 77 with the reason on stdout
#   tests/netns-hosts.sh down      removes every dlpn-* namespace left behind (e.g. after kill -9 of a run)
#
# Faults from COMMAND: `ip netns exec dlpn-h1 ip link set veth0 down` takes host 1 off the network.
set -u
PREFIX=dlpn-h
SW=dlpn-sw
BR=br0
NET=10.77.0

die() { echo "netns-hosts: $*" >&2; exit 2; }

check() {
  [ "$(id -u)" = 0 ] || { echo "skipped: not root (ip netns needs CAP_SYS_ADMIN)"; return 77; }
  command -v ip >/dev/null && command -v tc >/dev/null || { echo "skipped: ip or tc (iproute2) missing"; return 77; }
  command -v unshare >/dev/null || { echo "skipped: unshare (util-linux) missing"; return 77; }
  local probe=dlpn-probe$$
  ip netns add "$probe" 2>/dev/null || { echo "skipped: cannot create a network namespace here"; return 77; }
  local ok=1 why=""
  ip netns exec "$probe" ip link add dlpn-a type veth peer name dlpn-b 2>/dev/null || { ok=0; why="veth"; }
  [ $ok = 1 ] && { ip netns exec "$probe" ip link add "$BR" type bridge 2>/dev/null || { ok=0; why="bridge"; }; }
  [ $ok = 1 ] && { ip netns exec "$probe" ip link set dlpn-a up 2>/dev/null &&
    ip netns exec "$probe" tc qdisc add dev dlpn-a root handle 1: tbf rate 1gbit burst 256k latency 20ms 2>/dev/null \
    || { ok=0; why="tc tbf"; }; }
  ip netns del "$probe" 2>/dev/null
  [ $ok = 1 ] || { echo "skipped: no $why in network namespaces here (kernel module missing?)"; return 77; }
  return 0
}

down() {
  local ns pid
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^(${PREFIX}[0-9]+|${SW})$"); do
    # processes still in it (an orted cut off from mpirun): ended by id, then the namespace, which deletes its ends
    # of the veth pairs and their peers
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
    rm -rf "/etc/netns/$ns"
  done
  rmdir /etc/netns 2>/dev/null  # only when empty (nobody else's namespaces keep files there)
  return 0
}

# tbf for the rate with netem under it for the delay, on the egress of one interface inside a namespace
shape() {  # ns dev rate delay
  local ns=$1 dev=$2 rate=$3 delay=$4 bits burst
  bits=$(rate_bits "$rate") || die "--rate $rate: expected e.g. 1gbit, 10gbit, 500mbit"
  burst=$((bits / 8 / 1000))  # one millisecond at the rate, at least 64 KiB (a GSO packet)
  [ "$burst" -ge 65536 ] || burst=65536
  ip netns exec "$ns" tc qdisc add dev "$dev" root handle 1: tbf rate "$rate" burst "$burst" latency 50ms || return 1
  [ "$delay" = 0 ] && return 0
  ip netns exec "$ns" tc qdisc add dev "$dev" parent 1:1 handle 10: netem delay "$delay" limit 100000 2>/dev/null && return 0
  NO_NETEM=1  # a kernel without sch_netem (CONFIG_NET_SCH_NETEM off): the rate is shaped, the delay is the veth's
}

# The round trip host 0 -> ADDR in ms: the median time of a TCP connect to a closed port (the RST comes back at
# once; no ping needed). Fails if the host does not answer.
rtt_ms() {
  ip netns exec "${PREFIX}0" python3 - "$1" <<'PY'
import socket, sys, time
ts = []
for _ in range(9):
    s = socket.socket(); s.settimeout(2); t = time.perf_counter()
    try:
        s.connect((sys.argv[1], 9))
    except ConnectionRefusedError:
        ts.append(time.perf_counter() - t)
    except OSError:
        pass
    s.close()
if len(ts) < 5: sys.exit(1)
print("%.3f" % (sorted(ts)[len(ts) // 2] * 1e3))
PY
}

rate_bits() {
  case "$1" in
    *[0-9]gbit) echo $(( ${1%gbit} * 1000000000 )) ;;
    *[0-9]mbit) echo $(( ${1%mbit} * 1000000 )) ;;
    *) return 1 ;;
  esac
}

up() {  # n rate delay dir
  local n=$1 rate=$2 delay=$3 dir=$4 i ns
  down
  ip netns add "$SW" || return 1
  ip netns exec "$SW" ip link add "$BR" type bridge || return 1
  ip netns exec "$SW" ip link set "$BR" up || return 1
  ip netns exec "$SW" ip link set lo up
  : >"$dir/hostfile"
  : >"$dir/hosts"
  for ((i = 0; i < n; i++)); do
    ns=$PREFIX$i
    ip netns add "$ns" || return 1
    ip netns exec "$ns" ip link set lo up
    # the pair is made inside the host's namespace, its switch end then moved to the switch namespace
    ip netns exec "$ns" ip link add veth0 type veth peer name "p$i" || return 1
    ip netns exec "$ns" ip link set "p$i" netns "$SW" || return 1
    ip netns exec "$ns" ip addr add "$NET.$((i + 1))/24" dev veth0 || return 1
    ip netns exec "$ns" ip link set veth0 mtu "$MTU" up || return 1
    ip netns exec "$SW" ip link set "p$i" master "$BR" || return 1
    ip netns exec "$SW" ip link set "p$i" mtu "$MTU" up || return 1
    shape "$ns" veth0 "$rate" "$delay" || return 1   # host -> switch
    shape "$SW" "p$i" "$rate" "$delay" || return 1   # switch -> host
    echo "$ns slots=1" >>"$dir/hostfile"
    echo "$NET.$((i + 1)) $ns" >>"$dir/hosts"
  done
  # host names: `ip netns exec NS` mounts /etc/netns/NS/hosts over /etc/hosts, so every host resolves the others
  for ((i = 0; i < n; i++)); do
    mkdir -p "/etc/netns/$PREFIX$i" || return 1
    { printf '127.0.0.1 localhost\n'; cat "$dir/hosts"; } >"/etc/netns/$PREFIX$i/hosts"
  done
  # the agent: Open MPI calls it as `agent HOST COMMAND...` (HOST as the hostfile names it); not named rsh, for which
  # Open MPI would daemonize the remote orted
  cat >"$dir/agent" <<EOF
#!/bin/sh
# Open MPI's rsh agent for the emulated hosts: runs the command in the host's network namespace, with its own
# hostname (a UTS namespace), as ssh would on a real node. Like ssh -o ServerAliveInterval=1 -o
# ServerAliveCountMax=\${DLPN_ALIVE_S:-15}, it gives up when the host has been off the network (its veth0 not up)
# for that many seconds: the host's processes end, as with a node that lost its link, and mpirun sees the daemon go.
host=\$1; shift
ns=\$(awk -v h="\$host" '\$1 == h || \$2 == h { print \$2; exit }' "$dir/hosts")
[ -n "\$ns" ] || { echo "agent: unknown emulated host \$host" >&2; exit 255; }
ip netns exec "\$ns" unshare --uts /bin/sh -c "hostname \$ns; \$*" &
pid=\$!
off=0
while kill -0 \$pid 2>/dev/null; do
  if [ "\$(ip netns exec "\$ns" cat /sys/class/net/veth0/operstate 2>/dev/null)" = up ]; then off=0; else off=\$((off + 1)); fi
  if [ \$off -ge \${DLPN_ALIVE_S:-15} ]; then
    ranks=""
    for p in \$(ip netns pids "\$ns"); do
      r=\$(tr '\\0' '\\n' </proc/\$p/environ 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
      [ -n "\$r" ] && ranks="\$ranks rank \$r (pid \$p)"
    done
    echo "agent: host \$ns: no link for \$off s: connection to the node lost; its MPI processes end:\${ranks:- none}" >&2
    for p in \$(ip netns pids "\$ns"); do kill -9 \$p 2>/dev/null; done
    exit 255
  fi
  sleep 1
done
wait \$pid
EOF
  chmod +x "$dir/agent"
  # every host reaches every other through the bridge
  for ((i = 1; i < n; i++)); do
    rtt_ms "$NET.$((i + 1))" >/dev/null || { echo "netns-hosts: host $i unreachable from host 0" >&2; return 1; }
  done
}

# A plain TCP ring between the hosts of a run (see `tcp` above): what the shaped links carry without MPI
tcp_ring() {  # bytes
  [ -n "${DLPN_HOSTFILE:-}" ] || die "tcp: run it as the COMMAND of 'run N ... --'"
  local n i s0 s1
  n=$(wc -l <"$DLPN_HOSTFILE")
  s0=$(awk '/^cpu /{print $2+$3+$4+$6+$7+$8, $5}' /proc/stat)
  for ((i = 0; i < n; i++)); do
    ip netns exec "$PREFIX$i" python3 - "$i" "$n" "$1" "$NET" <<'PY' &
import resource, socket, sys, threading, time
i, n, nbytes, net = int(sys.argv[1]), int(sys.argv[2]), int(float(sys.argv[3])), sys.argv[4]
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); ls.bind(("", 5999)); ls.listen(1)
out = socket.socket()
for _ in range(200):
    try:
        out.connect(("%s.%d" % (net, (i + 1) % n + 1), 5999)); break
    except OSError:
        time.sleep(0.05)
inc, _ = ls.accept()
res = {}
def rx():
    got, t0, buf = 0, time.perf_counter(), memoryview(bytearray(1 << 20))
    while got < nbytes:
        k = inc.recv_into(buf)
        if not k: break
        got += k
    res["in"] = got / (time.perf_counter() - t0)
def tx():
    sent, t0, chunk = 0, time.perf_counter(), bytes(1 << 20)
    while sent < nbytes:
        out.sendall(chunk); sent += len(chunk)
    res["out"] = sent / (time.perf_counter() - t0)
c0, w0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
th = [threading.Thread(target=f) for f in (rx, tx)]
[t.start() for t in th]; [t.join() for t in th]
c1 = resource.getrusage(resource.RUSAGE_SELF)
cpu = c1.ru_utime - c0.ru_utime + c1.ru_stime - c0.ru_stime
print("tcp: host %d: out %.3f Gbit/s, in %.3f Gbit/s, %.2f s wall, %.2f s cpu" % (i, res["out"] * 8e-9, res["in"] * 8e-9,
      time.perf_counter() - w0, cpu))
PY
  done
  wait
  s1=$(awk '/^cpu /{print $2+$3+$4+$6+$7+$8, $5}' /proc/stat)
  echo "$s0 $s1" | awk -v l="$(cut -d' ' -f1-3 /proc/loadavg)" '{ b = $3 - $1; i = $4 - $2;
    printf "tcp: the machine meanwhile: %.0f%% of its cores busy, load average %s\n", 100 * b / (b + i + 1e-9), l }'
}

# The plain-socket ring allreduce (tests/netns-ring.c) between the hosts of a run (see `ring` above)
sock_ring() {  # bytes seg
  [ -n "${DLPN_HOSTFILE:-}" ] || die "ring: run it as the COMMAND of 'run N ... --'"
  local n i src bin rc=0
  n=$(wc -l <"$DLPN_HOSTFILE")
  src=$(dirname "$0")/netns-ring.c bin=$DLPN_DIR/netns-ring
  [ -x "$bin" ] || ${CC:-cc} -std=c11 -O2 -march=native -Wall -o "$bin" "$src" -pthread || die "ring: cannot compile $src"
  for ((i = 0; i < n; i++)); do
    ip netns exec "$PREFIX$i" "$bin" "$i" "$n" "$NET" "$1" "$2" "${DLPN_RING_ITERS:-6}" &
  done
  for ((i = 0; i < n; i++)); do wait -n || rc=1; done
  return $rc
}

case "${1:-}" in
  check) check; exit $? ;;
  ring) sock_ring "${2:-67108864}" "${3:-1048576}"; exit $? ;;
  tcp) tcp_ring "${2:-1e9}"; exit 0 ;;
  down) down; exit 0 ;;
  run) ;;
  *) sed -n '2,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
shift
N=${1:-}
case "$N" in '' | *[!0-9]*) die "run N: expected a host count, got '${N}'" ;; esac
[ "$N" -ge 1 ] && [ "$N" -le 64 ] || die "run $N: 1 to 64 hosts"
shift
RATE=1gbit DELAY=0.1ms DIR="" MTU=9000 PML=ob1
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) RATE=$2; shift 2 ;;
    --delay) DELAY=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    --mtu) MTU=$2; shift 2 ;;
    --pml) PML=$2; shift 2 ;;
    --) shift; break ;;
    *) die "unknown option $1 (expected --rate, --delay, --mtu, --pml, --dir, then -- COMMAND)" ;;
  esac
done
[ $# -gt 0 ] || die "no command after --"
rate_bits "$RATE" >/dev/null || die "--rate $RATE: expected e.g. 1gbit, 10gbit, 500mbit"
# ob1: Open MPI's own messaging layer over the TCP BTL; ucx: UCX's (its tcp transport; Open MPI 4.1 leaves pml ucx out
# unless told that transports other than InfiniBand's may carry it: pml_ucx_tls/devices any)
case "$PML" in
  ob1) PML_ARGS="--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include veth0" ;;
  ucx) PML_ARGS="--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any --mca osc ^ucx --mca btl tcp,self --mca btl_tcp_if_include veth0 -x UCX_TLS=tcp,self -x UCX_NET_DEVICES=veth0" ;;
  *) die "--pml $PML: ob1 or ucx" ;;
esac
check >/dev/null || { check; exit 77; }
OWN_DIR=0
if [ -z "$DIR" ]; then DIR=$(mktemp -d "${TMPDIR:-/tmp}/dlpn.XXXXXX"); OWN_DIR=1; fi
mkdir -p "$DIR"
cleanup() { down; [ $OWN_DIR = 1 ] && rm -rf "$DIR"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
up "$N" "$RATE" "$DELAY" "$DIR" || die "could not make the $N emulated hosts"
export DLPN_DIR=$DIR DLPN_HOSTFILE=$DIR/hostfile DLPN_NS_PREFIX=$PREFIX
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# plm_rsh_agent: our wrapper; btl tcp,self on veth0 only (no shared memory, no loopback shortcut between hosts);
# the out-of-band channel on veth0 too; a peer that stops answering ends the job instead of hanging it.
cat >"$DIR/mpirun" <<EOF
#!/bin/sh
# mpirun on emulated host 0 (the head node: its namespace, its hostname), set up for the emulated network; --bind-to
# none: the emulated hosts share this machine's CPUs, and each host's daemon would bind its first rank to core 0 (every
# rank on the same core: 2.5x slower steps, the allreduce's rounds waiting for that core)
exec ip netns exec ${PREFIX}0 unshare --uts /bin/sh -c 'hostname ${PREFIX}0 && exec "\$0" "\$@"' mpirun \\
  --allow-run-as-root --leave-session-attached --bind-to none --mca plm_rsh_agent "$DIR/agent" --mca plm_rsh_no_tree_spawn 1 \\
  $PML_ARGS --mca oob_tcp_if_include veth0 \\
  -x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM "\$@"
EOF
chmod +x "$DIR/mpirun"
export DLPN_MPIRUN=$DIR/mpirun
RTT=$(rtt_ms "$NET.$N")
[ "${NO_NETEM:-0}" = 1 ] && echo "netns-hosts: this kernel has no sch_netem: the $DELAY delay is not applied (the rate is)" >&2
export DLPN_RTT_MS=${RTT:-0}
echo "netns-hosts: $N hosts ${PREFIX}0..${PREFIX}$((N - 1)) on $NET.0/24, every link $RATE, $DELAY one way (both directions shaped); rtt ${RTT:-?} ms" >&2
"$@"
