#!/usr/bin/env bash
# The long soak run: a release server on the soak world (hazards, a dungeon, a travel every
# 4 s) and simulated clients with churn (deaths and restarts, disconnects and relaunches) for
# a bounded time. Fails unless the clients' report is clean (gatehouse-sim --check) and the
# server drains to exit code 0 on SIGTERM. Prints the server's memory at the start and the end.
#
#   deploy/soak.sh                     # 32 clients, 5 minutes
#   CLIENTS=64 DURATION=10m deploy/soak.sh
#
# Loopback only. CI runs 16 clients for 40 s (tests/e2e/soak.rs).
set -euo pipefail
cd "$(dirname "$0")/.."

clients=${CLIENTS:-32}
duration=${DURATION:-5m}
port=${PORT:-7790}
admin_port=${ADMIN_PORT:-7791}

cargo build --release -q -p gatehouse-server -p gatehouse-client-sim
dir=$(mktemp -d "${TMPDIR:-/tmp}/gatehouse-soak.XXXXXX")
server_pid=
cleanup() {
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then kill -KILL "$server_pid"; fi
}
trap cleanup EXIT

target/release/gatehouse-server --bind "127.0.0.1:$port" --admin-bind "127.0.0.1:$admin_port" \
    --data-dir "$dir" --world config/soak-world.toml --log-format json 2>"$dir/server.log" &
server_pid=$!
for _ in $(seq 100); do [ -f "$dir/dev-cert.der" ] && break; sleep 0.1; done

rss() { awk '/^VmRSS/ { print $2 " kB" }' "/proc/$server_pid/status"; }
sleep 1
echo "server RSS at start: $(rss)"
status=0
target/release/gatehouse-sim --server "127.0.0.1:$port" --server-cert "$dir/dev-cert.der" \
    --clients "$clients" --duration "$duration" --scenario soak \
    --report-json "$dir/report.json" --check || status=$?
echo "server RSS at end:   $(rss)"
kill -TERM "$server_pid"
wait "$server_pid" || { echo "server exited with $?"; status=1; }
server_pid=
echo "report: $dir/report.json, server log: $dir/server.log"
grep -c '"level":"WARN"' "$dir/server.log" | sed 's/^/server warnings: /'
exit "$status"
