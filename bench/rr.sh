#!/usr/bin/env bash
# plumb against sockperf, qperf, netperf and neper on loopback for
# request/response, the tools rotating so that drift hits all alike. Writes
# the "rr" section of BENCHMARKS.md. netperf and neper come from
# ../shared/peers/build.sh (or PEERS=DIR holding their binaries).
#
#   bench/rr.sh [REPS] [SECONDS]      (defaults: 5 repetitions, 10 s)
#
# Cases:
#   a) one TCP flow, closed loop (one request outstanding), 1-byte request and
#      response; sockperf ping-pong at its minimum message size, 14 bytes, and
#      qperf tcp_lat with 1-byte messages, netperf TCP_RR -r 1,1 and neper
#      tcp_rr (1-byte requests and responses). The order of the tools rotates
#      with each repetition.
#   b) one UDP flow, closed loop, 16-byte request and response (plumb's
#      smallest datagram: its header): plumb udp-rr against sockperf's UDP
#      ping-pong, netperf UDP_RR -r 16,16 and neper udp_rr -Q 16 -R 16.
# plumb and neper at thousands of flows (rr and crr) are bench/scale.sh.
# Reported per tool: transactions per second, round-trip latency p50 and p99
# (and mean), medians with min-max. plumb against each peer, per case:
# plumb/peer for transactions per second, p50 and p99, the geometric mean of
# the paired repetitions' ratios with its 95 % Student-t interval
# (bench/ratio.py), a difference called only where the interval leaves 1
# out: the runs of one repetition follow each other closely, so drift between
# repetitions hits both sides of a pair alike and does not pass for a
# difference. Both sockperf (without --full-rtt) and qperf report half a
# round trip as "latency"; the figures here are whole round trips throughout,
# and for qperf, which gives only a mean, transactions per second are
# 1e6 / round-trip microseconds.
. "$(dirname "$0")/lib.sh"
REPS=${1:-5}
SECS=${2:-10}

bench_need sockperf qperf
bench_setup

# Round trips from sockperf where it can say so itself (--full-rtt, sockperf
# 3.7 and later); otherwise the parser doubles its half round trips.
sp_help=$(sockperf ping-pong --help 2>&1 || true)
SP_RTT=()
if [[ $sp_help == *--full-rtt* ]]; then SP_RTT=(--full-rtt); fi

# Listening ports below the ephemeral range (32768-60999 by default), a fresh
# one for every server so that no TIME_WAIT socket of an earlier run is in
# the way.
port=$((20000 + RANDOM % 10000))
next_port() { port=$((port + 1)); }

plumb_a() {
  "$PLUMB" run rr --json --iterations 1 --no-store --duration "${SECS}s" --warmup 1s >"$work/plumb-a-$rep.json"
}

sockperf_a() {
  next_port
  sockperf server --tcp -i 127.0.0.1 -p "$port" >/dev/null 2>&1 &
  srv=$!
  sleep 0.5
  sockperf ping-pong --tcp -i 127.0.0.1 -p "$port" -t "$SECS" -m 14 --pps max "${SP_RTT[@]}" \
    >"$work/sockperf-a-$rep.txt" 2>&1 || true
  stop_srv
}

qperf_a() {
  next_port
  qperf --listen_port "$port" >/dev/null 2>&1 &
  srv=$!
  sleep 0.3
  qperf 127.0.0.1 --listen_port "$port" -t "$SECS" -m 1 -e 6 tcp_lat >"$work/qperf-a-$rep.txt" 2>&1 || true
  stop_srv
}

plumb_c() {
  "$PLUMB" run udp-rr --json --iterations 1 --no-store --duration "${SECS}s" --warmup 1s >"$work/plumb-c-$rep.json"
}

sockperf_c() {
  next_port
  sockperf server -i 127.0.0.1 -p "$port" >/dev/null 2>&1 &
  srv=$!
  sleep 0.5
  sockperf ping-pong -i 127.0.0.1 -p "$port" -t "$SECS" -m 16 --pps max "${SP_RTT[@]}" \
    >"$work/sockperf-c-$rep.txt" 2>&1 || true
  stop_srv
}

# netperf's omni output: transactions/s and round-trip latencies in µs.
netperf_rr() { # case test size
  next_port
  "$PEERS/netserver" -D -p "$port" >/dev/null 2>&1 &
  srv=$!
  sleep 0.3
  "$PEERS/netperf" -H 127.0.0.1 -p "$port" -l "$SECS" -t "$2" -P 0 -- -r "$3,$3" \
    -o THROUGHPUT,MEAN_LATENCY,P50_LATENCY,P99_LATENCY >"$work/netperf-$1-$rep.txt" 2>&1 || true
  stop_srv
}

# neper prints key=value lines; latencies in seconds.
neper_rr() { # case binary size
  next_port
  local data=$((port + 1000))
  "$PEERS/$2" -C "$port" -P "$data" -l $((SECS + 2)) --nolog -Q "$3" -R "$3" >/dev/null 2>&1 &
  srv=$!
  sleep 0.3
  "$PEERS/$2" -c -H 127.0.0.1 -C "$port" -P "$data" -l "$SECS" --nolog -Q "$3" -R "$3" -p 50,99 \
    >"$work/neper-$1-$rep.txt" 2>&1 || true
  wait "$srv" 2>/dev/null || true
  srv=
}

tools=(plumb sockperf qperf netperf neper)
for rep in $(seq 1 "$REPS"); do
  echo "repetition $rep/$REPS" >&2
  for i in 0 1 2 3 4; do
    case ${tools[$(( (rep - 1 + i) % 5 ))]} in
      plumb) plumb_a; plumb_c ;;
      sockperf) sockperf_a; sockperf_c ;;
      qperf) qperf_a ;;
      netperf) netperf_rr a TCP_RR 1; netperf_rr c UDP_RR 16 ;;
      neper) neper_rr a tcp_rr 1; neper_rr c udp_rr 16 ;;
    esac
  done
done

python3 - "$work" "$REPS" "$SECS" "$("$PLUMB" --version)" "$(sockperf --version 2>&1 | head -1)" \
  "$(qperf --version 2>&1 | head -1)" "${SP_RTT[*]}" "$("$PEERS/netperf" -V 2>&1 | head -1)" <<'PY'
import glob, json, os, platform, re, resource, statistics, sys, datetime
sys.path.insert(0, "bench")
from ratio import ratio_interval, called
work, reps, secs, plumb_v, sockperf_v, qperf_v, sp_rtt, netperf_v = sys.argv[1:]

def med(xs):
    xs = sorted(xs)
    return statistics.median(xs), xs[0], xs[-1]

def fmt(xs, unit="", digits=1):
    if not xs:
        return "n/a"
    m, lo, hi = med(xs)
    u = f" {unit}" if unit else ""
    return f"{m:.{digits}f}{u} ({lo:.{digits}f}-{hi:.{digits}f})"

def rep_of(path):
    return int(re.search(r"-(\d+)\.\w+$", path).group(1))

def files(pattern):
    return sorted(glob.glob(f"{work}/{pattern}"), key=rep_of)

def add(into, f, **vals):
    """One run's figures into a tool's lists, and under its repetition, so
    that a ratio pairs the runs of one repetition even where another tool's
    run of it was left out."""
    for k, v in vals.items():
        into[k].append(v)
        into["at"].setdefault(k, {})[rep_of(f)] = v

# (a) one flow: transactions/s, p50, p99 and mean round trip in microseconds.
a = {t: {"tps": [], "p50": [], "p99": [], "mean": [], "at": {}} for t in ("plumb", "sockperf", "qperf")}
a_failed = {t: 0 for t in a}
def plumb_into(pattern, into):
    for f in files(pattern):
        it = json.load(open(f))["iterations"][0]
        lat = it["client"]["latency"]
        add(into, f, tps=it["derived"]["tps"], **{k: lat[f"{k}_us"] for k in ("p50", "p99", "mean")})
        if "timeouts" in into:
            into["timeouts"].append(it["client"]["udp"]["timeouts"])
plumb_into("plumb-a-*.json", a["plumb"])

ansi = re.compile(r"\x1b\[[0-9;]*m")
def sockperf_into(pattern, into, failed):
    for f in files(pattern):
        text = ansi.sub("", open(f, errors="replace").read())
        dur = re.search(r"\[Valid Duration\] RunTime=([\d.]+) sec", text)
        obs = re.search(r"Total (\d+) observations", text)
        summ = re.search(r"Summary: (Round trip|Latency) is ([\d.]+) usec", text)
        pct = {float(p): float(v) for p, v in re.findall(r"---> percentile ([\d.]+) =\s*([\d.]+)", text)}
        if not (dur and obs and summ and 50.0 in pct and 99.0 in pct):
            failed["sockperf"] += 1
            continue
        # sockperf prints half round trips ("Latency is") unless run with --full-rtt ("Round trip is").
        k = 1.0 if summ.group(1) == "Round trip" else 2.0
        add(into, f, tps=int(obs.group(1)) / float(dur.group(1)), p50=k * pct[50.0], p99=k * pct[99.0],
            mean=k * float(summ.group(2)))
sockperf_into("sockperf-a-*.txt", a["sockperf"], a_failed)

# (b) one UDP flow.
c = {t: {"tps": [], "p50": [], "p99": [], "mean": [], "timeouts": [], "at": {}} for t in ("plumb", "sockperf")}
c_failed = {"plumb": 0, "sockperf": 0}
plumb_into("plumb-c-*.json", c["plumb"])
sockperf_into("sockperf-c-*.txt", c["sockperf"], c_failed)

units = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "sec": 1e6, "s": 1e6}
for f in files("qperf-a-*.txt"):
    m = re.search(r"^\s*latency\s*=\s*([\d.]+)\s*(ns|us|ms|sec|s)\b", open(f, errors="replace").read(), re.M)
    if not m:
        a_failed["qperf"] += 1
        continue
    rtt = 2 * float(m.group(1)) * units[m.group(2)]  # qperf's tcp_lat latency is one way, half a round trip
    add(a["qperf"], f, tps=1e6 / rtt, mean=rtt)

def peers_into(case, into, failed):
    """netperf's and neper's figures of case `case` into `into[tool]`."""
    for f in files(f"netperf-{case}-*.txt"):
        m = re.search(r"^([\d.]+),([\d.]+),([\d.]+),([\d.]+)\s*$", open(f, errors="replace").read(), re.M)
        if not m:
            failed["netperf"] += 1
            continue
        tps, mean, p50, p99 = map(float, m.groups())
        add(into["netperf"], f, tps=tps, mean=mean, p50=p50, p99=p99)
    for f in files(f"neper-{case}-*.txt"):
        kv = dict(l.split("=", 1) for l in open(f, errors="replace").read().splitlines() if "=" in l)
        try:
            tps = float(kv["num_transactions"]) / float(kv["total_run_time"])
            vals = {"tps": tps, "mean": 1e6 * float(kv["latency_mean"]),
                    "p50": 1e6 * float(kv["latency_p50"]), "p99": 1e6 * float(kv["latency_p99"])}
        except (KeyError, ValueError):
            failed["neper"] += 1
            continue
        if tps <= 0:
            failed["neper"] += 1
            continue
        add(into["neper"], f, **vals)

for t in ("netperf", "neper"):
    a[t] = {"tps": [], "p50": [], "p99": [], "mean": [], "at": {}}
    a_failed[t] = 0
    c[t] = {"tps": [], "p50": [], "p99": [], "mean": [], "timeouts": [], "at": {}}
    c_failed[t] = 0
peers_into("a", a, a_failed)
peers_into("c", c, c_failed)

# (key, heading, words for a ratio above 1 and below 1, whether more is better)
METRICS = (("tps", "transactions/s", "better", "worse", True),
           ("p50", "p50 round trip", "worse", "better", False),
           ("p99", "p99 round trip", "worse", "better", False))

def paired(d, peer, k):
    """plumb/peer for figure k over the repetitions where both have it."""
    mine, theirs = d["plumb"]["at"].get(k, {}), d[peer]["at"].get(k, {})
    return ratio_interval([(theirs[r], mine[r]) for r in sorted(mine) if r in theirs])

def ratio_table(d, peers):
    out = ["| peer | " + " | ".join(f"{h}, plumb/peer [95 %] | called" for _, h, *_ in METRICS) + " |",
           "|---" * (1 + 2 * len(METRICS)) + "|"]
    for peer in peers:
        cells = []
        for k, _, above, below, _ in METRICS:
            if not d[peer][k]:
                cells += ["not reported", "-"]
                continue
            iv = paired(d, peer, k)
            cells += [f"{iv[0]:.3f} [{iv[1]:.3f}, {iv[2]:.3f}]" if iv else "n/a", called(iv, above, below)]
        out.append(f"| {peer} | " + " | ".join(cells) + " |")
    best = []
    for k, h, _, _, more in METRICS:
        have = {t: med(d[t][k])[0] for t in peers if d[t][k]}
        if have:
            who = (max if more else min)(have, key=have.get)
            best.append(f"{h} {who}")
    if best:
        out.append("\nBest peer by its median (most transactions/s, shortest round trip): " + ", ".join(best) + ".")
    return out

cpu_model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
today = datetime.date.today().isoformat()
nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
sp_flag = f" {sp_rtt}" if sp_rtt else ""
cmds_a = [
    f"plumb run rr --json --iterations 1 --no-store --duration {secs}s --warmup 1s",
    "sockperf server --tcp -i 127.0.0.1 -p PORT",
    f"sockperf ping-pong --tcp -i 127.0.0.1 -p PORT -t {secs} -m 14 --pps max{sp_flag}",
    "qperf --listen_port PORT",
    f"qperf 127.0.0.1 --listen_port PORT -t {secs} -m 1 -e 6 tcp_lat",
    "netserver -D -p PORT",
    f"netperf -H 127.0.0.1 -p PORT -l {secs} -t TCP_RR -P 0 -- -r 1,1 -o THROUGHPUT,MEAN_LATENCY,P50_LATENCY,P99_LATENCY",
    f"tcp_rr -C PORT -P PORT2 -l {int(secs) + 2} --nolog -Q 1 -R 1",
    f"tcp_rr -c -H 127.0.0.1 -C PORT -P PORT2 -l {secs} --nolog -Q 1 -R 1 -p 50,99",
]

lines = []
lines.append("## rr: plumb vs sockperf, qperf, netperf and neper on loopback\n")
lines.append(f"Run by `bench/rr.sh {reps} {secs}` on {today}: {os.cpu_count()} CPUs ({cpu_model}), "
             f"kernel {platform.release()}, RLIMIT_NOFILE {nofile}, {plumb_v}, {sockperf_v}, {qperf_v}, {netperf_v}, neper 1.1.0. "
             f"{reps} repetitions of {secs} s per tool and case, the order of the tools rotating "
             "with each repetition. Each tool: medians with min-max in brackets. All latencies are whole round "
             "trips (request out, response back) in microseconds. plumb against each peer: the geometric mean of "
             "the paired repetitions' ratios plumb/peer (plumb's run of a repetition against the peer's run of "
             "the same repetition) with its 95 % Student-t interval in brackets; a difference is called only where "
             "the interval leaves 1 out. For transactions/s a ratio above 1 means plumb did more; for round trips "
             "a ratio below 1 means plumb's round trip is shorter, which is better.\n")
lines.append("### (a) one TCP flow, closed loop, 1-byte request and response\n")
lines.append("| tool | message size | transactions/s | p50 round trip (µs) | p99 round trip (µs) | mean round trip (µs) |")
lines.append("|---|---|---|---|---|---|")
size = {"plumb": "1 B", "sockperf": "14 B", "qperf": "1 B", "netperf": "1 B", "neper": "1 B"}
for tool in ("plumb", "sockperf", "qperf", "netperf", "neper"):
    r = a[tool]
    lines.append(f"| {tool} | {size[tool]} | {fmt(r['tps'], '', 0)} | {fmt(r['p50'])} | {fmt(r['p99'])} | {fmt(r['mean'])} |")
lines.append("")
lines += ratio_table(a, ("sockperf", "qperf", "netperf", "neper"))
lines.append("")
failed = [f"{t} {n} of {reps}" for t, n in a_failed.items() if n]
if failed:
    lines.append(f"Runs whose output could not be parsed, left out: {', '.join(failed)}.\n")
lines.append("How each tool's figures are taken: plumb from its JSON record (`derived.tps`, "
             "`client.latency.p50_us`, `p99_us`, `mean_us`, over the window after a 1 s warm-up). "
             "sockperf's minimum message size is 14 bytes (it carries its own header), so it runs with 14-byte "
             "messages where the others use 1 byte; its transactions/s are its observations divided by its "
             "\"[Valid Duration] RunTime\", which is the -t time less its fixed 400 ms warm-up and a little "
             "at the end; it reports half round trips unless given --full-rtt"
             + (" (given here)" if sp_rtt else " (not supported by this version, so its figures are doubled)")
             + ". qperf's tcp_lat reports only a mean one-way latency, half a round trip: the round trip is "
             "twice that, transactions/s are 1e6 / round-trip µs, and it has no percentiles. netperf's "
             "omni output gives transactions/s and round-trip latencies in µs; neper's tcp_rr and udp_rr "
             "give their transaction count, run time and round-trip latencies in seconds.\n")
lines.append("Commands (PORT a fresh port below the ephemeral range for each server):\n")
for cmd in cmds_a:
    lines.append(f"    {cmd}")
lines.append("")
lines.append("### (b) one UDP flow, closed loop, 16-byte request and response\n")
lines.append("| tool | transactions/s | p50 round trip (µs) | p99 round trip (µs) | mean round trip (µs) |")
lines.append("|---|---|---|---|---|")
for tool in ("plumb", "sockperf", "netperf", "neper"):
    r = c[tool]
    lines.append(f"| {tool} | {fmt(r['tps'], '', 0)} | {fmt(r['p50'])} | {fmt(r['p99'])} | {fmt(r['mean'])} |")
lines.append("")
lines += ratio_table(c, ("sockperf", "netperf", "neper"))
lines.append(f"\nplumb's requests that timed out (200 ms): {sum(c['plumb']['timeouts'])} over all repetitions.\n")
failed = [f"{t} {n} of {reps}" for t, n in c_failed.items() if n]
if failed:
    lines.append(f"Runs whose output could not be parsed, left out: {', '.join(failed)}.\n")
lines.append("Commands:\n")
for cmd in (f"plumb run udp-rr --json --iterations 1 --no-store --duration {secs}s --warmup 1s",
            "sockperf server -i 127.0.0.1 -p PORT",
            f"sockperf ping-pong -i 127.0.0.1 -p PORT -t {secs} -m 16 --pps max{sp_flag}",
            f"netperf -H 127.0.0.1 -p PORT -l {secs} -t UDP_RR -P 0 -- -r 16,16 -o THROUGHPUT,MEAN_LATENCY,P50_LATENCY,P99_LATENCY",
            f"udp_rr -C PORT -P PORT2 -l {int(secs) + 2} --nolog -Q 16 -R 16",
            f"udp_rr -c -H 127.0.0.1 -C PORT -P PORT2 -l {secs} --nolog -Q 16 -R 16 -p 50,99"):
    lines.append(f"    {cmd}")
lines.append("")
open(f"{work}/section.md", "w").write("\n".join(lines) + "\n")
PY
write_section "$OUT" '## rr: plumb vs [^\n]*\n' "$work/section.md"
