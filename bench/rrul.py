"""bench/rrul.sh's section: flent's RRUL data files and plumb's load
records, read into the same figures. Every percentile is a nearest rank over
the answered probes of a stretch (a lost probe is in none), the stretch
less its first seconds, while the queue fills.

    rrul.py DATA REPS LENGTH PHASE LIMIT RATE_BPS SERVER COMMAND
"""
import glob
import gzip
import json
import math
import os
import statistics
import sys
from datetime import datetime

sys.path.insert(0, os.path.dirname(__file__))
from record import machine  # noqa: E402

data, reps, length, phase, limit, rate, server, command = sys.argv[1:]
reps, length, phase, limit, rate = int(reps), int(length), int(phase), int(limit), float(rate)


def rank(pairs, q):
    """The q quantile (nearest rank) of (value, count) pairs; None if empty."""
    pairs = sorted(pairs)
    n = sum(c for _, c in pairs)
    if not n:
        return None
    need, seen = max(1, math.ceil(q * n)), 0
    for v, c in pairs:
        seen += c
        if seen >= need:
            return v


def stats(pairs):
    return rank(pairs, 0.5), rank(pairs, 0.99)


FLENT = ["Ping (ms) ICMP", "Ping (ms) UDP EF", "Ping (ms) UDP BK", "Ping (ms) UDP BE", "Ping (ms) avg"]


def flent(rep):
    """Per ping series: ((idle p50, p99), (loaded p50, p99)) in ms; the
    loaded goodput down and up in Mbit/s; the idle lead-in in s."""
    # The newest, should DATA hold an earlier run's too (the name has the time).
    path = sorted(glob.glob(os.path.join(data, f"rrul-*.rep{rep}.flent.gz")))[-1]
    d = json.load(gzip.open(path))
    m = d["metadata"]
    delay = (m["TOTAL_LENGTH"] - m["LENGTH"]) / 2  # netperf_definitions.inc
    t0 = datetime.fromisoformat(m["T0"].replace("Z", "+00:00")).timestamp()
    idle = lambda t: 1 <= t < delay
    loaded = lambda t: delay + 2 <= t < delay + m["LENGTH"]
    out = {}
    for s in FLENT:
        if s == "Ping (ms) avg":
            # flent's own mean of the four, at each step of its grid.
            pts = [(t, v) for t, v in zip(d["x_values"], d["results"][s]) if v is not None]
        else:
            pts = [(r["t"] - t0, r["val"]) for r in d["raw_values"][s] if r.get("val") is not None]
        out[s] = tuple(stats([(v, 1) for t, v in pts if w(t)]) for w in (idle, loaded))
    good = []
    for s in ("TCP download sum", "TCP upload sum"):
        good.append(statistics.mean(v for t, v in zip(d["x_values"], d["results"][s])
                                    if v is not None and loaded(t)))
    return out, good, delay


PLUMB = [("run", "run (TCP rr)"), ("udp", "udp (UDP rr)"), ("connect", "connect (new TCP)"),
         ("self", "self (in the loads)")]


def plumb(rep):
    """Per probe: ((idle p50, p99), (both p50, p99)) in ms, and the both
    phase's goodput down and up in Mbit/s."""
    it = json.load(open(os.path.join(data, f"plumb-{rep}.json")))["iterations"][0]
    parts = {p["name"]: p for p in it["parts"]}
    # An interval's t_s is its end, from the start of its part's window.
    def buckets(side, lo, hi, at=0.0):
        return [(v / 1e6, c) for i in side["intervals"] if lo < i["t_s"] + at <= hi + 0.01
                for v, c in i.get("buckets") or []]
    idle, both = (1, phase), (3 * phase + 1, 4 * phase)
    out = {}
    for name, _ in PLUMB:
        if name == "self":
            sides = [(parts[p]["client"], parts[p]["start_s"]) for p in ("both-down", "both-up")]
            out[name] = (None, stats([b for s, at in sides for b in buckets(s, *both, at)]))
        else:
            side = it["client"] if name == "run" else parts[name]["client"]
            out[name] = tuple(stats(buckets(side, *w)) for w in (idle, both))
    good = [parts[p]["derived"]["throughput_bps"] / 1e6 for p in ("both-down", "both-up")]
    return out, good


def med(xs):
    xs = [x for x in xs if x is not None]
    return (statistics.median(xs), min(xs), max(xs)) if xs else None


def fmt(m):
    if m is None:
        return "-"
    f = lambda x: f"{x:.3g}" if abs(x) < 100 else f"{x:.0f}"
    return f"{f(m[0])} ({f(m[1])}-{f(m[2])})"


def rows(tool, probes, runs):
    """One table row per probe: the median over repetitions (min-max) of
    each figure; the rise is the loaded p50 less the idle one of the same
    repetition (the `run` probe's where the probe has no idle stretch)."""
    for key, label in probes:
        idle = [r[0][key][0] or (None, None) for r in runs]
        load = [r[0][key][1] for r in runs]
        ref = [r[0][key][0] or r[0]["run"][0] for r in runs]
        rise = [l[0] - i[0] if l[0] is not None and i and i[0] is not None else None
                for l, i in zip(load, ref)]
        print(f"| {tool} | {label} | {fmt(med(i[0] for i in idle))} | {fmt(med(i[1] for i in idle))} | "
              f"{fmt(med(l[0] for l in load))} | {fmt(med(l[1] for l in load))} | {fmt(med(rise))} |")


fl = [flent(r) for r in range(1, reps + 1)]
pl = [plumb(r) for r in range(1, reps + 1)]
drain = limit * 1514 * 8 / rate * 1e3
print("## rrul: plumb's latency under load beside flent's RRUL\n")
print(f"`{command}`: {machine()}; {reps} repetition{'s' * (reps != 1)}, each `flent rrul -H {server} -l {length}` and "
      f"then `plumb run load --server {server} --phase {phase}s --load-flows 4 --cc cubic "
      "--iterations 1`, both from a "
      "client namespace to netserver (demo build), irtt and `plumb serve` in a server namespace, "
      "through a router namespace whose egress each way is an HTB shaper at "
      f"{rate / 1e6:g} Mbit/s over a pfifo of {limit} packets (200 KiB of 1500-byte packets, as "
      "plumb builds `--topology veth --qdisc pfifo --link-rate 20M --queue 200K`); cubic at both "
      "ends, offloads off.\n")
print(f"The queue to judge both by: {limit} full-size frames (1514 B) take {drain:.0f} ms to "
      f"drain at {rate / 1e6:g} Mbit/s, the most a probe can wait in one FIFO; a round trip "
      f"crosses the router's FIFO each way, so with both loaded up to {2 * drain:.0f} ms.\n")
print("The same load in both: 4 TCP flows up and 4 down at once. RRUL runs them together for "
      f"{length} s after {fl[0][2]:g} s idle, so its loaded period is set beside plumb's `both` phase "
      "(both-down + both-up) and its idle lead-in beside plumb's first idle phase. Idle: flent's "
      "lead-in less its first second, plumb's first phase less its first second; loaded: flent's "
      "period less its first 2 s, plumb's `both` phase less its first second. Each cell is the "
      "median over the repetitions (min-max) of that repetition's percentile, in ms; the rise is "
      "a repetition's loaded p50 less its idle p50. At 5 pings a second flent's idle stretch "
      "holds some 20 per series, so its idle p99 is their largest; plumb's holds some 80 per probe.\n")
print("| tool | probe | idle p50 | idle p99 | loaded p50 | loaded p99 | p50 rise |")
print("|---|---|---|---|---|---|---|")
rows("flent", [(s, s.replace("Ping (ms) ", "")) for s in FLENT], fl)
rows("plumb", PLUMB, pl)
print()
gf, gp = [med(g[1][k] for g in fl) for k in (0, 1)], [med(g[1][k] for g in pl) for k in (0, 1)]
print(f"Goodput while loaded, Mbit/s: flent down {fmt(gf[0])}, up {fmt(gf[1])} (its 4 flows "
      f"each way summed, less the first 2 s); plumb's `both` phase down {fmt(gp[0])}, up "
      f"{fmt(gp[1])} (the whole phase, its first second of ramp included).\n")
print("What differs. flent's probes: ICMP echo (`ping`, every 0.2 s) and irtt's UDP "
      "round trips (every 0.2 s each), marked EF, CS1 (BK) and best effort, the flows "
      "themselves marked CS0, CS1, CS5 and EF in each direction; irtt being installed and its "
      "server reachable, flent takes it for the UDP pings rather than netperf's UDP_RR. "
      "`avg` is flent's mean of the four at each 0.2 s step. plumb's probes, unmarked, 20 a "
      "second each: `run`, an open-loop TCP rr on a connection of its own (timed from its "
      "planned send time, so a probe queued behind another counts its wait); `udp`, an "
      "open-loop UDP rr (lost after 1 s); `connect`, a new TCP connection's handshake and a "
      "1-byte exchange (two round trips; a lost SYN waits out its 1 s timer); `self`, probes inside the loaded flows, which wait "
      "behind the flows' own unsent data as well (no idle figure: its rise is over `run`'s idle "
      "p50). A FIFO serves every marking alike, so the markings change nothing here.")
