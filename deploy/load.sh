#!/usr/bin/env bash
# The load benchmark (docs/performance.md). For each N (64, 256 and 1000 by default; up to 4000
# on 2 cores, e.g. LOAD_CLIENTS="1000 2000 4000" LOAD_CONNECT_RATE=400; 8000 as a stretch, within
# config/load-server.toml's max_players):
#
# 1. the bare QUIC floor F(N): gatehouse-floor, N clients, one 64-byte message written to every
#    client's stream per round and every reply awaited, same runtime flavour as the server, its
#    clients 100 to a UDP socket as the swarm's are; then the memory floor M(N): the same with
#    its clients in another process and 10 rounds, the bare server's VmRSS per idle connection
#    (`gatehouse-floor --clients-process`; like the product's figure, its one-off costs spread
#    over N);
# 2. the product: a release gatehouse-server on config/load-server.toml (the zero-stream world
#    config/load-world.toml, a travel every 3 s, ephemeral ports) and `gatehouse-sim --clients N
#    --stream-ms 0..0`, connecting at LOAD_CONNECT_RATE per second (with the swarm's
#    --connect-rate and --full-clients when this gatehouse-sim has them);
#
# then prints, side by side per N: shown → ended at the clients and the server's own last ready →
# ended (from GET /state, `recent_transition_timings`), each as a ratio to F(N); connect →
# Welcome; the admission time (the swarm's first dial to the last client's first Welcome and to
# the last client's first placement, from its report's `admission`, with how many got there, and
# when the server first counted N players, and N placed; the floor's first connect to last
# welcome beside it);
# server CPU per client per second idle and per transition; server RSS per idle client, and as a
# ratio to M(N); bytes on the wire per client per transition; the UDP RcvbufErrors before and
# after; the load average. The figures are a benchmark, never an assertion: the run fails only if a tool fails.
# A server that loses clients or closes them (SlowConsumer, ReadyTimeout) is a figure too: the
# run goes on to its table with what the clients and the server saw.
#
#   deploy/load.sh                       # N = 64, 256, 1000; 45 s of steady travels each
#   deploy/load.sh --short               # CI: N = 64, 15 s (or LOAD_SHORT=1)
#   LOAD_CLIENTS="64 256" deploy/load.sh
#   LOAD_CLIENTS="1000 2000 4000" LOAD_CONNECT_RATE=400 deploy/load.sh   # large N
#   BIN_DIR=target/release deploy/load.sh   # binaries built already
#   LOAD_CLIENTS=200 LOAD_CONNECT_RATE=100 LOAD_CHECK=1 deploy/load.sh --short   # CI (.ci/scale)
#
# Environment: LOAD_CLIENTS (the Ns), LOAD_STEADY (seconds of travels with every client
# connected, default 45, short 15), LOAD_CONNECT_RATE (connections per second, default 50, for
# the floor and the swarm alike), LOAD_FULL_CLIENTS (default 0: thin clients only, so the
# figures are the server's; the sim runs every session on one thread, and 16 full clients with a
# pawn per player saturate it at 1,000), LOAD_FLOOR_ROUNDS (default 50, short 20), LOAD_IDLE
# (seconds of idle server with no client, default 5, short 3), LOAD_DIR
# (where the files go; default a new directory under TMPDIR, kept), LOAD_CHECK=1 (the swarm runs
# with --check: the run fails unless every client is connected and placed with no error and
# every invariant counter 0). Each N's swarm also draws its timeline, timeline-N.svg.
#
# Every wait is bounded, and what grows with N grows with it: a slack of N / 200 s (20 s at
# 4,000) is added to the floor's and the swarm's connect timeouts and the floor's round timeout,
# to how long the clients stay (so an admission that lags the dialling still leaves the steady
# stretch), to how long the monitor waits for every player, and to the outer `timeout` of each
# tool. The steady stretch starts once the server counts N players placed (or at that deadline) and
# lasts LOAD_STEADY s, ending 2 s before the clients leave at the latest. File descriptors are
# not a limit (QUIC puts every connection of a side on a few UDP sockets: about 60 at 4,000);
# the kernel's caps on UDP buffers (net.core.rmem_max, wmem_max) are, and the RcvbufErrors rows
# say when they were reached.
#
# How the CPU figures are taken (deploy/load.py): server CPU is the sum over its threads of
# /proc/PID/task/*/schedstat (ns). Idle is sampled between transitions once every client is
# connected (the route travels every 3 s from boot and connecting N clients takes N / rate
# seconds, so there is no "before the first travel" with everyone in): each stretch with no
# transition in flight and none started, found by polling /metrics every 200 ms, minus the
# same measurement with no client (so the poll's own cost and the server's fixed cost are not
# charged to clients), ÷ N. Per transition: the CPU over the whole steady stretch less idle at
# that rate, ÷ the transitions that ended in it. RSS per idle client: VmRSS during the idle
# stretches less VmRSS before any client, ÷ N. Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."

short=${LOAD_SHORT:-0}
[ "${1:-}" = "--short" ] && short=1
if [ "$short" = 1 ]; then
    clients_list=${LOAD_CLIENTS:-64}
    steady=${LOAD_STEADY:-15}
    floor_rounds=${LOAD_FLOOR_ROUNDS:-20}
    idle_s=${LOAD_IDLE:-3}
else
    clients_list=${LOAD_CLIENTS:-64 256 1000}
    steady=${LOAD_STEADY:-45}
    floor_rounds=${LOAD_FLOOR_ROUNDS:-50}
    idle_s=${LOAD_IDLE:-5}
fi
rate=${LOAD_CONNECT_RATE:-50}
full_clients=${LOAD_FULL_CLIENTS:-0}

if [ -z "${BIN_DIR:-}" ]; then
    cargo build --release -q -p gatehouse-server -p gatehouse-client-sim -p gatehouse-floor
fi
bin=${BIN_DIR:-target/release}
for b in gatehouse-server gatehouse-sim gatehouse-floor; do
    [ -x "$bin/$b" ] || { echo "load.sh: $bin/$b is missing" >&2; exit 1; }
done
dir=${LOAD_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/gatehouse-load.XXXXXX")}
mkdir -p "$dir"
py="python3 deploy/load.py"

server_pid=
sim_pid=
stop() {
    for pid in "$sim_pid" "$server_pid"; do
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null || true
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            kill -KILL "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
        fi
    done
    sim_pid=
    server_pid=
}
trap stop EXIT

# The swarm's flags that exist in this build (the swarm rewrite adds --connect-rate and
# --full-clients; before it, clients connect all at once and all are full).
sim_help=$("$bin/gatehouse-sim" --help)
sim_extra=()
if grep -q -- '--connect-rate' <<<"$sim_help"; then sim_extra+=(--connect-rate "$rate"); fi
if grep -q -- '--full-clients' <<<"$sim_help"; then sim_extra+=(--full-clients "$full_clients"); fi
if [ "${LOAD_CHECK:-0}" = 1 ]; then sim_extra+=(--check); fi
# An older gatehouse-floor (BIN_DIR) without --clients-process: no memory floor.
floor_memory=0
floor_help=$("$bin/gatehouse-floor" --help)
if grep -q -- '--clients-process' <<<"$floor_help"; then floor_memory=1; fi
memory_rounds=10

status=0
for n in $clients_list; do
    echo "== N = $n: floor" >&2
    # The floor: every client connects within N / rate s plus its timeout, each round within 10 s.
    # Seconds the swarm takes to open every connection at the connect rate, rounded up.
    floor_rcvbuf_before=$($py snmp)
    connecting=$(awk -v n="$n" -v r="$rate" 'BEGIN { s = n / r; print (s == int(s)) ? s : int(s) + 1 }')
    # What grows with N: a handshake's wait behind the others, a round's, the admission.
    slack=$((n / 200))
    floor_limit=$((connecting + 120 + 4 * slack))
    # The floor's clients share their UDP sockets as the swarm's do, 100 to a socket: on one
    # socket, thousands of clients overflow its receive buffer at every round.
    floor_clients=(--client-endpoints "$(((n + 99) / 100))"
        --connect-timeout "$((10 + slack))s" --round-timeout "$((10 + slack))s")
    if ! timeout "$floor_limit" "$bin/gatehouse-floor" --clients "$n" "${floor_clients[@]}" \
        --rounds "$floor_rounds" --connect-rate "$rate" --json >"$dir/floor-$n.json" \
        2>"$dir/floor-$n.log"; then
        echo "load.sh: the floor failed for N = $n (see $dir/floor-$n.log)" >&2
        status=1
    fi
    floor_rcvbuf_after=$($py snmp)
    # The memory floor M(N): the same floor with its clients in a child process, so the
    # server's VmRSS per idle connection is quinn's, rustls's and tokio's alone.
    if [ "$floor_memory" = 1 ] && ! timeout "$floor_limit" "$bin/gatehouse-floor" \
        --clients "$n" "${floor_clients[@]}" --rounds "$memory_rounds" --connect-rate "$rate" \
        --clients-process --json >"$dir/floor-memory-$n.json" 2>"$dir/floor-memory-$n.log"; then
        echo "load.sh: the memory floor failed for N = $n (see $dir/floor-memory-$n.log)" >&2
        status=1
    fi

    echo "== N = $n: server and swarm" >&2
    data="$dir/data-$n"
    mkdir -p "$data"
    "$bin/gatehouse-server" --config config/load-server.toml --data-dir "$data" \
        --bind 127.0.0.1:0 --admin-bind 127.0.0.1:0 2>"$dir/server-$n.log" &
    server_pid=$!
    quic= admin=
    for _ in $(seq 100); do
        quic=$($py addr "$dir/server-$n.log" listening 2>/dev/null || true)
        admin=$($py addr "$dir/server-$n.log" "admin endpoint listening" 2>/dev/null || true)
        [ -n "$quic" ] && [ -n "$admin" ] && [ -f "$data/dev-cert.der" ] && break
        sleep 0.1
    done
    if [ -z "$quic" ] || [ -z "$admin" ]; then
        echo "load.sh: the server did not start (see $dir/server-$n.log)" >&2
        stop
        status=1
        continue
    fi
    # The server with no client: idle CPU and RSS.
    $py idle --pid "$server_pid" --admin "$admin" --seconds "$idle_s" --out "$dir/idle-$n.json"
    rcvbuf_before=$($py snmp)
    # The clients stay for the dialling, the steady stretch and room for an admission that
    # lags the dialling (more at large N).
    duration=$((connecting + steady + 5 + slack))
    timeline=()
    if grep -q -- '--timeline' <<<"$sim_help"; then timeline=(--timeline "$dir/timeline-$n.svg"); fi
    timeout $((duration + 120 + slack)) "$bin/gatehouse-sim" --server "$quic" \
        --config config/load-server.toml --server-cert "$data/dev-cert.der" \
        --clients "$n" --stream-ms 0..0 --duration "${duration}s" "${sim_extra[@]}" \
        --connect-timeout "$((10 + slack))s" --report-json "$dir/report-$n.json" \
        "${timeline[@]}" >"$dir/sim-$n.log" 2>&1 &
    sim_pid=$!
    now=$(date +%s)
    # The steady stretch starts once every client is in (or at the connect deadline) and lasts
    # `steady` s, ending 2 s before the clients leave at the latest.
    $py monitor --pid "$server_pid" --admin "$admin" --log "$dir/server-$n.log" --clients "$n" \
        --connect-deadline $((now + connecting + 30 + slack)) \
        --until $((now + duration - 2)) --steady "$steady" --out "$dir/monitor-$n.json"
    code=0
    wait "$sim_pid" || code=$?
    sim_pid=
    if [ "$code" != 0 ]; then
        echo "load.sh: gatehouse-sim exited with $code for N = $n (see $dir/sim-$n.log)" >&2
        tail -n 30 "$dir/sim-$n.log" >&2
        status=1
    fi
    rcvbuf_after=$($py snmp)
    printf '{"rcvbuf_before": %s, "rcvbuf_after": %s, "floor_rcvbuf": [%s, %s], "loadavg": "%s"}\n' \
        "$rcvbuf_before" "$rcvbuf_after" "$floor_rcvbuf_before" "$floor_rcvbuf_after" \
        "$(cut -d' ' -f1-3 /proc/loadavg)" >"$dir/misc-$n.json"
    stop
done

echo
echo "load benchmark, $(nproc) cores, connect rate $rate/s, steady ${steady}s per N," \
    "swarm flags: ${sim_extra[*]:-none}"
# shellcheck disable=SC2086
$py table "$dir" $clients_list
echo "files: $dir (summary: $dir/load.json)"
exit "$status"
