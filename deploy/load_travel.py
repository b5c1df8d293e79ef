#!/usr/bin/env python3
"""The travel benchmark's helpers (deploy/load-travel.sh): free ports, bounded waits on a
server's /metrics, and the table of figures.

  load_travel.py ports N                         N free loopback ports, one per line
  load_travel.py wait ADMIN NAME OP VALUE SECS   poll ADMIN/metrics until gatehouse_NAME OP VALUE
                                                 (OP: ge, le, eq); exit 1 at the bound
  load_travel.py metrics ADMIN OUT               the server's counters and gauges as JSON
  load_travel.py table DIR                       the figures from DIR's files, and DIR/travel.json:
                                                 each loading screen also as a ratio to the bare
                                                 QUIC floor F(N) in DIR/floor.json (its round,
                                                 p50 to p50, p99 to p99); with "check" in
                                                 DIR/run.json, exit 1 unless every player was
                                                 placed with no save older than its handoff

Every wait is bounded; nothing here asserts a figure: the table is a benchmark's output.
"""

import json
import socket
import sys
import time
import urllib.request


def ports(n):
    """N ports free now on 127.0.0.1 for both UDP and TCP (each socket released at once: a
    benchmark's race, not a test's)."""
    out = []
    while len(out) < n:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            udp.bind(("127.0.0.1", 0))
            port = udp.getsockname()[1]
            try:
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
                    tcp.bind(("127.0.0.1", port))
            except OSError:
                continue
        if port not in out:
            out.append(port)
    return out


def metrics(admin):
    """The admin endpoint's counters and gauges, by name (with its labels, if any) without the
    gatehouse_ prefix."""
    with urllib.request.urlopen(f"http://{admin}/metrics", timeout=5.0) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("gatehouse_"):
            # A labelled series keeps its labels: transitions_ended_total{outcome="completed"}.
            name, _, value = line.rpartition(" ")
            try:
                out[name[len("gatehouse_"):]] = float(value)
            except ValueError:
                pass
    return out


def wait(admin, name, op, value, secs):
    deadline = time.monotonic() + secs
    test = {"ge": lambda a: a >= value, "le": lambda a: a <= value, "eq": lambda a: a == value}[op]
    seen = None
    while time.monotonic() < deadline:
        try:
            seen = metrics(admin).get(name)
        except OSError:
            seen = None
        if seen is not None and test(seen):
            return 0
        time.sleep(0.2)
    print(f"load_travel.py: {admin} gatehouse_{name} is {seen}, waited {secs} s for {op} {value}",
          file=sys.stderr)
    return 1


def ms(us):
    return "-" if us is None else f"{us / 1000:.0f}"


def ratio(us, floor_us):
    """A figure as a multiple of the floor's, as deploy/load.py prints them."""
    return None if us is None or not floor_us else us / floor_us


def times(x):
    return "n/a" if x is None else f"{x:.1f}×"


def load(path):
    """A JSON file, or None if it is missing or unreadable (a floor that failed)."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def floor_ms(us):
    """The floor's round in ms, to the µs (it is far below a loading screen)."""
    return "n/a" if us is None else f"{us / 1000:.3f}"


def table(d):
    with open(f"{d}/report.json") as f:
        report = json.load(f)
    with open(f"{d}/a-end.json") as f:
        a = json.load(f)
    with open(f"{d}/b-end.json") as f:
        b = json.load(f)
    with open(f"{d}/run.json") as f:
        run = json.load(f)
    floor = (load(f"{d}/floor.json") or {}).get("round") or {}
    f50, f99 = floor.get("p50_us"), floor.get("p99_us")
    timings = report.get("timings", {})
    shown = timings.get("shown_to_ended", {})
    moved = timings.get("moved", {})
    n = run["clients"]
    figures = {
        "clients": n,
        "placed_on_destination": b.get("placed_players"),
        "players_left_on_source": a.get("players"),
        "players_travelled": a.get("players_travelled_total"),
        "travellers_placed": b.get("travellers_placed_total"),
        "travellers_sent_back": a.get("travellers_sent_back_total"),
        "tickets_refused": b.get("tickets_refused_total"),
        "older_saves": run.get("older_saves"),
        "same_server_p50_ms": shown.get("p50_us", 0) / 1000,
        "same_server_p99_ms": shown.get("p99_us", 0) / 1000,
        "move_p50_ms": moved.get("p50_us", 0) / 1000,
        "move_p99_ms": moved.get("p99_us", 0) / 1000,
        "moves_counted": moved.get("count"),
        "floor_round_p50_ms": None if f50 is None else f50 / 1000,
        "floor_round_p99_ms": None if f99 is None else f99 / 1000,
        "same_server_p50_per_floor": ratio(shown.get("p50_us"), f50),
        "same_server_p99_per_floor": ratio(shown.get("p99_us"), f99),
        "move_p50_per_floor": ratio(moved.get("p50_us"), f50),
        "move_p99_per_floor": ratio(moved.get("p99_us"), f99),
        "floor_loadavg": run.get("floor_loadavg"),
        "loadavg": run.get("loadavg"),
    }
    with open(f"{d}/travel.json", "w") as f:
        json.dump(figures, f, indent=2)
    lost = n - int(figures["placed_on_destination"] or 0)
    print(f"travel benchmark: {n} players moved from one server to another, "
          f"load average {figures['floor_loadavg']} before the floor, "
          f"{figures['loadavg']} at the end")
    print(f"  floor F({n}): round p50 {floor_ms(f50)} ms  p99 {floor_ms(f99)} ms")
    print(f"  placed on the destination      {figures['placed_on_destination']:.0f} of {n} "
          f"(lost {lost}); left on the source {figures['players_left_on_source']:.0f}")
    print(f"  travelled / placed / sent back  {figures['players_travelled']:.0f} / "
          f"{figures['travellers_placed']:.0f} / {figures['travellers_sent_back']:.0f}; "
          f"tickets refused {figures['tickets_refused']:.0f}")
    print(f"  saves older than the handoff    {figures['older_saves']}")
    print(f"  loading screen, same-server transition  p50 {ms(shown.get('p50_us'))} ms  "
          f"p99 {ms(shown.get('p99_us'))} ms  ({shown.get('count')} screens); "
          f"÷ F({n}) {times(figures['same_server_p50_per_floor'])} / "
          f"{times(figures['same_server_p99_per_floor'])}")
    print(f"  loading screen, move to the other server p50 {ms(moved.get('p50_us'))} ms  "
          f"p99 {ms(moved.get('p99_us'))} ms  ({moved.get('count')} moves); "
          f"÷ F({n}) {times(figures['move_p50_per_floor'])} / "
          f"{times(figures['move_p99_per_floor'])}")
    if run.get("check") and (lost != 0 or figures["older_saves"] != 0):
        print("load_travel.py: TRAVEL_CHECK: players lost or saves older than the handoff",
              file=sys.stderr)
        return 1
    return 0


def main(argv):
    if len(argv) >= 2 and argv[1] == "ports":
        for port in ports(int(argv[2])):
            print(port)
        return 0
    if len(argv) == 7 and argv[1] == "wait":
        return wait(argv[2], argv[3], argv[4], float(argv[5]), float(argv[6]))
    if len(argv) == 4 and argv[1] == "metrics":
        with open(argv[3], "w") as f:
            json.dump(metrics(argv[2]), f)
        return 0
    if len(argv) == 3 and argv[1] == "table":
        return table(argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
