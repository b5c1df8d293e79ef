#!/usr/bin/env python3
"""The scale soak's monitor and verdict (deploy/scale-soak.sh). Python 3 standard library only.

    scale_soak.py watch --server-pid P --sim-pid P --admin ADDR --intervals FILE --out FILE
        one row per interval of the swarm (each line gatehouse-sim --interval-json writes):
        transitions started / completed / superseded / settle timeouts / failed in it (the
        server's /metrics), the swarm's longest loading screen and shown -> ended p50 / p99,
        its reply delay p99, server RSS, server and swarm CPU (cores), the load average; until
        the swarm exits. Rows go to stdout and, as JSON lines, to --out.
    scale_soak.py verdict --rows FILE --report FILE --sim-status N --sim-log FILE
                          --max-screen-ms MS [--rss-after-s S] [--rss-growth PCT]
                          [--until-s S] [--floor FILE]
        the run's figures and whether it passes: no failed transition, no invariant broken
        (gatehouse-sim --check exited N: 0, or the problems it named in its log), no loading
        screen longer than MS, server RSS after S seconds (default 300) never more than PCT %
        (default 10) above its value then, up to --until-s (the run's duration: from then every
        client leaves at once, a burst of saves that is not the soak's). Exit 1 on any failure, each named. The transitions'
        durations on the server (start to end, from /state) are given beside the clients'
        shown -> ended, and with --floor (gatehouse-floor --json of the same run) as ratios to
        the floor's round trip to every client, F(N): the round trip every transition waits for
        at least.

CPU comes from /proc/PID/stat (utime + stime, clock ticks), as a share of one core over each
interval; RSS from /proc/PID/status (VmRSS).
"""

import json
import os
import sys
import time

from load import ended, get, metrics, rss_kib

HZ = os.sysconf("SC_CLK_TCK")
# The server's outcome labels, in the order the rows print them.
OUTCOMES = ["completed", "superseded", "settle_timeout", "failed"]


def cpu_ticks(pid):
    """utime + stime of PID so far, in clock ticks (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, ValueError, IndexError):
        return None


def transition_times(admin, last):
    """The transitions that ended (completed or at the settle timeout) since id `last[0]`, as
    the server's core timed them from its start to its end, ms; advances `last[0]`."""
    state = json.loads(get(admin, "/state", timeout=10))
    out = []
    for t in state.get("recent_transition_timings", []):
        if t["transition_id"] > last[0]:
            # The boot travel, before any client, says nothing of them.
            if t.get("players", 0) > 0:
                out.append(t["whole_us"] / 1000)
            last[0] = t["transition_id"]
    return out


def transitions(admin):
    """The server's transition counters: started, and ended by outcome."""
    m = metrics(admin)
    return {"started": int(m.get("transitions_started_total", 0)),
            **{o: int(ended(m, o)) for o in OUTCOMES}}


def alive(pid):
    """Whether PID runs (a zombie, ended but not yet waited for, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


HEADER = (
    f"{'at':>5} {'start':>5} {'done':>5} {'super':>5} {'settle':>6} {'fail':>4} "
    f"{'longest s':>9} {'s->e p50':>8} {'s->e p99':>8} {'reply p99':>9} "
    f"{'srv RSS MiB':>11} {'srv CPU':>7} {'swarm CPU':>9} {'load':>5}"
)


def watch(args):
    server, sim = int(args["--server-pid"]), int(args["--sim-pid"])
    admin, intervals, out = args["--admin"], args["--intervals"], args["--out"]
    print(HEADER, flush=True)
    last = {"t": time.monotonic(), "server": cpu_ticks(server), "sim": cpu_ticks(sim)}
    last["counts"] = transitions(admin)
    last["timed"] = [0]
    seen = 0
    with open(out, "w") as rows:
        while True:
            # Whether the swarm had ended before this read: then the read holds its last line.
            ended = not alive(sim)
            lines = []
            try:
                with open(intervals) as f:
                    # Whole lines only: the last one may be half written.
                    lines = f.read().split("\n")[:-1]
            except OSError:
                pass
            for line in lines[seen:]:
                seen += 1
                try:
                    interval = json.loads(line)
                except ValueError:
                    continue
                row = sample(interval, server, sim, admin, last)
                rows.write(json.dumps(row) + "\n")
                rows.flush()
                print(format_row(row), flush=True)
            if ended:
                break
            time.sleep(1)


def sample(interval, server, sim, admin, last):
    """One row: the swarm's interval beside what the server and /proc say now."""
    now = time.monotonic()
    wall = max(now - last["t"], 1e-9)
    cpu = {}
    for name, pid in (("server", server), ("sim", sim)):
        ticks = cpu_ticks(pid)
        before = last[name]
        cpu[name] = (ticks - before) / HZ / wall if ticks is not None and before is not None else None
        last[name] = ticks
    last["t"] = now
    try:
        counts = transitions(admin)
    except OSError:
        counts = last["counts"]
    delta = {k: counts[k] - last["counts"].get(k, 0) for k in counts}
    last["counts"] = counts
    try:
        whole = transition_times(admin, last["timed"])
    except (OSError, ValueError, KeyError):
        whole = []
    rss = rss_kib(server)
    shown = interval["shown_to_ended"]
    return {
        "at_s": interval["at_s"],
        "transitions": delta,
        "transition_whole_ms": whole,
        "longest_loading_screen_ms": interval["longest_loading_screen_ms"],
        "screens_down": interval["screens_down"],
        "shown_to_ended_p50_ms": shown["p50_us"] / 1000,
        "shown_to_ended_p99_ms": shown["p99_us"] / 1000,
        "reply_delay_p99_ms": interval["reply_delay"]["p99_us"] / 1000,
        "reply_delay_count": interval["reply_delay"]["count"],
        "server_rss_kib": rss,
        "server_cpu_cores": cpu["server"],
        "swarm_cpu_cores": cpu["sim"],
        "load_1m": os.getloadavg()[0],
    }


def format_row(r):
    t = r["transitions"]
    # A figure not measured (the swarm ended before its last interval's sample) prints "-".
    fmt = lambda v, spec: format(v, spec) if v is not None else format("-", spec.split(".")[0])
    rss = r["server_rss_kib"] / 1024 if r["server_rss_kib"] is not None else None
    return (
        f"{r['at_s'] // 60:>2}:{r['at_s'] % 60:02} {t['started']:>5} {t['completed']:>5} {t['superseded']:>5} "
        f"{t['settle_timeout']:>6} {t['failed']:>4} "
        f"{r['longest_loading_screen_ms'] / 1000:>9.1f} {r['shown_to_ended_p50_ms'] / 1000:>8.2f} "
        f"{r['shown_to_ended_p99_ms'] / 1000:>8.2f} {r['reply_delay_p99_ms']:>7.1f}ms "
        f"{fmt(rss, '>11.1f')} {fmt(r['server_cpu_cores'], '>7.2f')} "
        f"{fmt(r['swarm_cpu_cores'], '>9.2f')} {r['load_1m']:>5.2f}"
    )


def verdict(args):
    rows = [json.loads(l) for l in open(args["--rows"]) if l.strip()]
    report = json.load(open(args["--report"]))
    max_screen = int(args["--max-screen-ms"])
    rss_after = float(args.get("--rss-after-s", 300))
    until = float(args.get("--until-s", "inf"))
    growth = float(args.get("--rss-growth", 10))
    problems = []
    failed = sum(r["transitions"]["failed"] for r in rows)
    if failed:
        problems.append(f"{failed} transitions failed at the hard maximum")
    # gatehouse-sim --check's verdict: every client placed, no error, every invariant figure 0.
    if args["--sim-status"] != "0":
        named = swarm_problems(args["--sim-log"])
        problems += [f"swarm: {p}" for p in named] or [
            f"gatehouse-sim exited {args['--sim-status']} (see {args['--sim-log']})"]
    longest = max([r["longest_loading_screen_ms"] for r in rows] +
                  [report.get("longest_loading_screen_ms", 0)])
    if longest > max_screen:
        problems.append(f"longest loading screen {longest} ms, over the bound {max_screen} ms")
    later = [r for r in rows
             if rss_after <= r["at_s"] < until and r["server_rss_kib"] is not None]
    base = later[0]["server_rss_kib"] if later else None
    peak = max((r["server_rss_kib"] for r in later), default=None)
    if base and peak and peak > base * (1 + growth / 100):
        problems.append(
            f"server RSS grew {100 * (peak / base - 1):.1f} % after {rss_after:.0f} s "
            f"({base} -> {peak} KiB), over {growth:.0f} %")
    totals = {k: sum(r["transitions"][k] for r in rows) for k in ["started"] + OUTCOMES}
    timings = report.get("timings", {})
    shown = timings.get("shown_to_ended", {})
    reply = timings.get("reply_delay", {})
    cpu = lambda key: [r[key] for r in rows if r[key] is not None]
    mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")
    clients = report.get("clients", 0) or 1
    print("== scale soak: the whole run")
    print(f"  transitions: started {totals['started']}, completed {totals['completed']}, "
          f"superseded {totals['superseded']}, settle timeouts {totals['settle_timeout']}, "
          f"failed {totals['failed']}")
    print(f"  clients placed at the end: {report.get('clients_placed')}/{report.get('clients')}")
    print(f"  longest loading screen: {longest / 1000:.1f} s (bound {max_screen / 1000:.0f} s)")
    print(f"  shown -> ended: p50 {shown.get('p50_us', 0) / 1000:.0f} ms, "
          f"p99 {shown.get('p99_us', 0) / 1000:.0f} ms, max {shown.get('max_us', 0) / 1000:.0f} ms")
    whole = sorted(ms for r in rows for ms in r.get("transition_whole_ms", []))
    if whole:
        w50, w99 = percentile(whole, 50), percentile(whole, 99)
        line = (f"  transitions on the server, start -> end: p50 {w50:.0f} ms, p99 {w99:.0f} ms, "
                f"max {whole[-1]:.0f} ms over {len(whole)}")
        if "--floor" in args:
            floor = json.load(open(args["--floor"]))["round"]
            f50, f99 = floor["p50_us"] / 1000, floor["p99_us"] / 1000
            line += f"; {w50 / f50:.2f} x F p50, {w99 / f99:.2f} x F p99"
        print(line)
    if "--floor" in args:
        floor = json.load(open(args["--floor"]))["round"]
        print(f"  the floor F({clients}): one round trip from a bare QUIC server to every client "
              f"and back, through the same network: p50 {floor['p50_us'] / 1000:.0f} ms, "
              f"p99 {floor['p99_us'] / 1000:.0f} ms over {floor['count']} rounds (a transition "
              f"waits for one such round trip at least, beside the streaming)")
    print(f"  reply delay: p50 {reply.get('p50_us', 0) / 1000:.1f} ms, "
          f"p99 {reply.get('p99_us', 0) / 1000:.1f} ms, max {reply.get('max_us', 0) / 1000:.1f} ms")
    print(f"  CPU, mean over the intervals: server {mean(cpu('server_cpu_cores')):.2f} cores, "
          f"swarm {mean(cpu('swarm_cpu_cores')):.2f} cores "
          f"({1000 * mean(cpu('swarm_cpu_cores')) / clients:.2f} ms of CPU per client per s; "
          f"server {1000 * mean(cpu('server_cpu_cores')) / clients:.2f})")
    if base and peak:
        print(f"  server RSS: {base / 1024:.1f} MiB at {rss_after:.0f} s, peak after "
              f"{peak / 1024:.1f} MiB (before the clients leave)")
    loads = [r["load_1m"] for r in rows]
    if loads:
        print(f"  load average (1 min) over the rows: {min(loads):.2f} - {max(loads):.2f}")
    if problems:
        print("FAILED:")
        for p in problems:
            print(f"  {p}")
        return 1
    print("passed")
    return 0


def percentile(sorted_values, p):
    """The nearest-rank p-th percentile of a sorted, non-empty list."""
    rank = max(1, -(-len(sorted_values) * p // 100))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def swarm_problems(log):
    """The problems gatehouse-sim --check named at the end of its log."""
    try:
        lines = open(log).read().splitlines()
    except OSError:
        return []
    for i, line in enumerate(lines):
        if "the report is not clean" in line:
            return [l.strip() for l in lines[i + 1:] if l.strip()]
    return [l for l in lines[-3:] if l.startswith("error")]


def parse(argv):
    args, i = {}, 0
    while i < len(argv):
        if i + 1 >= len(argv):
            sys.exit(f"scale_soak.py: {argv[i]} needs a value")
        args[argv[i]] = argv[i + 1]
        i += 2
    return args


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("watch", "verdict"):
        sys.exit(__doc__)
    args = parse(sys.argv[2:])
    try:
        if sys.argv[1] == "watch":
            watch(args)
            return 0
        return verdict(args)
    except KeyError as e:
        sys.exit(f"scale_soak.py {sys.argv[1]}: missing {e.args[0]}")


if __name__ == "__main__":
    sys.exit(main())
