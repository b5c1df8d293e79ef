#!/usr/bin/env bash
# The impaired soak (docs/testing.md): the soak world (hazards, a dungeon, a travel every 4 s)
# and simulated clients with churn (deaths, restarts 500 ms later, relaunches about every 12 s),
# twice with the same seed through the in-process network conditioner: once clean (`--impair
# none`, the same relay path), once impaired (default: 5 % loss, 100 ± 20 ms lag, 1 %
# reordering and 1 % duplication, each way). Each run must be clean (`gatehouse-sim --check`:
# every client connected and placed, no error or kick, every death respawned, every invariant
# figure 0) and the server must report no ready timeout, settle timeout or failed transition.
# Then prints the transition and gate timings side by side, with what the conditioner did and
# quinn's own losses. A fresh server (and data dir) per run.
#
#   deploy/impaired-soak.sh                      # 32 clients, 2 minutes per run
#   CLIENTS=16 DURATION=30s deploy/impaired-soak.sh
#   IMPAIR="loss=10%,lag=150ms,jitter=30ms" SEED=7 deploy/impaired-soak.sh
#   BIN_DIR=target/release deploy/impaired-soak.sh   # binaries built already
#
# Loopback only; CI runs the short version in tests/e2e/network.rs (16 clients, 30 s).
set -euo pipefail
cd "$(dirname "$0")/.."

clients=${CLIENTS:-32}
duration=${DURATION:-2m}
impair=${IMPAIR:-loss=5%,lag=100ms,jitter=20ms,reorder=1%,dup=1%}
seed=${SEED:-1}

if [ -z "${BIN_DIR:-}" ]; then
    cargo build --release -q -p gatehouse-server -p gatehouse-client-sim -p gatehouse-floor
fi
bin=${BIN_DIR:-target/release}
dir=$(mktemp -d "${TMPDIR:-/tmp}/gatehouse-impaired.XXXXXX")
server_pid=
cleanup() {
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then kill -KILL "$server_pid"; fi
}
trap cleanup EXIT

# One run: a fresh server, the swarm through the conditioner with $2, the server's counters.
run() {
    local name=$1 spec=$2
    mkdir -p "$dir/$name"
    # Ephemeral ports, read back from the server's log lines.
    "$bin/gatehouse-server" --bind 127.0.0.1:0 --admin-bind 127.0.0.1:0 \
        --data-dir "$dir/$name" --world config/soak-world.toml --log-format json \
        2>"$dir/$name/server.log" &
    server_pid=$!
    local status=0 quic= admin= addrs=
    addrs=$(python3 deploy/load.py addrs "$dir/$name/server.log" 10) || return 1
    read -r quic admin <<<"$addrs"
    echo "== $name run: $clients clients, $duration, impairment $spec, seed $seed"
    "$bin/gatehouse-sim" --server "$quic" --server-cert "$dir/$name/dev-cert.der" \
        --wait 30s --scenario soak --clients "$clients" --duration "$duration" --seed "$seed" \
        --impair "$spec" --progress never --report-json "$dir/$name/report.json" --check \
        >"$dir/$name/report.txt" 2>"$dir/$name/sim.log" || status=$?
    "$bin/gatehouse-server" probe /state --admin-bind "$admin" \
        >"$dir/$name/state.json" 2>/dev/null || true
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" || true
    server_pid=
    if [ "$status" != 0 ]; then
        echo "the $name run is not clean:"
        tail -n 20 "$dir/$name/sim.log"
    fi
    return "$status"
}

status=0
run clean none || status=1
run impaired "$impair" || status=1
python3 deploy/impaired.py "$dir/clean" "$dir/impaired" || status=1
echo "files: $dir"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$status"
