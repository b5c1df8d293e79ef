#!/usr/bin/env python3
"""The load benchmark's measurements and table (deploy/load.sh; docs/performance.md).

Python 3 standard library only. load.sh calls it as

    load.py addr LOG MESSAGE              the `addr` field of the server's JSON log line MESSAGE
    load.py addrs LOG SECONDS             waits for the server's QUIC and admin addresses in
                                          LOG, prints "QUIC ADMIN"
    load.py idle --pid P --admin A --seconds S --out F
                                          server CPU and RSS with no client, S seconds
    load.py monitor --pid P --admin A --log LOG --clients N --until EPOCH --connect-deadline EPOCH
            [--steady S] --out F          waits for N players (until the connect deadline), then
                                          samples CPU and RSS between transitions for S seconds
                                          (at most until EPOCH), and reads /state and LOG
    load.py snmp                          the UDP RcvbufErrors count (/proc/net/snmp)
    load.py table DIR N...                the side-by-side table from DIR's files, and DIR/load.json

Server CPU comes from /proc/PID/task/*/schedstat (ns on the CPU, per thread; a thread that exits
during a window loses its last part), falling back to utime + stime from /proc/PID/stat (10 ms
ticks). Idle windows are the stretches between transitions: polled every POLL seconds on the
admin endpoint's /metrics, a window opens SETTLE seconds after no transition is in flight and lasts
while none is and none started.

The server's last ready → ended comes two ways, for the transitions that ended with all N players
(`recent_transition_timings` in GET /state says which): from the game core's own `now`
(`all_ready_to_ended_us`; the shell stamps a whole batch of inputs with one `now`, so a travel
that ends in the step of the last ready report counts 0), and by the wall clock, from the
server's JSON log: "every client ready; completing" to "every player placed; transition ended"
in the same transition span (the work of that step: teleports, spawns, possession, saves queued).
"""

import json
import math
import os
import statistics
import sys
import time
import urllib.request
from datetime import datetime

POLL = 0.2
# Below this much idle in all, the idle rate (and what is subtracted from the steady stretch for
# the per-transition figure) is not worth printing.
MIN_IDLE_S = 2.0
# An idle window opens this long after the last transition ended: the saves at each transition's
# end and the clients' last acknowledgements are the transition's, not idle.
SETTLE = 0.5
HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_threads(pid):
    """Per thread id, ns on the CPU so far ({} if the process is gone)."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                out[tid] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                out[tid] = (int(fields[11]) + int(fields[12])) * 1_000_000_000 // HZ
            except (OSError, ValueError, IndexError):
                pass
    return out


def cpu_delta_ns(before, after):
    """CPU ns between two cpu_threads() samples: threads born since count from 0."""
    return sum(ns - before.get(tid, 0) for tid, ns in after.items() if ns >= before.get(tid, 0))


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def get(admin, path, timeout=5.0):
    with urllib.request.urlopen(f"http://{admin}{path}", timeout=timeout) as r:
        return r.read().decode()


def metrics(admin):
    """The admin endpoint's counters and gauges, by name without the gatehouse_ prefix."""
    out = {}
    for line in get(admin, "/metrics").splitlines():
        if line.startswith("gatehouse_"):
            name, _, value = line.partition(" ")
            try:
                out[name[len("gatehouse_"):]] = float(value)
            except ValueError:
                pass
    return out


def ended(m, outcome):
    """Transitions ended with `outcome` (completed, settle_timeout, superseded, failed): the
    labelled family `gatehouse_transitions_ended_total{outcome}`."""
    return m.get(f'transitions_ended_total{{outcome="{outcome}"}}', 0)


def in_flight(m):
    """Transitions started and not yet ended, superseded or failed."""
    done = sum(ended(m, o) for o in ("completed", "settle_timeout", "superseded", "failed"))
    return m.get("transitions_started_total", 0) - done


class Windows:
    """Idle windows: CPU ns and seconds while no transition ran, plus RSS samples in them."""

    def __init__(self, pid, admin):
        self.pid, self.admin = pid, admin
        self.cpu_ns, self.seconds, self.count, self.rss = 0, 0.0, 0, []
        self.open = None  # (started count, cpu sample, time) at the window's first idle poll
        self.last = None  # the same at its latest idle poll
        self.idle_since = None  # when no transition was seen in flight, and the started count

    def poll(self):
        try:
            m = metrics(self.admin)
        except OSError:
            self.close()
            return None
        started, now = m.get("transitions_started_total", 0), time.monotonic()
        if in_flight(m) != 0 or (self.idle_since and self.idle_since[1] != started):
            self.close()
            self.idle_since = None
            if in_flight(m) != 0:
                return m
        if self.idle_since is None:
            self.idle_since = (now, started)
        if now - self.idle_since[0] < SETTLE:
            return m
        sample = (started, cpu_threads(self.pid), now)
        if self.open is None:
            self.open = self.last = sample
        else:
            self.last = sample
            r = rss_kib(self.pid)
            if r is not None:
                self.rss.append(r)
        return m

    def close(self):
        if self.open and self.last and self.last is not self.open:
            self.cpu_ns += cpu_delta_ns(self.open[1], self.last[1])
            self.seconds += self.last[2] - self.open[2]
            self.count += 1
        self.open = self.last = None

    def figures(self):
        self.close()
        rate = self.cpu_ns / 1000 / self.seconds if self.seconds > 0 else None
        return {"idle_seconds": round(self.seconds, 3), "idle_windows": self.count,
                "idle_cpu_us_per_s": rate,
                "rss_kib": int(statistics.median(self.rss)) if self.rss else rss_kib(self.pid)}


def arg(name, cast=str, default=None):
    argv = sys.argv
    if name not in argv:
        if default is not None:
            return default
        sys.exit(f"load.py: missing {name}")
    return cast(argv[argv.index(name) + 1])


def log_addr(log, message):
    """The `addr` field of the server's JSON log line MESSAGE in LOG, or None."""
    try:
        with open(log) as f:
            for line in f:
                try:
                    fields = json.loads(line)
                except ValueError:
                    continue
                if fields.get("message") == message and "addr" in fields:
                    return fields["addr"]
    except OSError:
        pass
    return None


def cmd_addr():
    addr = log_addr(sys.argv[2], sys.argv[3])
    if addr is None:
        sys.exit(1)
    print(addr)


def cmd_addrs():
    """Waits up to SECONDS for a server started with ephemeral ports to log both its QUIC and
    its admin address; prints them on one line ("QUIC ADMIN"), or fails after the last lines
    of its log."""
    log, seconds = sys.argv[2], float(sys.argv[3])
    end = time.monotonic() + seconds
    while True:
        quic, admin = log_addr(log, "listening"), log_addr(log, "admin endpoint listening")
        if quic and admin:
            print(quic, admin)
            return
        if time.monotonic() >= end:
            try:
                tail = open(log).read().splitlines()[-5:]
            except OSError:
                tail = []
            sys.exit("the server did not start:\n" + "\n".join(tail))
        time.sleep(0.1)


def cmd_idle():
    pid, admin, seconds = arg("--pid"), arg("--admin"), arg("--seconds", float)
    w = Windows(pid, admin)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        w.poll()
        time.sleep(POLL)
    with open(arg("--out"), "w") as f:
        json.dump(w.figures(), f)


def percentile(values, q):
    """The q-quantile of values by nearest rank (None if empty)."""
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))]


def wait_for_gauge(admin, name, n, deadline):
    """Polls the server's gauge `name` until it reaches `n` or `deadline` (epoch s) passes: the
    most it showed, and whether it got there."""
    seen = 0
    while time.time() < deadline:
        try:
            m = metrics(admin)
        except OSError:
            m = {}
        seen = max(seen, int(m.get(name, 0)))
        if seen >= n:
            return seen, True
        time.sleep(POLL)
    return seen, False


def cmd_monitor():
    pid, admin, n = arg("--pid"), arg("--admin"), arg("--clients", int)
    until, connect_deadline = arg("--until", float), arg("--connect-deadline", float)
    steady = arg("--steady", float, math.inf)
    out = {"clients": n, "players_seen": 0}
    started = time.time()
    # 1. Every client logged in, then placed (a pawn possessed), so the steady stretch holds no
    # admission work: at large N the last placements come seconds after the last login. Each
    # bounded by the connect deadline and the clients' leaving.
    deadline = min(connect_deadline, until)
    out["players_seen"], all_in = wait_for_gauge(admin, "players", n, deadline)
    out["all_connected"] = all_in
    out["all_connected_after_s"] = round(time.time() - started, 2) if all_in else None
    out["placed_seen"], all_placed = (wait_for_gauge(admin, "placed_players", n, deadline)
                                      if all_in else (0, False))
    out["all_placed_after_s"] = round(time.time() - started, 2) if all_placed else None
    # 2. The steady stretch: idle windows between transitions, and the whole stretch's CPU; S
    # seconds from now, but never past the clients' leaving.
    until = min(until, time.time() + steady)
    w = Windows(pid, admin)
    m0, cpu0, t0 = None, cpu_threads(pid), time.monotonic()
    m = None
    while time.time() < until:
        m = w.poll() or m
        if m0 is None and m is not None:
            m0 = m
        time.sleep(POLL)
    cpu1, t1 = cpu_threads(pid), time.monotonic()
    out.update(w.figures())
    finished = lambda mm: ended(mm, "completed") + ended(mm, "settle_timeout")
    if m0 is not None and m is not None:
        out["steady_seconds"] = round(t1 - t0, 3)
        out["steady_cpu_us"] = cpu_delta_ns(cpu0, cpu1) / 1000
        out["steady_transitions"] = int(finished(m) - finished(m0))
        out["settle_timeouts"] = int(ended(m, "settle_timeout"))
        out["transitions_failed"] = int(ended(m, "failed"))
    # 3. The server's own transition timings, from the transitions that ended with all N.
    try:
        state = json.loads(get(admin, "/state", timeout=10))
    except (OSError, ValueError):
        state = {}
    timings = [t for t in state.get("recent_transition_timings", [])
               if t.get("players") == n and not t.get("settle_timed_out")]
    ready_to_end = [t["all_ready_to_ended_us"] for t in timings]
    whole = [t["whole_us"] for t in timings]
    out["server_transitions_with_all"] = len(timings)
    out["server_last_ready_to_ended_us"] = {"p50": percentile(ready_to_end, 0.5),
                                            "p99": percentile(ready_to_end, 0.99)}
    out["server_whole_us"] = {"p50": percentile(whole, 0.5), "p99": percentile(whole, 0.99)}
    out["snapshot_has_timings"] = "recent_transition_timings" in state
    wall = log_ready_to_ended_us(arg("--log"), {t["transition_id"] for t in timings})
    out["server_log_last_ready_to_ended_us"] = {"p50": percentile(wall, 0.5),
                                                "p99": percentile(wall, 0.99), "count": len(wall)}
    with open(arg("--out"), "w") as f:
        json.dump(out, f)


def log_ready_to_ended_us(log, ids):
    """For the transitions `ids`, µs from the log line "every client ready; completing" to
    "every player placed; transition ended" in the same transition span."""
    ready, ended = {}, {}
    try:
        with open(log) as f:
            for line in f:
                if "every client ready" not in line and "transition ended" not in line:
                    continue
                try:
                    entry = json.loads(line)
                    message = entry["message"]
                    tid = entry["transition"]
                    at = datetime.fromisoformat(entry["timestamp"]).timestamp()
                except (ValueError, KeyError, TypeError):
                    continue
                if message == "every client ready; completing":
                    ready[tid] = at
                elif message == "every player placed; transition ended":
                    ended[tid] = at
    except OSError:
        return []
    return [round((ended[i] - ready[i]) * 1e6) for i in ids if i in ready and i in ended]


def snmp_rcvbuf():
    with open("/proc/net/snmp") as f:
        udp = [line.split() for line in f if line.startswith("Udp:")]
    header, values = udp[0], udp[1]
    return int(values[header.index("RcvbufErrors")])


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def dig(obj, *keys):
    for k in keys:
        if not isinstance(obj, dict) or k not in obj:
            return None
        obj = obj[k]
    return obj


def seconds(us):
    """µs as seconds for the table, or n/a."""
    return "n/a" if us is None else f"{us / 1e6:.1f}"


def admission_figures(admission, mon, floor):
    """The admission time of one N: the swarm's (first dial to the last client's first welcome
    and first placement, from its report), the server's count of players reaching N (polled by
    `monitor`, from just after the swarm started) and the floor's (first connect to last
    welcome)."""
    return {"welcomed": admission.get("welcomed"), "placed": admission.get("placed"),
            "last_welcomed_us": admission.get("last_welcomed_us"),
            "last_placed_us": admission.get("last_placed_us"),
            "server_all_players_after_s": mon.get("all_connected_after_s"),
            # "n/a": a monitor file from before it waited for placements.
            "server_all_placed_after_s": mon.get("all_placed_after_s", "n/a"),
            "floor_last_welcomed_us": floor.get("connect_all_us")}


def admission_cell(a, clients):
    """`10.2 / 10.9 (4000 / 4000); server: 4000 players at 10.3 s, placed at 10.9 s`: the
    swarm's admission, and when the server counted N players and N placed (`never` if it did
    not while the monitor waited)."""
    after, placed = a["server_all_players_after_s"], a.get("server_all_placed_after_s")
    server = (f"server: {clients} players " + ("never" if after is None else f"at {after} s")
              + ", placed " + ("never" if placed is None
                               else "n/a" if placed == "n/a" else f"at {placed} s"))
    if a["welcomed"] is None:
        return f"n/a; {server}"
    return (f"{seconds(a['last_welcomed_us'])} / {seconds(a['last_placed_us'])}"
            f" ({a['welcomed']} / {a['placed']}); {server}")


def cmd_table():
    d, ns = sys.argv[2], sys.argv[3:]
    rows, summary = [], {}

    def ms(us):
        if us is None:
            return "n/a"
        return f"{us / 1000:.2f}" if us < 10_000 else f"{us / 1000:.1f}"

    def ratio(x, floor):
        return "n/a" if x is None or not floor else f"{x / floor:.1f}×"

    for n in ns:
        floor = load(f"{d}/floor-{n}.json") or {}
        memory_floor = dig(load(f"{d}/floor-memory-{n}.json") or {},
                           "server_memory", "kib_per_connection")
        report = load(f"{d}/report-{n}.json") or {}
        mon = load(f"{d}/monitor-{n}.json") or {}
        idle0 = load(f"{d}/idle-{n}.json") or {}
        misc = load(f"{d}/misc-{n}.json") or {}
        clients = int(n)
        f50, f99 = dig(floor, "round", "p50_us"), dig(floor, "round", "p99_us")
        # The swarm's shown → ended: the HDR timings after the swarm rewrite, else transition_ms.
        s50 = dig(report, "timings", "shown_to_ended", "p50_us")
        s99 = dig(report, "timings", "shown_to_ended", "p99_us")
        if s50 is None and dig(report, "transition_ms", "count"):
            s50 = dig(report, "transition_ms", "median") * 1000
            s99 = dig(report, "transition_ms", "p99") * 1000
        h50, h99 = dig(mon, "server_whole_us", "p50"), dig(mon, "server_whole_us", "p99")
        r50 = dig(mon, "server_last_ready_to_ended_us", "p50")
        r99 = dig(mon, "server_last_ready_to_ended_us", "p99")
        w50 = dig(mon, "server_log_last_ready_to_ended_us", "p50")
        w99 = dig(mon, "server_log_last_ready_to_ended_us", "p99")
        admission = report.get("admission") or {}
        c50 = dig(report, "timings", "connect_to_welcome", "p50_us")
        c99 = dig(report, "timings", "connect_to_welcome", "p99_us")
        # The part before a client can send `Hello`: QUIC's handshake (with the retry), the stream.
        k50 = dig(report, "timings", "connect_to_handshake", "p50_us")
        k99 = dig(report, "timings", "connect_to_handshake", "p99_us")
        fc50, fc99 = dig(floor, "connect", "p50_us"), dig(floor, "connect", "p99_us")
        idle_n, idle_z = mon.get("idle_cpu_us_per_s"), idle0.get("idle_cpu_us_per_s")
        if (mon.get("idle_seconds") or 0) < MIN_IDLE_S:
            idle_n = None
        idle_per_client = None if idle_n is None else (idle_n - (idle_z or 0)) / clients
        per_transition = None
        if mon.get("steady_transitions") and idle_n is not None:
            extra = mon["steady_cpu_us"] - idle_n * mon["steady_seconds"]
            per_transition = extra / mon["steady_transitions"]
        rss0, rss1 = idle0.get("rss_kib"), mon.get("rss_kib")
        rss_per = None if rss0 is None or rss1 is None else (rss1 - rss0) / clients
        received, sent = dig(report, "wire", "bytes_received"), dig(report, "wire", "bytes_sent")
        # Client-transitions: every client's every transition seen to its end.
        seen = (dig(report, "timings", "shown_to_ended", "count")
                or dig(report, "transition_ms", "count"))
        wire = None
        if received is not None and seen:
            # The whole run's bytes (handshakes and keep-alives included) over client-transitions.
            wire = (received / seen, (sent or 0) / seen)
        e0, e1 = misc.get("rcvbuf_before"), misc.get("rcvbuf_after")
        summary[n] = {
            "floor_round_us": {"p50": f50, "p99": f99},
            "floor_connect_all_us": floor.get("connect_all_us"),
            "shown_to_ended_us": {"p50": s50, "p99": s99},
            "server_last_ready_to_ended_us": {"p50": r50, "p99": r99},
            "server_log_last_ready_to_ended_us": {"p50": w50, "p99": w99},
            "server_start_to_ended_us": {"p50": h50, "p99": h99},
            "steady_transitions": mon.get("steady_transitions"),
            "connect_to_welcome_us": {"p50": c50, "p99": c99},
            "connect_to_handshake_us": {"p50": k50, "p99": k99},
            "floor_connect_to_welcome_us": {"p50": fc50, "p99": fc99},
            "admission": admission_figures(admission, mon, floor),
            "clients_connected": report.get("clients_connected"),
            "clients_placed": report.get("clients_placed"),
            "errors": report.get("errors"),
            "server_transitions_with_all": mon.get("server_transitions_with_all"),
            "idle_cpu_us_per_client_per_s": idle_per_client,
            "idle_seconds": mon.get("idle_seconds"),
            "cpu_us_per_transition": per_transition,
            "rss_kib_before": rss0, "rss_kib_with_clients": rss1,
            "rss_kib_per_idle_client": rss_per,
            "floor_rss_kib_per_idle_connection": memory_floor,
            "wire_bytes_per_client_per_transition": wire,
            "udp_rcvbuf_errors": {"before": e0, "after": e1},
            "floor_udp_rcvbuf_errors": misc.get("floor_rcvbuf"),
            "loadavg": misc.get("loadavg"),
        }
        s = summary[n]
        rows.append([
            f"{f50} / {f99}" if f50 is not None else "n/a",
            f"{ms(s50)} / {ms(s99)}",
            f"{ratio(s50, f50)} / {ratio(s99, f99)}",
            f"{ms(r50)} / {ms(r99)} (over {s['server_transitions_with_all'] or 0})",
            f"{ratio(r50, f50)} / {ratio(r99, f99)}",
            f"{ms(w50)} / {ms(w99)}",
            f"{ratio(w50, f50)} / {ratio(w99, f99)}",
            f"{ms(h50)} / {ms(h99)}",
            "n/a" if c50 is None else f"{ms(c50)} / {ms(c99)}",
            "n/a" if k50 is None else f"{ms(k50)} / {ms(k99)}",
            "n/a" if fc50 is None else f"{ms(fc50)} / {ms(fc99)}",
            admission_cell(s["admission"], clients),
            seconds(s["admission"]["floor_last_welcomed_us"]),
            " / ".join("n/a" if s[k] is None else str(s[k])
                       for k in ("clients_connected", "clients_placed", "errors")),
            f"n/a ({s['idle_seconds']} s idle)" if idle_per_client is None
            else f"{idle_per_client:.1f} (over {s['idle_seconds']} s)",
            "n/a" if per_transition is None
            else f"{per_transition / 1000:.1f} ms ({per_transition / clients:.1f} µs per client;"
                 f" {s['steady_transitions']} transitions)",
            "n/a" if rss_per is None else f"{rss0} → {rss1} KiB: {rss_per:.1f} KiB",
            "n/a" if memory_floor is None
            else f"{memory_floor:.1f} KiB; product {ratio(rss_per, memory_floor)}",
            "n/a" if wire is None else f"{wire[0]:.0f} received / {wire[1]:.0f} sent",
            f"{e0} → {e1}",
            " → ".join(str(x) for x in misc.get("floor_rcvbuf") or ["n/a"]),
            misc.get("loadavg", "n/a"),
        ])
    labels = [
        "floor F(N): round p50 / p99 (µs)",
        "shown → ended at the clients, p50 / p99 (ms)",
        "  ÷ F(N) p50 / p99",
        "server: last ready → ended, core `now` (0 when one step ends it), p50 / p99 (ms)",
        "  ÷ F(N) p50 / p99",
        "server: last ready → ended, wall clock (log), p50 / p99 (ms)",
        "  ÷ F(N) p50 / p99",
        "server: start → ended, core `now`, p50 / p99 (ms)",
        "connect → Welcome, whole swarm, p50 / p99 (ms)",
        "  of which connect → handshake done (QUIC, retry included), p50 / p99 (ms)",
        "  the floor's: connect → welcome, p50 / p99 (ms)",
        "admission: first dial → last welcomed / last placed (s; welcomed / placed of N)",
        "  the floor's: first connect → last welcomed (s)",
        "clients connected / placed / errors",
        "server CPU idle, µs per client per second",
        "server CPU per transition (above idle)",
        "server RSS before clients → with clients: per idle client",
        "memory floor M(N): bare QUIC server RSS per idle connection; product ÷ M(N)",
        "bytes on the wire per client per transition",
        "UDP RcvbufErrors before → after the product (whole machine)",
        "UDP RcvbufErrors before → after the floor (whole machine)",
        "load average (1 / 5 / 15 min) at the end",
    ]
    head = "| figure | " + " | ".join(f"N = {n}" for n in ns) + " |"
    print(head)
    print("|---|" + "---|" * len(ns))
    for i, label in enumerate(labels):
        print(f"| {label} | " + " | ".join(str(r[i]) for r in rows) + " |")
    with open(f"{d}/load.json", "w") as f:
        json.dump(summary, f, indent=2)


def main():
    commands = {"addr": cmd_addr, "addrs": cmd_addrs, "idle": cmd_idle, "monitor": cmd_monitor, "table": cmd_table,
                "snmp": lambda: print(snmp_rcvbuf())}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        sys.exit("usage: load.py addr|addrs|idle|monitor|snmp|table ...")
    commands[sys.argv[1]]()


if __name__ == "__main__":
    main()
