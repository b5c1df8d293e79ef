#!/usr/bin/env bash
# The long soak run: a release server on the soak world (hazards, a dungeon, a travel every
# 4 s) and simulated clients with churn (deaths and restarts, disconnects and relaunches) for
# a bounded time. Fails unless the clients' report is clean (gatehouse-sim --check) and the
# server, sent SIGTERM while a second swarm's players are still connected, drains: it saves
# every one of them, exits 0, and `saves list` shows them afterwards. Prints the server's
# memory at the start and the end.
#
#   deploy/soak.sh                     # 32 clients, 5 minutes (and 8 still connected at the drain)
#   CLIENTS=64 DURATION=10m deploy/soak.sh
#   BIN_DIR=target/x86_64-unknown-linux-gnu/release deploy/soak.sh   # binaries built already
#
# Loopback only. CI runs 16 clients for 40 s (tests/e2e/soak.rs); deploy/container-soak.sh runs
# the same world in containers, with kills, cut-offs and restarts.
set -euo pipefail
cd "$(dirname "$0")/.."

clients=${CLIENTS:-32}
duration=${DURATION:-5m}
drain_clients=${DRAIN_CLIENTS:-8}
port=${PORT:-7790}
admin_port=${ADMIN_PORT:-7791}

if [ -z "${BIN_DIR:-}" ]; then
    cargo build --release -q -p gatehouse-server -p gatehouse-client-sim -p gatehouse-floor
fi
bin=${BIN_DIR:-target/release}
dir=$(mktemp -d "${TMPDIR:-/tmp}/gatehouse-soak.XXXXXX")
server_pid=
drain_pid=
cleanup() {
    for pid in "$drain_pid" "$server_pid"; do
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; fi
    done
}
trap cleanup EXIT

"$bin/gatehouse-server" --bind "127.0.0.1:$port" --admin-bind "127.0.0.1:$admin_port" \
    --data-dir "$dir" --world config/soak-world.toml --log-format json 2>"$dir/server.log" &
server_pid=$!
for _ in $(seq 100); do [ -f "$dir/dev-cert.der" ] && break; sleep 0.1; done

sim() {
    "$bin/gatehouse-sim" --server "127.0.0.1:$port" --server-cert "$dir/dev-cert.der" \
        --scenario soak "$@"
}
# Players sim-1000.. stay connected past the end of the main run, so the drain has players to
# save; their report is not checked (the server goes away under them).
sim --clients "$drain_clients" --first-index 1000 --duration 1h \
    --report-json "$dir/drain-report.json" >"$dir/drain.log" 2>&1 &
drain_pid=$!

rss() { awk '/^VmRSS/ { print $2 " kB" }' "/proc/$server_pid/status"; }
sleep 1
echo "server RSS at start: $(rss)"
status=0
sim --clients "$clients" --duration "$duration" --report-json "$dir/report.json" --check ||
    status=$?
echo "server RSS at end:   $(rss)"

# The drain swarm's players, as the admin endpoint lists them.
drain_players() {
    "$bin/gatehouse-server" probe /state --admin-bind "127.0.0.1:$admin_port" 2>/dev/null |
        grep -o '"player":"sim-1[0-9]*"' | sort -u | wc -l || true
}
for _ in $(seq 100); do [ "$(drain_players)" = "$drain_clients" ] && break; sleep 0.2; done
connected=$(drain_players)
echo "players connected at the drain: $connected of $drain_clients"
[ "$connected" = "$drain_clients" ] || status=1
kill -TERM "$server_pid"
code=0
wait "$server_pid" || code=$?
server_pid=
[ "$code" = 0 ] || { echo "server exited with $code"; status=1; }
kill -TERM "$drain_pid" 2>/dev/null || true
wait "$drain_pid" 2>/dev/null || true
drain_pid=

# What the drain says it did, and what the store holds afterwards.
drained=$(grep '"draining: saving every player and the session"' "$dir/server.log" |
    grep -o '"players":[0-9]*' | cut -d: -f2 || true)
left=$(grep '"store drained"' "$dir/server.log" | grep -o '"left":[0-9]*' | cut -d: -f2 || true)
echo "drain: saved ${drained:-?} players, ${left:-?} saves left"
[ "$drained" = "$drain_clients" ] && [ "$left" = 0 ] || status=1
saved=$("$bin/gatehouse-server" saves list --data-dir "$dir" | grep -c '^sim-1' || true)
echo "saves list: $saved of the $drain_clients drain players saved"
[ "$saved" = "$drain_clients" ] || status=1

echo "report: $dir/report.json, server log: $dir/server.log"
# grep -c prints 0 and exits 1 when nothing matches: not a failure of the soak.
echo "server warnings: $(grep -c '"level":"WARN"' "$dir/server.log" || true)"
exit "$status"
