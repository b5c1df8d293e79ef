#!/usr/bin/env bash
# The travel benchmark, a command of the load benchmark (docs/performance.md, "Travel between
# servers"): N players (500 by default) moved from one server to another on this machine.
#
# 0. the bare QUIC floor F(N), as deploy/load.sh measures it: gatehouse-floor, N clients (100
#    to a UDP socket), one 64-byte message to every client per round and every reply awaited,
#    TRAVEL_FLOOR_ROUNDS rounds (20), connecting at TRAVEL_CONNECT_RATE per second;
# 1. a throwaway PostgreSQL (.ci/postgres), the store both servers share;
# 2. two release gatehouse-servers on loopback: `hub-1` hosts node `hub` and marks `dungeon`
#    remote, `dungeon-1` the other way round; each lists the other in a static fleet directory
#    (`fleet.directory = "static"`), one fleet key; zero-stream levels, no route travel;
# 3. `gatehouse-sim --clients N` against hub-1 (thin clients, streaming 0 ms), connecting at
#    TRAVEL_CONNECT_RATE per second; once hub-1 counts N players placed, an operator travel to
#    `hub` (a same-server transition of the same players, for comparison), then, once it has
#    ended, one to `dungeon`: every player moves to dungeon-1;
# 4. once dungeon-1 counts N players placed (or at the bound), the clients leave; then the table:
#    placed on the destination (and lost), the servers' travel counters, saves older than the
#    handoff (any player whose stored save is not the destination's claim: a handoff state left,
#    or another node), and the loading screen at the clients, p50 and p99, of the move beside
#    the same-server transition, each also as a ratio to F(N) (the floor's round, p50 to p50 and
#    p99 to p99), with the load average before the floor and at the end.
#
#   deploy/load-travel.sh                         # N = 500
#   TRAVEL_CLIENTS=100 TRAVEL_CHECK=1 deploy/load-travel.sh   # the short run in CI
#   BIN_DIR=target/release deploy/load-travel.sh  # binaries built already
#
# Environment: TRAVEL_CLIENTS (N, 500), TRAVEL_CONNECT_RATE (100/s), TRAVEL_FLOOR_ROUNDS (20),
# BIN_DIR, LOAD_DIR (where the files go; a new directory under TMPDIR by default, kept),
# TRAVEL_CHECK=1 (the run also fails unless every player is placed on the destination with no
# save older than its handoff).
# Every wait is bounded. A figure is never an assertion: without TRAVEL_CHECK the run fails only
# if a tool fails (the floor included) or a step is not reached in time.
set -euo pipefail
cd "$(dirname "$0")/.."

n=${TRAVEL_CLIENTS:-500}
rate=${TRAVEL_CONNECT_RATE:-100}
floor_rounds=${TRAVEL_FLOOR_ROUNDS:-20}
dir=${LOAD_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/gatehouse-travel.XXXXXX")}
mkdir -p "$dir"
# PostgreSQL runs as its own user when this runs as root (.ci/postgres): it must reach its
# directory inside this one, which mktemp makes 0700.
chmod 755 "$dir"
py="python3 deploy/load_travel.py"
say() { echo "load-travel.sh: $*" >&2; }

if [ -z "${BIN_DIR:-}" ]; then
    say "building release binaries"
    cargo build --release -q -p gatehouse-server -p gatehouse-client-sim -p gatehouse-floor
    bin=target/release
else
    bin=$BIN_DIR
fi
for b in gatehouse-server gatehouse-sim gatehouse-floor; do
    [ -x "$bin/$b" ] || { say "$bin/$b is missing"; exit 1; }
done

pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    .ci/postgres stop "$dir/pg" >/dev/null 2>&1 || true
}
trap cleanup EXIT

# The floor F(N) first, on a machine with nothing of ours running yet (deploy/load.sh's
# bounds: the connections within N / rate s, a slack of N / 200 s for what grows with N).
connecting=$(((n + rate - 1) / rate))
slack=$((n / 200))
floor_loadavg=$(cut -d' ' -f1-3 /proc/loadavg)
say "the floor F($n): $floor_rounds rounds"
timeout $((connecting + 120 + 4 * slack)) "$bin/gatehouse-floor" --clients "$n" \
    --client-endpoints "$(((n + 99) / 100))" --connect-timeout "$((10 + slack))s" \
    --round-timeout "$((10 + slack))s" --rounds "$floor_rounds" --connect-rate "$rate" --json \
    >"$dir/floor.json" 2>"$dir/floor.log" || { say "the floor failed (see $dir/floor.log)"; exit 1; }

url=$(.ci/postgres start "$dir/pg")
mapfile -t free < <($py ports 4)
port_a=${free[0]} port_b=${free[1]}
admin_a=127.0.0.1:${free[2]} admin_b=127.0.0.1:${free[3]}
key=$(head -c 48 /dev/urandom | base64 | tr -d '\n/+=')
export GATEHOUSE_TICKET_KEY=$key

# world(own node, remote node)
world() {
    cat <<EOF
start_node = "$1"
world_map = true
default_preset = "Vanguard"

[[preset]]
name = "Vanguard"
character_def = "Vanguard"

[[node]]
id = "$1"
levels = [{ name = "$1_level", stream_ms = 0 }]
spawn_points_register_ms = 0

[[node]]
id = "$2"
remote = true
EOF
}

# config(server id, own node, game port, admin port, other id, other node, other port)
config() {
    cat <<EOF
log_format = "json"

[network]
bind = "127.0.0.1:$3"
max_players = 4096
max_pending_connections = 1024
max_pending_per_ip = 1024
handshake_burst = 4096
handshakes_per_ip_per_s = 100000

[game]
world = "world-$2.toml"

[admin]
bind = "$4"

[store]
url = "$url"
session = "$1"

[fleet]
server_id = "$1"
directory = "static"

[[fleet.servers]]
id = "$5"
address = "127.0.0.1:$7"
server_name = "localhost"
nodes = ["$6"]
EOF
}

world hub dungeon >"$dir/world-hub.toml"
world dungeon hub >"$dir/world-dungeon.toml"
config hub-1 hub "$port_a" "$admin_a" dungeon-1 dungeon "$port_b" >"$dir/hub-1.toml"
config dungeon-1 dungeon "$port_b" "$admin_b" hub-1 hub "$port_a" >"$dir/dungeon-1.toml"

for s in hub-1 dungeon-1; do
    mkdir -p "$dir/data-$s"
    "$bin/gatehouse-server" --config "$dir/$s.toml" --data-dir "$dir/data-$s" \
        2>"$dir/$s.log" &
    pids+=($!)
done
for admin in "$admin_a" "$admin_b"; do
    $py wait "$admin" players ge 0 30 || { say "a server did not start (see $dir/*.log)"; exit 1; }
done

say "$n clients to hub-1 at $rate/s"
# Long enough for the admission, both transitions and the placement at the destination.
duration=$((connecting + 50))
timeout $((duration + 60)) "$bin/gatehouse-sim" --server "127.0.0.1:$port_a" \
    --server-cert "$dir/data-hub-1/dev-cert.der" --clients "$n" --stream-ms 0..0 \
    --connect-rate "$rate" --duration "${duration}s" --report-json "$dir/report.json" \
    >"$dir/sim.log" 2>&1 &
sim_pid=$!
pids+=("$sim_pid")
step() { # step NAME ADMIN METRIC OP VALUE SECS
    local name=$1
    shift
    $py wait "$@" || { say "$name: not reached (see $dir)"; exit 1; }
    say "$name: $(date +%T)"
}
step "every client placed on hub-1" "$admin_a" placed_players ge "$n" $((connecting + 30))
$py metrics "$admin_a" "$dir/a-before.json"
ended='transitions_ended_total{outcome="completed"}'
completed=$(python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1])).get(sys.argv[2], 0)))' "$dir/a-before.json" "$ended")
curl -fsS -X POST "$admin_a/travel/hub" >/dev/null
step "the same-server transition ended" "$admin_a" "$ended" ge $((completed + 1)) 30
step "every player placed again" "$admin_a" placed_players ge "$n" 30
curl -fsS -X POST "$admin_a/travel/dungeon" >/dev/null
# Not fatal: the players the destination did not place are a figure.
if $py wait "$admin_b" placed_players ge "$n" 30; then
    say "every player placed on dungeon-1: $(date +%T)"
fi
$py metrics "$admin_a" "$dir/a-end.json"
$py metrics "$admin_b" "$dir/b-end.json"
# Saves older than the handoff: a player whose stored save is not dungeon-1's claim.
psql=$(ls -d /usr/lib/postgresql/*/bin/psql 2>/dev/null | sort -V | tail -1)
older=$("${psql:-psql}" "$url" -tAc \
    "SELECT count(*) FROM players WHERE handoff IS NOT NULL OR node IS DISTINCT FROM 'dungeon'" \
    2>"$dir/psql.log" || echo null)
say "waiting for the clients to leave (their report)"
wait "$sim_pid" || say "gatehouse-sim exited with $? (see $dir/sim.log)"
printf '{"clients": %s, "older_saves": %s, "check": %s, "loadavg": "%s", "floor_loadavg": "%s"}\n' \
    "$n" "${older:-null}" "$([ "${TRAVEL_CHECK:-0}" = 1 ] && echo true || echo false)" \
    "$(cut -d' ' -f1-3 /proc/loadavg)" "$floor_loadavg" >"$dir/run.json"
$py table "$dir"
echo "files: $dir"
