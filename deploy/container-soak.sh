#!/usr/bin/env bash
# The soak in real containers: a fleet of two servers (server A, `server`, and `server-b`) on one
# PostgreSQL store, and three swarms of simulated clients (a, b, c) that connect to server A, on a
# private Docker network (deploy/compose.yaml), with kills, cut-offs, restarts and travels
# between the servers. Fails unless all of this holds:
#   kill     `docker kill` of swarm a while server A waits for clients: the transition is
#            released within the idle timeout (4 s, deploy/container.toml; 2 s of margin) and
#            the other swarms are placed; a's players are dropped; a, started again, is placed;
#   cut      `docker network disconnect` of swarm b mid-transition, connected again 5 s later:
#            every one of b's players logs in again (a reconnect) and is placed;
#   restart  `docker restart` of server A: the old process drained (no save left) and exited
#            0, the session save restores the world's node, every player logs in again (the
#            swarms reconnect) and is placed, no save or load fails;
#   travel   a travel to `isle` on server A (`gatehouse-server probe --post /travel/isle`, between
#            two of its route's transitions) moves its players to server-b behind one loading
#            screen: server A's players_travelled and server-b's travellers_placed rise, and
#            every client is placed (on one server or the other) since the travel ended; then a
#            travel on server-b to the node server A stands on (started while A is between
#            transitions: a server grants seats only then, and only for the node it stands on;
#            a refusal is retried, 5 times at most) brings them back: server-b's
#            players_travelled and server A's travellers_placed rise, every client placed;
#   kill-destination
#            `docker kill` of server-b in the middle of a move to it (some travellers' claims
#            committed there, others still in their join): server A sends the unplaced back
#            (its travellers_sent_back rises within the peer link's idle timeout, 3 s, plus 4 s
#            of margin) and each of them is placed on server A; server-b, started again
#            (`docker start`), rejoins: every client is placed again, and a travel there and
#            back moves players both ways;
#   reports  every swarm's report is clean (gatehouse-sim --check);
#   drain    `docker stop` of server A with a fresh swarm's players connected: it saves every
#            one of them and exits 0, and the saves are there afterwards (`saves list` in a
#            container of server A on the same store), every earlier player's save newer than
#            before the restart.
# It prints each step's timing, the travel counters, and server A's memory at the start and the
# end (docker stats). Everything it creates (containers, network, volumes) is removed at the end,
# pass or fail.
#
#   deploy/container-soak.sh                    # builds the images; 3 swarms x 12 clients, 150 s
#   CLIENTS=6 DURATION=120s deploy/container-soak.sh   # the short run CI does
#   SKIP_BUILD=1 deploy/container-soak.sh       # the images exist already (deploy/images.sh)
#   SOAK_LOGS=DIR deploy/container-soak.sh      # keep every container's log in DIR, and the
#                                               # swarms' JSON reports
#
# Needs Docker and Compose (`docker compose`, else `docker-compose`), jq, and no registry.
# Nothing is published on the host: the servers are observed through their admin endpoints
# (`docker exec SERVER gatehouse-server probe /state`, `/metrics`; a travel is started with
# `probe --post /travel/NODE`) and their JSON logs (`docker logs`).
set -euo pipefail
cd "$(dirname "$0")/.."

clients=${CLIENTS:-12}
duration=${DURATION:-150s}
tag=${TAG:-dev}
cut_s=5
idle_s=4 # network.idle_timeout_ms in deploy/container.toml
margin_s=2
peer_idle_s=3 # fleet.peer_idle_timeout_ms (default): a destination silent this long is lost
# What the travel steps take at most, so the swarms must still run that long after the restart.
travel_budget_s=60

dur_s=${duration%s}
if ! [[ $dur_s =~ ^[0-9]+$ ]] || ((dur_s < 110)); then
    echo "error: DURATION: expected whole seconds, at least 110s (the kills, cut and restart take about 45 s, the travels up to $travel_budget_s s), found $duration" >&2
    exit 2
fi
if ! [[ $clients =~ ^[0-9]+$ ]] || ((clients < 1 || clients > 99)); then
    echo "error: CLIENTS: expected 1 to 99 clients per swarm, found $clients" >&2
    exit 2
fi
if docker compose version >/dev/null 2>&1; then
    compose=(docker compose)
elif command -v docker-compose >/dev/null 2>&1; then
    compose=(docker-compose)
else
    echo "error: neither \`docker compose\` nor \`docker-compose\` is installed" >&2
    exit 2
fi
command -v jq >/dev/null || { echo "error: jq is needed to read the server's state" >&2; exit 2; }

project=gatehouse-soak-$$
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gatehouse-container-soak.XXXXXX")
# Fresh secrets per run, through the environment only (printable, no spaces).
GATEHOUSE_ADMIN_TOKEN=$(head -c 24 /dev/urandom | base64 | tr -d '/+=')
GATEHOUSE_TOKEN_KEY=$(head -c 32 /dev/urandom | base64 | tr -d '/+=')
GATEHOUSE_TICKET_KEY=$(head -c 48 /dev/urandom | base64 | tr -d '/+=')
export GATEHOUSE_ADMIN_TOKEN GATEHOUSE_TOKEN_KEY GATEHOUSE_TICKET_KEY
export IMAGE_TAG=$tag SIM_CLIENTS=$clients SIM_DURATION=${dur_s}s

dc() { "${compose[@]}" -p "$project" -f deploy/compose.yaml --profile drain "$@"; }

summary=()
server=
server_b=

cleanup() {
    local rc=$?
    set +e
    if ((rc != 0)); then
        echo
        echo "== the last log lines of each container"
        for c in $(dc ps -q 2>/dev/null); do
            echo "-- $(docker inspect -f '{{.Name}}' "$c" 2>/dev/null)"
            docker logs --tail 12 "$c" 2>&1 | cut -c1-400
        done
    fi
    if [ -n "${SOAK_LOGS:-}" ]; then
        mkdir -p "$SOAK_LOGS"
        for c in $(dc ps -q 2>/dev/null); do
            docker logs "$c" >"$SOAK_LOGS/$(docker inspect -f '{{.Name}}' "$c" | tr -d /).log" 2>&1
        done
        cp "$tmp"/report-*.json "$SOAK_LOGS/" 2>/dev/null
        echo "container logs (and the swarms' reports) kept in $SOAK_LOGS"
    fi
    docker rm -f "$project-saves" >/dev/null 2>&1
    dc down -v --remove-orphans -t 5 >"$tmp/down.log" 2>&1 || cat "$tmp/down.log"
    rm -rf "$tmp"
    if ((rc == 0)); then echo "container soak: passed"; else echo "container soak: FAILED"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now_ms() { date +%s%3N; }
stamp() { date -u +%Y-%m-%dT%H:%M:%S.%NZ; }
# since T: seconds (one decimal) from now_ms T to now
since() { awk -v ms=$(($(now_ms) - $1)) 'BEGIN { printf "%.1f", ms / 1000 }'; }
fail() {
    echo "FAIL: $*" >&2
    exit 1
}
step() {
    echo
    echo "== $*"
}
# note WHAT VALUE: one result line, also kept for the summary
note() {
    printf '   %-52s %s\n' "$1" "$2"
    summary+=("$(printf '%-60s %s' "$1" "$2")")
}

# wait_until SECONDS WHAT COMMAND...: polls COMMAND until it succeeds; fails after SECONDS.
wait_until() {
    local limit=$1 what=$2
    shift 2
    local end=$(($(now_ms) + limit * 1000))
    until "$@"; do
        (($(now_ms) < end)) || fail "$what: not within $limit s"
        sleep 0.2
    done
}

# state_of CONTAINER: a server's state (GET /state on its admin endpoint), or nothing if it does
# not answer; `state` is server A's.
state_of() { docker exec "$1" /usr/local/bin/gatehouse-server probe /state 2>/dev/null; }
state() { state_of "$server"; }
# q EXPR: jq EXPR over the state; empty if the server does not answer.
q() { state | jq -r "$1" 2>/dev/null || true; }
# Players of the swarm whose first index is $lo: sim-0000.. for a, sim-0100.. for b, and so on.
swarm_jq='def swarm($lo): [.players[] | select((.player | ltrimstr("sim-") | tonumber) as $i
    | $i >= $lo and $i < $lo + 100)];'
present() { q "$swarm_jq swarm($1) | length"; }
# all_placed LO...: every client of each of these swarms is logged in and placed (one state).
all_placed() {
    local s lo
    s=$(state) || return 1
    for lo in "$@"; do
        [ "$(jq -r "$swarm_jq [swarm($lo)[] | select(.placed)] | length" <<<"$s" 2>/dev/null)" = "$clients" ] ||
            return 1
    done
}
gone() { [ "$(present "$1")" = 0 ]; }
in_transition() {
    local p
    p=$(q .phase)
    [ -n "$p" ] && [ "$p" != None ]
}
healthy() { docker exec "$server" /usr/local/bin/gatehouse-server probe >/dev/null 2>&1; }
health_status() { [ "$(docker inspect -f '{{.State.Health.Status}}' "$server")" = healthy ]; }
mem() { docker stats --no-stream --format '{{.MemUsage}}' "$server" | cut -d/ -f1 | tr -d ' '; }

# server_log SINCE JQ: jq JQ over each of the server's JSON log lines since SINCE.
server_log() { docker logs --since "$1" "$server" 2>&1 | jq -R -r "fromjson? | $2"; }
# log_after SINCE JQ: seconds from SINCE to the first server log line since SINCE that JQ
# selects (by the line's own timestamp), or "none".
log_after() {
    local at
    at=$(server_log "$1" "select($2) | .timestamp" | sed -n 1p)
    [ -n "$at" ] || { echo none; return; }
    awk -v ms=$(($(date -d "$at" +%s%3N) - $(date -d "$1" +%s%3N))) 'BEGIN { printf "%.1f", ms / 1000 }'
}
# dropped_after SINCE LO: seconds from SINCE until the server had dropped every player of swarm
# LO (the latest of each player's first "player left" since SINCE), or "none".
dropped_after() {
    local at
    at=$(server_log "$1" "select(.message == \"player left\" and ($(in_swarm_jq "$2"))) | \"\(.player) \(.timestamp)\"" |
        awk '!seen[$1]++ { print $2 }' | sort | sed -n '$p')
    [ -n "$at" ] || { echo none; return; }
    awk -v ms=$(($(date -d "$at" +%s%3N) - $(date -d "$1" +%s%3N))) 'BEGIN { printf "%.1f", ms / 1000 }'
}
in_swarm_jq() { echo "(.player // \"\" | ltrimstr(\"sim-\") | tonumber? // -1) as \$i | \$i >= $1 and \$i < $1 + 100"; }
# logins_since SINCE LO: distinct players of swarm LO that logged in since SINCE.
logins_since() {
    server_log "$1" "select(.message == \"player logged in\") | .player" |
        awk -v lo="$2" '{ i = substr($0, 5) + 0 } i >= lo && i < lo + 100' | sort -u | wc -l
}
# swarm_back SINCE LO...: every client of each swarm logged in again since SINCE, and is placed.
swarm_back() {
    local at=$1 lo
    shift
    for lo in "$@"; do [ "$(logins_since "$at" "$lo")" = "$clients" ] || return 1; done
    all_placed "$@"
}
# lost_since CONTAINER SINCE: distinct clients of a swarm that reported a lost connection.
lost_since() {
    docker logs --since "$2" "$1" 2>&1 | grep 'connection lost; reconnecting' |
        grep -o 'player=sim-[0-9]*' | sort -u | wc -l
}
# `saves list` in a container of server A (its config, on the store both servers share).
saves_list() { dc run --rm --no-deps -T --name "$project-saves" server saves list 2>"$tmp/saves.log"; }
# versions: "PLAYER VERSION" for every player row of `saves list` on stdin.
versions() { awk '/^sim-/ { print $1, $NF }' | sort; }
# The route of config/soak-world.toml: where a travel from node $1 goes.
next_node() {
    case $1 in marsh) echo crypt ;; crypt) echo harbor ;; *) echo marsh ;; esac
}

# metric CONTAINER SERIES: the value of one series of a server's /metrics (e.g.
# gatehouse_players, or gatehouse_transition_phase{phase="None"}), or nothing if it does not
# answer. /metrics samples the core when asked (/state may be a second old).
metric() {
    docker exec "$1" /usr/local/bin/gatehouse-server probe /metrics 2>/dev/null |
        awk -v series="$2" '$1 == series { print $2; exit }'
}
# counter CONTAINER NAME: the core's decision counter NAME (gatehouse_NAME_total), 0 if absent.
counter() { local v; v=$(metric "$1" "gatehouse_${2}_total"); echo "${v:-0}"; }
# above CONTAINER NAME VALUE: the counter NAME has risen above VALUE.
above() { local v; v=$(metric "$1" "gatehouse_${2}_total") && [ -n "$v" ] && ((v > $3)); }
# between_transitions CONTAINER: the server's phase is None now. (A travel's Moving phase has no
# series of gatehouse_transition_phase: every series is 0 then, so it is not None either.)
between_transitions() { [ "$(metric "$1" 'gatehouse_transition_phase{phase="None"}')" = 1 ]; }
# node_of CONTAINER: the node whose levels the server streams.
node_of() {
    docker exec "$1" /usr/local/bin/gatehouse-server probe /metrics 2>/dev/null |
        sed -n 's/^gatehouse_world_node_info{node="\([^"]*\)"} 1$/\1/p'
}
# travel_to CONTAINER NODE: an operator travel (POST /travel/NODE with the admin token).
travel_to() {
    docker exec "$1" /usr/local/bin/gatehouse-server probe --post "/travel/$2" >/dev/null ||
        fail "POST /travel/$2 on $(docker inspect -f '{{.Name}}' "$1")"
}
# The swarms' player ids, one a line: sim-0000.. for a, sim-0100.. for b, sim-0200.. for c.
swarm_players() {
    local lo i
    for lo in 0 100 200; do
        for ((i = lo; i < lo + clients; i++)); do printf 'sim-%04d\n' "$i"; done
    done
}
# placed_on CONTAINER: the players placed on a server now, one a line (nothing if it does not
# answer).
placed_on() { state_of "$1" | jq -r '.players[] | select(.placed) | .player' 2>/dev/null; }
# wait_fleet_placed SECONDS WHAT: waits until every client of the three swarms has been seen
# placed, on one server or the other, since the wait began. The swarms relaunch throughout (a
# relaunch is a join of a few seconds), so with every client placed at some moment since, not all
# at one moment; a failure names who never was, and where each server's players stand.
wait_fleet_placed() {
    local end=$(($(now_ms) + $1 * 1000)) seen=$tmp/seen-placed missing
    : >"$seen"
    while true; do
        { placed_on "$server"; placed_on "$server_b"; } >>"$seen"
        missing=$(swarm_players | { grep -vxF -f "$seen" || true; } | tr '\n' ' ')
        [ -n "$missing" ] || return 0
        (($(now_ms) < end)) || fail "$2: not within $1 s: never placed since: $missing($(fleet_unplaced))"
        sleep 0.3
    done
}
# fleet_unplaced: each server's players that are not placed there now (for a failure's message).
fleet_unplaced() {
    local a b
    a=$(state_of "$server" | jq -r '[.players[] | select(.placed | not) | .player] | join(" ")' 2>/dev/null)
    b=$(state_of "$server_b" | jq -r '[.players[] | select(.placed | not) | .player] | join(" ")' 2>/dev/null)
    echo "not placed on server A now: ${a:-none or no answer}; on server-b: ${b:-none or no answer}"
}
# half_placed_at CONTAINER CLAIMED: in the middle of a move to the server: some travellers'
# claims committed there (travellers_placed above CLAIMED) while others are still in their join
# (players logged in there that are not placed). One scrape.
half_placed_at() {
    docker exec "$1" /usr/local/bin/gatehouse-server probe /metrics 2>/dev/null | awk -v claimed="$2" '
        $1 == "gatehouse_players" { players = $2 }
        $1 == "gatehouse_placed_players" { placed = $2 }
        $1 == "gatehouse_travellers_placed_total" { total = $2 }
        END { exit !(total > claimed && players > placed) }'
}
# swarms_left: seconds until the swarms' runs end.
swarms_left() { echo $((dur_s - ($(now_ms) - swarms_started) / 1000)); }

# move_to_b WHAT: a travel to isle on server A between two of its transitions; waits until
# server-b placed travellers and every client is placed again. Sets moved (players travelled).
move_to_b() {
    local what=$1 t travelled0 placed0
    wait_until 30 "server A between transitions" between_transitions "$server"
    travelled0=$(counter "$server" players_travelled)
    placed0=$(counter "$server_b" travellers_placed)
    t=$(now_ms)
    travel_to "$server" isle
    wait_until 30 "$what: server A's players_travelled rising" above "$server" players_travelled "$travelled0"
    wait_until 30 "$what: server-b's travellers_placed rising" above "$server_b" travellers_placed "$placed0"
    wait_until 30 "$what: server A's travel ended" between_transitions "$server"
    wait_fleet_placed 30 "$what: every client placed"
    moved=$(($(counter "$server" players_travelled) - travelled0))
    note "$what: to server-b (travel to isle on server A)" "$(since "$t") s: $moved travelled, $(($(counter "$server_b" travellers_placed) - placed0)) placed there"
}

# move_to_a WHAT: a travel on server-b to the node server A stands on, started while A is between
# transitions; server A refuses seats while its route's next transition runs (Busy) or once it
# stands elsewhere (WrongNode), which sends them back on server-b: then again, up to 5 times.
move_to_a() {
    local what=$1 t attempt node travelled0 placed0 sent0 started
    # A travel of nobody asks no server and moves no counter.
    [ "$(metric "$server_b" gatehouse_placed_players)" != 0 ] || fail "$what: nobody placed on server-b to bring back"
    placed0=$(counter "$server" travellers_placed)
    started=$(now_ms)
    for attempt in 1 2 3 4 5; do
        wait_until 30 "server A between transitions" between_transitions "$server"
        node=$(node_of "$server")
        travelled0=$(counter "$server_b" players_travelled)
        sent0=$(counter "$server_b" travellers_sent_back)
        t=$(now_ms)
        travel_to "$server_b" "$node"
        wait_until 30 "$what: server-b's travel placing or sending back" \
            eval 'above "$server_b" players_travelled "$travelled0" || above "$server_b" travellers_sent_back "$sent0"'
        wait_until 30 "$what: server-b's travel ended" between_transitions "$server_b"
        if above "$server_b" players_travelled "$travelled0"; then
            break
        fi
        echo "   (attempt $attempt: server A refused the seats on $node; again)"
        ((attempt < 5)) || fail "$what: server A refused server-b's travellers 5 times"
    done
    wait_until 30 "$what: server A's travellers_placed rising" above "$server" travellers_placed "$placed0"
    wait_fleet_placed 30 "$what: every client placed"
    note "$what: back to server A (travel to $node on server-b)" "$(since "$t") s: $(($(counter "$server_b" players_travelled) - travelled0)) travelled, $(($(counter "$server" travellers_placed) - placed0)) placed there; attempts $attempt, $(since "$started") s in all"
}

soak_started=$(now_ms)

step "images"
if [ -z "${SKIP_BUILD:-}" ]; then
    t=$(now_ms)
    # The soak runs no Agones: the agones image is not built (deploy/images.sh).
    AGONES=0 TAG=$tag deploy/images.sh
    note "images built (static binaries and FROM scratch)" "$(since "$t") s"
else
    echo "   SKIP_BUILD: using the images built before"
fi
for image in "gatehouse-server:$tag" "gatehouse-sim:$tag" "gatehouse-postgres:$tag"; do
    size=$(docker image inspect -f '{{.Size}}' "$image" 2>/dev/null) ||
        fail "no image $image: run deploy/images.sh"
    note "image $image" "$(awk -v s="$size" 'BEGIN { printf "%.1f MB", s / 1e6 }')"
done

step "start: PostgreSQL, servers A and B, then swarms a, b, c ($clients clients each, ${dur_s} s each)"
t=$(now_ms)
# The servers wait for the store's health check (depends_on): each opens the store at its start.
dc up -d server server-b >"$tmp/up.log" 2>&1 || { cat "$tmp/up.log"; fail "compose up of the servers"; }
note "PostgreSQL healthy, servers started (compose up)" "$(since "$t") s"
server=$(dc ps -q server)
server_b=$(dc ps -q server-b)
wait_until 60 "server A's health check" health_status
wait_until 60 "server-b's health check" eval '[ "$(docker inspect -f "{{.State.Health.Status}}" "$server_b")" = healthy ]'
note "servers A and B healthy (HEALTHCHECK: gatehouse-server probe)" "$(since "$t") s"
network=$(docker inspect -f '{{range $name, $_ := .NetworkSettings.Networks}}{{$name}}{{end}}' "$server")
[ "$(docker network inspect -f '{{.Internal}}' "$network")" = true ] ||
    fail "network $network is not internal"
t=$(now_ms)
dc up -d sim-a sim-b sim-c >"$tmp/up.log" 2>&1 || { cat "$tmp/up.log"; fail "compose up of the swarms"; }
sim_a=$(dc ps -q sim-a)
sim_b=$(dc ps -q sim-b)
sim_c=$(dc ps -q sim-c)
swarms_started=$(now_ms)
wait_until 60 "every player placed" all_placed 0 100 200
note "all $((3 * clients)) players placed" "$(since "$t") s"
mem_start=$(mem)
note "server memory at the start (docker stats)" "$mem_start"

step "kill: docker kill of swarm a while the server waits for clients"
waiting_id=
waiting_for_clients() {
    local s
    s=$(state) || return 1
    [ "$(jq -r .phase <<<"$s")" = WaitingForClients ] || return 1
    waiting_id=$(jq -r .transition_id <<<"$s")
}
released() {
    local id
    id=$(q .transition_id)
    [ -n "$id" ] && [ "$id" != "$waiting_id" ]
}
wait_until 30 "a transition waiting for clients" waiting_for_clients
kill_at=$(stamp)
docker kill "$sim_a" >/dev/null
t=$(now_ms)
wait_until $((idle_s + margin_s)) "transition $waiting_id released after the kill" released
note "transition $waiting_id released after the kill (polled)" "$(since "$t") s (bound: idle timeout $idle_s s + $margin_s s)"
wait_until 20 "swarms b and c placed after the release" all_placed 100 200
wait_until $((idle_s + margin_s)) "swarm a's players dropped" gone 0
note "  swarm a's players dropped (server log)" "$(dropped_after "$kill_at" 0) s after the kill"
note "  the transition ended (server log)" "$(log_after "$kill_at" '.message == "every player placed; transition ended"') s after the kill"
t=$(now_ms)
docker start "$sim_a" >/dev/null
wait_until 30 "swarm a placed again" all_placed 0
note "swarm a started again and placed" "$(since "$t") s"

step "cut: docker network disconnect of swarm b mid-transition, connected again $cut_s s later"
wait_until 30 "a transition in flight" in_transition
phase=$(q .phase)
cut_at=$(stamp)
t=$(now_ms)
docker network disconnect "$network" "$sim_b"
sleep "$cut_s"
docker network connect "$network" "$sim_b"
back=$(now_ms)
note "swarm b cut off during $phase" "for $(since "$t") s"
note "  swarm b's players dropped (server log)" "$(dropped_after "$cut_at" 100) s after the cut"
wait_until 40 "every client of swarm b logged in again and placed" swarm_back "$cut_at" 100
note "swarm b's $clients clients logged in again and placed" "$(since "$back") s after the reconnect"
note "  of which reported the lost connection" "$(lost_since "$sim_b" "$cut_at")/$clients (the others were relaunching: soak churn)"

step "restart: docker restart of the server"
saves_list >"$tmp/saves-before" || { cat "$tmp/saves.log"; fail "saves list before the restart"; }
s0=$(q '.streamed_node // "none"')
t0=$(q '.transition_target // empty')
address() { docker inspect -f "{{(index .NetworkSettings.Networks \"$network\").IPAddress}}" "$server"; }
address_before=$(address)
restart_at=$(stamp)
t=$(now_ms)
docker restart -t 30 "$server" >/dev/null
note "docker restart returned" "$(since "$t") s"
wait_until 30 "the server answering again" healthy
note "server answering again" "$(since "$t") s after the restart"
wait_until 60 "every player logged in again and placed" swarm_back "$restart_at" 0 100 200
note "all $((3 * clients)) players logged in again and placed" "$(since "$t") s after the restart"
# The swarms resolved `server` once, at their start.
[ "$(address)" = "$address_before" ] || fail "the server's address changed at the restart"
left_s=$(swarms_left)
((left_s >= travel_budget_s)) ||
    fail "the restart ended $left_s s before the swarms' end, less than the travels' $travel_budget_s s: raise DURATION"
note "kills, cut and restart over; the swarms run on for" "$left_s s"
exit_code=$(docker events --since "$restart_at" --until "$(stamp)" --filter "container=$server" \
    --filter event=die --format '{{index .Actor.Attributes "exitCode"}}' | sed -n 1p)
[ "$exit_code" = 0 ] || fail "the restarted server's old process exited with '${exit_code}', not 0"
left=$(server_log "$restart_at" 'select(.message == "store drained") | .left' | sed -n 1p)
[ "$left" = 0 ] || fail "the restart's drain left '${left}' saves, not 0"
restored=$(server_log "$restart_at" \
    'select(.message == "session save restores the world'"'"'s node") | .node' | sed -n 1p)
[ -n "$restored" ] || fail "no session save restored after the restart"
# The drain saves the node the world stands on, or the one it was told to go to: a travel may
# have started between the state read above and the signal.
case " $s0 $t0 $(next_node "${t0:-$s0}") " in
*" $restored "*) ;;
*) fail "the session restored node $restored; before the restart the world had streamed $s0${t0:+ and was travelling to $t0}" ;;
esac
note "old process exit code / saves left at its drain" "$exit_code / $left"
note "session node restored" "$restored (before: streamed $s0${t0:+, travelling to $t0})"
for s in a b c; do
    c=sim_$s
    note "  swarm $s clients that reported the lost connection" "$(lost_since "${!c}" "$restart_at")/$clients"
done
failures=$(server_log "$restart_at" \
    'select(.level == "WARN" and (.message // "" | test("save|load"))) | .message' | sort | uniq -c)
[ -z "$failures" ] || fail "save or load failures after the restart: $failures"

step "travel: every player to server-b and back"
travel_started=$(now_ms)
move_to_b "travel"
((moved > 0)) || fail "travel: nobody moved to server-b"
move_to_a "travel"
note "  travel counters: server A travelled / placed / sent back" "$(counter "$server" players_travelled) / $(counter "$server" travellers_placed) / $(counter "$server" travellers_sent_back)"
note "  travel counters: server-b travelled / placed / sent back" "$(counter "$server_b" players_travelled) / $(counter "$server_b" travellers_placed) / $(counter "$server_b" travellers_sent_back)"

step "kill-destination: docker kill of server-b while players move to it, then docker start"
wait_until 30 "server A between transitions" between_transitions "$server"
sent0=$(counter "$server" travellers_sent_back)
travelled0=$(counter "$server" players_travelled)
claimed0=$(counter "$server_b" travellers_placed)
address_b=$(docker inspect -f "{{(index .NetworkSettings.Networks \"$network\").IPAddress}}" "$server_b")
travel_to "$server" isle
t=$(now_ms)
# Killed once the first travellers are placed there and before the last are: both kinds of
# player lose it (the joins there last a second or two: the swarms stream 0.6 to 1.2 s a level).
wait_until 20 "server-b half way through the move (some claimed, some joining)" \
    half_placed_at "$server_b" "$claimed0"
kill_at=$(stamp)
docker kill "$server_b" >/dev/null
note "server-b killed mid-move" "$(since "$t") s after the travel to isle: some placed there, some in their join"
t=$(now_ms)
wait_until $((peer_idle_s + 4)) "server A sending the unplaced players back" \
    above "$server" travellers_sent_back "$sent0"
note "  server A sent the unplaced back (polled)" "$(since "$t") s after the kill (bound: peer idle timeout $peer_idle_s s + 4 s)"
wait_until 30 "server A's travel ended" between_transitions "$server"
note "  players placed on server-b / sent back (server A's counters)" "$(($(counter "$server" players_travelled) - travelled0)) / $(($(counter "$server" travellers_sent_back) - sent0)); recalls unconfirmed: $(counter "$server" recalls_unconfirmed)"
note "  the travel ended (server A's log)" "$(log_after "$kill_at" '.message == "travel to another server ended"') s after the kill"
# The players sent back are server A's again: placed there by the transition ending the travel
# (each seen placed there since the kill: the swarms relaunch throughout).
# A recall that lost to server-b's claim left its player there (counted travelled).
returned=$(comm -23 <(server_log "$kill_at" \
    'select(.message == "recalling a moving player" or .message == "moving player sent back") | .player' |
    sort -u) <(server_log "$kill_at" \
    'select(.message == "recall lost to the destination'"'"'s claim: placed there") | .player' | sort -u))
[ -n "$returned" ] || fail "server A's log names no player recalled or sent back after the kill"
seen=$tmp/seen-returned
: >"$seen"
placed_back() {
    placed_on "$server" >>"$seen"
    [ -z "$(grep -vxF -f "$seen" <<<"$returned")" ]
}
wait_until 30 "the players sent back placed on server A" placed_back
note "  the players sent back, placed on server A" "$(wc -l <<<"$returned") ($(tr '\n' ' ' <<<"$returned" | sed 's/ $//'))"
t=$(now_ms)
docker start "$server_b" >/dev/null
wait_until 30 "server-b answering again" eval 'docker exec "$server_b" /usr/local/bin/gatehouse-server probe >/dev/null 2>&1'
note "server-b started again, answering" "$(since "$t") s (address $( [ "$(docker inspect -f "{{(index .NetworkSettings.Networks \"$network\").IPAddress}}" "$server_b")" = "$address_b" ] && echo kept || echo changed))"
wait_fleet_placed 60 "every client placed again, on either server"
note "every client placed again (those server-b had placed reconnected)" "$(since "$t") s after the start"
((left_s = $(swarms_left), left_s >= 25)) || fail "the swarms end in $left_s s: too soon for the rejoin (raise DURATION)"
move_to_b "rejoin"
move_to_a "rejoin"
note "travel steps" "$(since "$travel_started") s; the swarms run on for $(swarms_left) s"

step "reports: each swarm's run ends, its report clean (--check)"
unclean=()
for s in a b c; do
    c=sim_$s
    code=$(timeout $((dur_s + 90)) docker wait "${!c}") || fail "swarm $s still running"
    docker cp "${!c}:/tmp/report.json" "$tmp/report-$s.json" 2>/dev/null || true
    line=$(jq -r '"placed \(.clients_placed)/\(.clients), errors \(.errors), transitions \(.transitions_completed), relaunches \(.relaunches), deaths/respawns \(.deaths)/\(.respawns), transition p99 \(.timings.shown_to_ended.p99_us / 1000 | floor) ms, gate violations \(.gates.gate_violations)"' \
        "$tmp/report-$s.json" 2>/dev/null || echo "no report")
    note "swarm $s: exit $code" "$line"
    if [ "$code" != 0 ]; then
        unclean+=("$s")
        note "  swarm $s's problems" "$(jq -r '.problems | join("; ")' "$tmp/report-$s.json" 2>/dev/null || echo "no report")"
    fi
done
# Every swarm's report first, then the verdict.
((${#unclean[@]} == 0)) || fail "the reports of swarms ${unclean[*]} are not clean"
mem_end=$(mem)
note "server memory at the end (docker stats)" "$mem_end (at the start: $mem_start)"

step "drain: docker stop of server A with swarm drain's $clients players connected"
dc up -d sim-drain >"$tmp/up.log" 2>&1 || { cat "$tmp/up.log"; fail "compose up of swarm drain"; }
sim_d=$(dc ps -q sim-drain)
wait_until 40 "swarm drain placed" all_placed 300
stop_at=$(stamp)
t=$(now_ms)
docker stop -t 30 "$server" >/dev/null
note "docker stop returned" "$(since "$t") s"
docker rm -f "$sim_d" >/dev/null # its clients would keep trying to reconnect
exit_code=$(docker inspect -f '{{.State.ExitCode}}' "$server")
[ "$exit_code" = 0 ] || fail "the server exited with $exit_code, not 0"
drained=$(server_log "$stop_at" \
    'select(.message == "draining: saving every player and the session") | .players' | sed -n 1p)
left=$(server_log "$stop_at" 'select(.message == "store drained") | .left' | sed -n 1p)
[ "$drained" = "$clients" ] || fail "the drain saved '${drained}' players, not the $clients connected"
[ "$left" = 0 ] || fail "the drain left '${left}' saves, not 0"
note "exit code / players saved at the drain / saves left" "$exit_code / $drained / $left"
saves_list >"$tmp/saves-after" || { cat "$tmp/saves.log"; fail "saves list after the stop"; }
listed=$(awk '/^sim-03/' "$tmp/saves-after" | wc -l)
[ "$listed" = "$clients" ] || fail "saves list shows $listed of swarm drain's $clients players"
grep -q '^session server-a:' "$tmp/saves-after" || fail "saves list shows no session save of server A"
note "saves list on the store: swarm drain's players" "$listed/$clients; $(grep '^session server-a:' "$tmp/saves-after")"
stale=$(join <(versions <"$tmp/saves-before") <(versions <"$tmp/saves-after") |
    awk '$3 <= $2 { print $1 " " $2 "->" $3 }')
[ -z "$stale" ] || fail "saves not newer than before the restart: $stale"
note "players saved before the restart, newer at the end" "$(versions <"$tmp/saves-before" | wc -l)"

echo
echo "== summary (${compose[*]}, $(docker version -f '{{.Server.Version}}' 2>/dev/null), $(since "$soak_started") s in all)"
printf '   %s\n' "${summary[@]}"
