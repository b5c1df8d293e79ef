#!/usr/bin/env bash
# Misbehaving clients among well-behaved ones (docs/testing.md; docs/spec/transitions.md T9).
# Two runs on release binaries, each a fresh server on config/load-server.toml (the zero-stream
# load world, a travel every 3 s) with its own data dir:
#
# 1. clean:       CLIENTS well-behaved clients (200 by default);
# 2. misbehaving: the same CLIENTS clients, of which BAD misbehave (40 by default: a fifth),
#    spread over the indices, each given a kind in turn (restart spam, stale and unknown ids,
#    garbage frame, oversized frame, never acknowledging, going silent).
#
# 200 against 200, so both runs dial the same clients at the same rate and the transitions that
# overlap the dialling see the same logins; the clean run's well-behaved clients are 200, the
# misbehaving run's 160.
#
# Both runs use --check: the well-behaved clients must all be connected and placed with no error
# and every invariant counter 0, and each misbehaving client must end as the protocol answers
# its kind. Then it prints, for the well-behaved clients of each run, shown -> ended (p50, p90,
# p99, max) and its ratio misbehaving / clean (the goal: within 1.5x), what the misbehaving
# clients got (closes and server errors by code), the server's settle and ready timeouts, and
# the load average before and after each run. The figures are a benchmark, never an assertion:
# the script fails only if a run is not clean or a tool fails.
#
#   deploy/misbehave.sh                                   # 200 clients, 40 misbehaving, 45 s
#   CLIENTS=40 BAD=8 DURATION=20s deploy/misbehave.sh     # a short one
#   BIN_DIR=target/release deploy/misbehave.sh            # binaries built already
#   KINDS=silent,never-acknowledge deploy/misbehave.sh    # only some kinds (see gatehouse-sim --help)
#
# Environment: CLIENTS, BAD, KINDS (default all), DURATION (each run; default 45s), CONNECT_RATE
# (default 50 per second), FULL (full clients among the well-behaved; default 16),
# READY_TIMEOUT_MS and SETTLE_TIMEOUT_MS (the server's client_ready_timeout_ms and
# spawn_settle_timeout_ms, which bound what a silent client and one that never acknowledges can
# hold a transition for; default 2000 each, against a world that streams in 0 ms),
# RESPONSE_TIMEOUT_MS (the server's client_response_timeout_ms: how long a client that answers
# nothing, silent or never acknowledging, holds the others before it is set aside or excused;
# default 150, for loopback, where a well-behaved client answers within milliseconds),
# CROWD_FLOOR_MS (the server's client_response_crowd_floor_ms: with it, once nine in ten clients
# answered a transition, a silent one is set aside at twice the time the crowd took, at least
# this; default 30; empty turns the crowd rule off), PORT (default
# 7792), DIR (where the files go; default a new directory under TMPDIR, kept). Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."

clients=${CLIENTS:-200}
bad=${BAD:-40}
kinds=${KINDS:-all}
duration=${DURATION:-45s}
rate=${CONNECT_RATE:-50}
full=${FULL:-16}
ready_ms=${READY_TIMEOUT_MS:-2000}
settle_ms=${SETTLE_TIMEOUT_MS:-2000}
response_ms=${RESPONSE_TIMEOUT_MS:-150}
crowd_floor_ms=${CROWD_FLOOR_MS-30}
port=${PORT:-7792}

if [ -z "${BIN_DIR:-}" ]; then
    cargo build --release -q -p gatehouse-server -p gatehouse-client-sim -p gatehouse-floor
fi
bin=${BIN_DIR:-target/release}
for b in gatehouse-server gatehouse-sim; do
    [ -x "$bin/$b" ] || { echo "misbehave.sh: $bin/$b is missing" >&2; exit 1; }
done
dir=${DIR:-$(mktemp -d "${TMPDIR:-/tmp}/gatehouse-misbehave.XXXXXX")}
mkdir -p "$dir"

# The load server's config with the two timeouts set; its world named on the command line,
# since the copy is not beside it.
sed -e "/^\[game\]/a client_ready_timeout_ms = $ready_ms\nspawn_settle_timeout_ms = $settle_ms\nclient_response_timeout_ms = $response_ms" \
    -e '/^world = /d' config/load-server.toml >"$dir/server.toml"
if [ -n "$crowd_floor_ms" ]; then
    sed -i "/^\[game\]/a client_response_crowd_floor_ms = $crowd_floor_ms" "$dir/server.toml"
fi

server_pid=
cleanup() {
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then kill -KILL "$server_pid"; fi
}
trap cleanup EXIT

# Seconds of a humantime duration such as 45s or 2m (s and m only).
seconds() { case "$1" in *m) echo $((${1%m} * 60)) ;; *s) echo "${1%s}" ;; *) echo "$1" ;; esac; }
bound=$(($(seconds "$duration") + 90))

status=0
# run NAME CLIENTS MISBEHAVING: one server and one swarm; the report in $dir/NAME.json.
run() {
    local name=$1 clients=$2 misbehaving=$3 data="$dir/data-$1"
    mkdir -p "$data"
    "$bin/gatehouse-server" --config "$dir/server.toml" --world config/load-world.toml \
        --data-dir "$data" --bind "127.0.0.1:$port" --admin-bind 127.0.0.1:0 \
        2>"$dir/server-$name.log" &
    server_pid=$!
    echo "== $name: $clients clients, $misbehaving misbehaving; load average before:" \
        "$(cut -d' ' -f1-3 /proc/loadavg)" >&2
    local code=0
    timeout "$bound" "$bin/gatehouse-sim" --server "127.0.0.1:$port" \
        --config "$dir/server.toml" --server-cert "$data/dev-cert.der" --wait 30s \
        --clients "$clients" --misbehaving "$misbehaving" --misbehaviours "$kinds" \
        --full-clients "$full" --connect-rate "$rate" --stream-ms 0..0 --duration "$duration" \
        --progress never --check --report-json "$dir/$name.json" >"$dir/sim-$name.log" 2>&1 ||
        code=$?
    echo "$(cut -d' ' -f1-3 /proc/loadavg)" >"$dir/loadavg-$name"
    if [ "$code" != 0 ]; then
        echo "misbehave.sh: the $name run is not clean (exit $code; see $dir/sim-$name.log)" >&2
        tail -n 20 "$dir/sim-$name.log" >&2
        status=1
    fi
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=
}

run clean "$clients" 0
run misbehaving "$clients" "$bad"

echo
echo "misbehaving clients: $clients clients in both runs, $bad of them" \
    "misbehaving ($kinds) in the second; $(nproc) cores, connect rate $rate/s, $duration" \
    "each, client_ready_timeout_ms $ready_ms, spawn_settle_timeout_ms $settle_ms," \
    "client_response_timeout_ms $response_ms, client_response_crowd_floor_ms ${crowd_floor_ms:-unset}"
python3 - "$dir" <<'EOF'
import json, sys
d = sys.argv[1]
runs = {}
for name in ("clean", "misbehaving"):
    try:
        with open(f"{d}/{name}.json") as f:
            runs[name] = json.load(f)
    except (OSError, ValueError) as e:
        print(f"  {name}: no report ({e})")
def ms(us): return f"{us / 1000:.1f}"
print(f"  {'well-behaved shown -> ended (ms)':<34} {'p50':>8} {'p90':>8} {'p99':>8} {'max':>8} {'count':>6}"
      f"  {'transitions':>11}  load average after")
for name, r in runs.items():
    t = r["timings"]["shown_to_ended"]
    load = open(f"{d}/loadavg-{name}").read().strip()
    print(f"  {name:<34} {ms(t['p50_us']):>8} {ms(t['p90_us']):>8} {ms(t['p99_us']):>8}"
          f" {ms(t['max_us']):>8} {t['count']:>6}  {r['transitions_completed']:>11}  {load}")
if len(runs) == 2:
    a, b = (runs[n]["timings"]["shown_to_ended"] for n in ("clean", "misbehaving"))
    for p in ("p50_us", "p99_us"):
        ratio = b[p] / a[p] if a[p] else float("inf")
        verdict = "within" if ratio <= 1.5 else "ABOVE"
        print(f"  ratio misbehaving / clean, {p[:3]}: {ratio:.2f} ({verdict} the 1.5x goal)")
m = runs.get("misbehaving", {}).get("misbehaving")
if m:
    print(f"  misbehaving clients {m['clients']}: unexpected ends {m['unexpected_ends']},"
          f" invariant violations {m['invariant_violations']}")
    for kind, k in m["kinds"].items():
        closes = ", ".join(f"{c} {n}" for c, n in k["closes"].items())
        errors = ", ".join(f"{c} {n}" for c, n in k["server_errors"].items()) or "-"
        print(f"    {kind:<18} {k['clients']} clients: closed {closes}; server errors {errors}")
# The server's side: how its transitions ended and how long they took, and whom it closed.
for name in runs:
    ended, kicked, abuse, aside, late = [], 0, 0, 0, 0
    with open(f"{d}/server-{name}.log") as f:
        for line in f:
            try:
                fields = json.loads(line)
            except ValueError:
                continue
            message = fields.get("message", "")
            if "outcome" in fields and "duration_ms" in fields and "transition ended" in message \
                    or fields.get("outcome") == "settle_timeout":
                ended.append((fields["outcome"], int(fields["duration_ms"])))
            kicked += "kicked" in message
            abuse += message.startswith("too many refused requests")
            aside += "set aside" in message
            late += message.startswith("client did not acknowledge its pawn in time")
    longest = max((ms_ for _, ms_ in ended), default=0)
    timeouts = sum(1 for outcome, _ in ended if outcome == "settle_timeout")
    over = sum(1 for _, ms_ in ended if ms_ >= 1000)
    print(f"  server ({name}): {len(ended)} transitions ended, {timeouts} at the settle timeout,"
          f" {over} took 1 s or more (longest {longest} ms); {kicked} clients kicked,"
          f" {abuse} closed for abuse; {aside} set aside, {late} acknowledgements late")
EOF
echo "files: $dir"
exit "$status"
