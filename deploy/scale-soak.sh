#!/usr/bin/env bash
# The scale soak (docs/protocol.md 4.2, "Progress"): a release server on the soak world (hazards
# that kill, a dungeon, a travel every 4 s) with the load configuration, and N simulated clients
# through the in-process network conditioner, with churn: relaunches, restarts after death, the
# world's hazards. Every interval (a minute by default) it prints transitions started /
# completed / superseded / settle timeouts / failed, the longest loading screen, shown -> ended
# p50 / p99, the clients' reply delay p99, server RSS and CPU, swarm CPU and the load average;
# at the end the swarm's whole report, the run's figures and the timeline picture's path.
# Before the soak it measures the network's floor F(N) in the same run: one round trip from a
# bare QUIC server to every one of the N clients and back through the same conditioner
# (gatehouse-floor --impair). A transition waits for one such round trip at least (its ready
# reports), beside the streaming: the transitions' durations on the server are printed as
# ratios to it. It fails on any failed transition, any invariant the swarm's --check finds broken (a client not
# placed at the end among them), any loading screen longer than MAX_SCREEN, or server RSS
# growing more than RSS_GROWTH % after the first RSS_AFTER (until the clients leave at the end).
#
#   deploy/scale-soak.sh                                   # 1,000 clients, 30 minutes
#   RELAUNCH_EVERY=12s DURATION=10m MAX_SCREEN=30s deploy/scale-soak.sh    # the stress variant
#   CLIENTS=200 DURATION=60s RELAUNCH_EVERY=12s deploy/scale-soak.sh        # CI's short one
#   BIN_DIR=target/release deploy/scale-soak.sh            # binaries built already
#
# Settings (environment): CLIENTS (1000), DURATION (30m), RELAUNCH_EVERY (120s), RESTART_AFTER
# (500ms), IMPAIR (loss=5%,lag=100ms,jitter=20ms,reorder=1%,dup=1%; "none" for a clean path),
# IMPAIR_SEED (7), FULL_CLIENTS (16), CONNECT_RATE (50), INTERVAL (60s), MAX_SCREEN (10s),
# RSS_AFTER (5m), RSS_GROWTH (10), FLOOR_ROUNDS (30; 0: no floor), OUT (a new temporary
# directory). Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."

clients=${CLIENTS:-1000}
duration=${DURATION:-30m}
relaunch_every=${RELAUNCH_EVERY:-120s}
restart_after=${RESTART_AFTER:-500ms}
impair=${IMPAIR:-loss=5%,lag=100ms,jitter=20ms,reorder=1%,dup=1%}
impair_seed=${IMPAIR_SEED:-7}
full_clients=${FULL_CLIENTS:-16}
connect_rate=${CONNECT_RATE:-50}
interval=${INTERVAL:-60s}
max_screen=${MAX_SCREEN:-10s}
rss_after=${RSS_AFTER:-5m}
rss_growth=${RSS_GROWTH:-10}
floor_rounds=${FLOOR_ROUNDS:-30}

# The milliseconds of a duration in one unit: 500ms, 90s, 10m or 1h (not 1m30s).
millis() {
    case $1 in
        *ms) echo "${1%ms}" ;;
        *s) echo $((${1%s} * 1000)) ;;
        *m) echo $((${1%m} * 60000)) ;;
        *h) echo $((${1%h} * 3600000)) ;;
        *) echo "scale-soak: $2=$1: expected a duration such as 500ms, 90s, 10m or 1h" >&2
            exit 2 ;;
    esac
}
max_screen_ms=$(millis "$max_screen" MAX_SCREEN)
rss_after_ms=$(millis "$rss_after" RSS_AFTER)
millis "$duration" DURATION >/dev/null
if [ "$(millis "$interval" INTERVAL)" -lt 1000 ]; then
    echo "scale-soak: INTERVAL=$interval: expected at least 1s" >&2
    exit 2
fi

if [ -z "${BIN_DIR:-}" ]; then
    cargo build --release -q -p gatehouse-server -p gatehouse-client-sim -p gatehouse-floor
fi
bin=${BIN_DIR:-target/release}
dir=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/gatehouse-scale-soak.XXXXXX")}
mkdir -p "$dir"
server_pid=
sim_pid=
cleanup() {
    for pid in "$sim_pid" "$server_pid"; do
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; fi
    done
}
trap cleanup EXIT

impair_args=()
[ "$impair" = none ] || impair_args=(--impair "$impair" --impair-seed "$impair_seed")
floor_args=()
if [ "$floor_rounds" -gt 0 ]; then
    echo "== the network's floor F($clients): $floor_rounds round trips from a bare QUIC server" \
        "to every client and back, through the same conditioner"
    # Each client on a socket of its own, so each draws its losses apart, as in the swarm.
    endpoints=$((clients < 1024 ? clients : 1024))
    "$bin/gatehouse-floor" --clients "$clients" --client-endpoints "$endpoints" \
        --connect-rate 200 --rounds "$floor_rounds" --pause 500ms \
        --connect-timeout 30s --round-timeout 60s "${impair_args[@]}" --json \
        >"$dir/floor.json" 2>"$dir/floor.log" || {
        echo "the floor run failed:"
        tail -n 5 "$dir/floor.log"
        exit 1
    }
    floor_args=(--floor "$dir/floor.json")
fi

"$bin/gatehouse-server" --config config/load-server.toml --world config/soak-world.toml \
    --bind 127.0.0.1:0 --admin-bind 127.0.0.1:0 --data-dir "$dir" --log-format json \
    2>"$dir/server.log" &
server_pid=$!
addrs=$(python3 deploy/load.py addrs "$dir/server.log" 10)
read -r quic admin <<<"$addrs"

echo "== scale soak: $clients clients ($full_clients full), $duration, relaunch about every" \
    "$relaunch_every, restart $restart_after after death, impairment $impair;" \
    "loading screens bounded by $max_screen; files in $dir"
sim_status=0
"$bin/gatehouse-sim" --server "$quic" --server-cert "$dir/dev-cert.der" --wait 30s \
    --scenario soak --clients "$clients" --full-clients "$full_clients" \
    --connect-rate "$connect_rate" --duration "$duration" \
    --relaunch-every "$relaunch_every" --restart-after "$restart_after" "${impair_args[@]}" \
    --progress never --interval "$interval" --interval-json "$dir/intervals.jsonl" \
    --report-json "$dir/report.json" --timeline "$dir/timeline.svg" --check \
    >"$dir/report.txt" 2>"$dir/sim.log" &
sim_pid=$!
python3 deploy/scale_soak.py watch --server-pid "$server_pid" --sim-pid "$sim_pid" \
    --admin "$admin" --intervals "$dir/intervals.jsonl" --out "$dir/rows.jsonl"
wait "$sim_pid" || sim_status=$?
sim_pid=
kill -TERM "$server_pid" 2>/dev/null || true
wait "$server_pid" || true
server_pid=

echo
cat "$dir/report.txt"
status=0
python3 deploy/scale_soak.py verdict --rows "$dir/rows.jsonl" --report "$dir/report.json" \
    --sim-status "$sim_status" --sim-log "$dir/sim.log" --max-screen-ms "$max_screen_ms" \
    --rss-after-s $((rss_after_ms / 1000)) --rss-growth "$rss_growth" \
    --until-s $(($(millis "$duration" DURATION) / 1000)) "${floor_args[@]}" ||
    status=1
echo "timeline: $dir/timeline.svg"
exit "$status"
