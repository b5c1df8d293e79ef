#!/usr/bin/env python3
"""The impaired soak's table (deploy/impaired-soak.sh; docs/testing.md): a clean run and an
impaired run of the same seed side by side, from each run's gatehouse-sim report and the server's
GET /state; fails if the server counted a ready timeout, a settle timeout or a failed transition
in either run.

    deploy/impaired.py CLEAN_DIR IMPAIRED_DIR
"""
import json
import os
import sys

# The benchmark's helpers: one `dig` for both tables.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from load import dig  # noqa: E402


def load_run(run_dir):
    with open(f"{run_dir}/report.json") as f:
        report = json.load(f)
    try:
        with open(f"{run_dir}/state.json") as f:
            state = json.load(f)
    except (OSError, ValueError):
        state = {}
    return report, state


def ms(us):
    return "-" if us is None else f"{us / 1000:.1f}"


def main():
    clean, clean_state = load_run(sys.argv[1])
    impaired, impaired_state = load_run(sys.argv[2])
    rows = []
    for phase in ["connect_to_welcome", "shown_to_ready_sent", "ready_to_possessed",
                  "possessed_to_ended", "shown_to_ended"]:
        for q in ["p50_us", "p99_us", "max_us"]:
            a = dig(clean, "timings", phase, q)
            b = dig(impaired, "timings", phase, q)
            rows.append((f"{phase.replace('_', ' ')} {q[:-3]} (ms)", ms(a), ms(b)))
    for q in ["median", "p99", "max"]:
        rows.append((f"scope -> gate {q} (ms)", dig(clean, "gates", "gate_wait_ms", q),
                     dig(impaired, "gates", "gate_wait_ms", q)))
    for key in ["transitions_completed", "transitions_superseded", "deaths", "respawns",
                "relaunches", "errors", "clients_placed", "double_pawns", "ended_before_placed",
                "spawns_at_stale_node", "longest_loading_screen_ms"]:
        rows.append((key.replace("_", " "), clean.get(key), impaired.get(key)))
    rows.append(("gate violations", dig(clean, "gates", "gate_violations"),
                 dig(impaired, "gates", "gate_violations")))
    for key in ["lost_packets", "lost_bytes", "congestion_events", "datagrams_sent",
                "datagrams_received"]:
        rows.append((f"quinn {key.replace('_', ' ')}", dig(clean, "wire", key),
                     dig(impaired, "wire", key)))
    for way in ["up", "down"]:
        for key in ["offered", "dropped", "delayed", "reordered", "duplicated"]:
            rows.append((f"conditioner {way} {key}", dig(clean, "network", way, key),
                         dig(impaired, "network", way, key)))
    bad = []
    for name, state in [("clean", clean_state), ("impaired", impaired_state)]:
        counters = state.get("counters", {})
        for key in ["ready_timeouts", "settle_timeouts", "transitions_failed"]:
            value = counters.get(key)
            rows.append((f"server {key.replace('_', ' ')} ({name})", value, ""))
            if value is None or value != 0:
                bad.append(f"{name}: server {key} = {value}")
    width = max(len(r[0]) for r in rows)
    print(f"{'':<{width}}  {'clean':>12}  {'impaired':>12}")
    for name, a, b in rows:
        print(f"{name:<{width}}  {str(a):>12}  {str(b):>12}")
    if bad:
        print("not clean: " + "; ".join(bad))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
