#!/usr/bin/env bash
# plumb against iperf3, netperf and neper on loopback, the tools rotating so
# that drift hits all alike. Writes the "stream" section of BENCHMARKS.md.
#
#   bench/stream.sh [REPS] [SECONDS]      (defaults: 5 repetitions, 10 s)
#
# PLUMB=path/to/plumb and IPERF3=path/to/iperf3 use binaries from elsewhere
# (then nothing is built or installed); PEERS=DIR names a directory holding
# netperf, netserver and neper's tcp_stream (default: what
# ../shared/peers/build.sh builds and prints); OUT=FILE writes the section to
# another file than BENCHMARKS.md.
#
# Cases:
#   a) one flow of 128K writes, client sends
#   b) 32 flows of 256-byte writes, 8K buffers, TCP_NODELAY, receive direction
#      (the server sends: iperf3 -R -P 32 -l 256 -w 8K -N). Every tool runs
#      the same number of threads: iperf3 before 3.16 runs all its streams
#      in one thread, later ones a thread per stream, and plumb (--threads)
#      and neper (-T) are given the same count. netperf opens one connection
#      per process and is left out of this case.
# Reported per tool: throughput, and throughput per CPU-second of the sending
# process (the sender's user+system time; far steadier than raw throughput on
# a noisy machine), medians with min-max; for plumb also the share of its
# sending CPU time spent in user space (its own code rather than the kernel's).
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-5}
SECS=${2:-10}
OUT=${OUT:-BENCHMARKS.md}
IPERF3=${IPERF3:-iperf3}
. bench/lib.sh

bench_need "$IPERF3=iperf3"
bench_setup
NETPERF=$PEERS/netperf NETSERVER=$PEERS/netserver NEPER=$PEERS/tcp_stream

iperf3_version=$("$IPERF3" --version | head -1 | awk '{print $2}')
if printf '3.16\n%s\n' "$iperf3_version" | sort -V -C; then THREADS_B=32; else THREADS_B=1; fi

port=$((20000 + RANDOM % 20000))
iperf3_case() { # case-name, extra iperf3 args...
  local name=$1; shift
  "$IPERF3" -s -1 -p "$port" >/dev/null 2>&1 &
  local spid=$!
  sleep 0.3
  "$IPERF3" -c 127.0.0.1 -p "$port" -t "$SECS" -O 1 -J "$@" >"$work/iperf3-$name-$rep.json" || true
  wait "$spid" 2>/dev/null || true
}

plumb_case() { # case-name, extra plumb args...
  local name=$1; shift
  "$PLUMB" run stream --json --iterations 1 --no-store --duration "${SECS}s" --warmup 1s "$@" >"$work/plumb-$name-$rep.json"
}

# netperf reports host-wide CPU; the sending process's own CPU time is taken
# from its rusage instead, as for the other tools.
netperf_case() { # case-name, extra test-specific args...
  local name=$1; shift
  port=$((port + 1))
  "$NETSERVER" -D -p "$port" >/dev/null 2>&1 &
  srv=$!
  sleep 0.3
  python3 -c 'import resource, subprocess, sys
r = subprocess.run(sys.argv[2:], stdout=open(sys.argv[1], "w"))
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"cpu_s={u.ru_utime + u.ru_stime}", file=open(sys.argv[1], "a"))' \
    "$work/netperf-$name-$rep.txt" "$NETPERF" -H 127.0.0.1 -p "$port" -l "$SECS" -t TCP_STREAM -P 0 -- \
    -o THROUGHPUT,THROUGHPUT_UNITS "$@" || true
  stop_srv
}

# neper prints its process's user and system time at start and end; the
# server's output holds them for the case where the server sends.
neper_case() { # case-name, extra args...
  local name=$1; shift
  port=$((port + 2))
  "$NEPER" -C "$port" -P $((port + 1)) -l $((SECS + 2)) --nolog "$@" >"$work/neper-$name-$rep.server" 2>&1 &
  srv=$!
  sleep 0.3
  "$NEPER" -c -H 127.0.0.1 -C "$port" -P $((port + 1)) -l "$SECS" --nolog "$@" >"$work/neper-$name-$rep.client" 2>&1 || true
  wait "$srv" 2>/dev/null || true
  srv=
}

run_a() { # tool
  case $1 in
    plumb) plumb_case a --msg-size 128K ;;
    iperf3) iperf3_case a -l 128K ;;
    netperf) netperf_case a -m 128K ;;
    neper) neper_case a -B 131072 ;;
  esac
}
run_b() { # tool
  case $1 in
    plumb) plumb_case b --flows 32 --threads "$THREADS_B" --msg-size 256 --sndbuf 8K --rcvbuf 8K --nodelay --direction recv ;;
    iperf3) iperf3_case b -R -P 32 -l 256 -w 8K -N ;;
    neper) neper_case b -M -F 32 -T "$THREADS_B" -B 256 --no-delay ;;
  esac
}

tools=(plumb iperf3 netperf neper)
for rep in $(seq 1 "$REPS"); do
  echo "repetition $rep/$REPS" >&2
  for i in 0 1 2 3; do
    tool=${tools[$(( (rep - 1 + i) % 4 ))]}
    run_a "$tool"
    [[ $tool == netperf ]] || run_b "$tool"
  done
done

python3 - "$work" "$REPS" "$SECS" "$("$PLUMB" --version)" "$("$IPERF3" --version | head -1)" \
  "$("$NETPERF" -V 2>&1 | head -1)" "$THREADS_B" <<'PY'
import glob, json, os, platform, re, statistics, subprocess, sys, datetime
work, reps, secs, plumb_v, iperf_v, netperf_v, threads_b = sys.argv[1:]

def med(xs):
    xs = sorted(xs)
    return statistics.median(xs), xs[0], xs[-1]

def fmt(xs, unit, digits=2):
    if not xs:
        return "n/a"
    m, lo, hi = med(xs)
    return f"{m:.{digits}f} {unit} ({lo:.{digits}f}-{hi:.{digits}f})"

rows = {}
for case, sender in (("a", "client"), ("b", "server")):
    thr, eff, user = [], [], []
    for f in sorted(glob.glob(f"{work}/plumb-{case}-*.json")):
        it = json.load(open(f))["iterations"][0]
        gbps = it["derived"]["throughput_bps"] / 1e9
        p = it[sender]["process"]
        cpu = p["user_s"] + p["system_s"]
        thr.append(gbps)
        eff.append(gbps / (cpu / it[sender]["window_s"]))
        user.append(100 * p["user_s"] / cpu)
    rows[("plumb", case)] = (thr, eff, user)
    thr, eff = [], []
    for f in sorted(glob.glob(f"{work}/iperf3-{case}-*.json")):
        try:
            j = json.load(open(f))
            end = j["end"]
        except Exception:
            continue
        gbps = end["sum_received"]["bits_per_second"] / 1e9
        cpu = end["cpu_utilization_percent"]["host_total" if sender == "client" else "remote_total"] / 100
        thr.append(gbps)
        eff.append(gbps / cpu)
    rows[("iperf3", case)] = (thr, eff, [])
    thr, eff = [], []
    for f in sorted(glob.glob(f"{work}/netperf-{case}-*.txt")):
        text = open(f).read()
        m = re.search(r"^([\d.]+),10\^6bits/s", text, re.M)
        c = re.search(r"^cpu_s=([\d.]+)", text, re.M)
        if not (m and c):
            continue
        gbps = float(m.group(1)) / 1e3
        thr.append(gbps)
        eff.append(gbps / (float(c.group(1)) / float(secs)))
    rows[("netperf", case)] = (thr, eff, [])
    thr, eff = [], []
    for f in sorted(glob.glob(f"{work}/neper-{case}-*.client")):
        kv = lambda p: dict(l.split("=", 1) for l in open(p).read().splitlines() if "=" in l)
        try:
            cl, sv = kv(f), kv(f[: -len(".client")] + ".server")
            # The receiver's count: the server's in case a, the client's in b.
            bps = float(sv["local_throughput"] if case == "a" else cl["local_throughput"])
            snd = cl if case == "a" else sv
            cpu = sum(float(snd[k + "_end"]) - float(snd[k + "_start"]) for k in ("utime", "stime"))
            run_s = float(cl["total_run_time"])
        except (KeyError, ValueError, OSError):
            continue
        thr.append(bps / 1e9)
        eff.append(bps / 1e9 / (cpu / run_s))
    rows[("neper", case)] = (thr, eff, [])

_aff = len(os.sched_getaffinity(0))
cpu_desc = f"{_aff} CPUs" if _aff == os.cpu_count() else f"{_aff} of {os.cpu_count()} CPUs (the run confined to {_aff} with taskset)"
cpu_model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
today = datetime.date.today().isoformat()
desc = {
    "a": "one flow, 128K writes, client sends",
    "b": f"32 flows, 256 B writes, 8K buffers, nodelay, receive direction, {threads_b} thread(s) each",
}
cmds = {
    ("plumb", "a"): f"plumb run stream --json --iterations 1 --no-store --duration {secs}s --warmup 1s --msg-size 128K",
    ("iperf3", "a"): f"iperf3 -c 127.0.0.1 -t {secs} -O 1 -J -l 128K",
    ("netperf", "a"): f"netserver -D -p PORT; netperf -H 127.0.0.1 -p PORT -l {secs} -t TCP_STREAM -P 0 -- -o THROUGHPUT,THROUGHPUT_UNITS -m 128K",
    ("neper", "a"): f"tcp_stream -C PORT -P PORT2 -l {int(secs) + 2} --nolog -B 131072; tcp_stream -c -H 127.0.0.1 -C PORT -P PORT2 -l {secs} --nolog -B 131072",
    ("plumb", "b"): f"plumb run stream --json --iterations 1 --no-store --duration {secs}s --warmup 1s --flows 32 --threads {threads_b} --msg-size 256 --sndbuf 8K --rcvbuf 8K --nodelay --direction recv",
    ("iperf3", "b"): f"iperf3 -c 127.0.0.1 -t {secs} -O 1 -J -R -P 32 -l 256 -w 8K -N",
    ("neper", "b"): f"tcp_stream -C PORT -P PORT2 -l {int(secs) + 2} --nolog -M -F 32 -T {threads_b} -B 256 --no-delay; tcp_stream -c -H 127.0.0.1 -C PORT -P PORT2 -l {secs} --nolog -M -F 32 -T {threads_b} -B 256 --no-delay",
}
peers = {"a": ("iperf3", "netperf", "neper"), "b": ("iperf3", "neper")}
lines = []
lines.append("## stream: plumb vs iperf3, netperf and neper on loopback\n")
lines.append(f"Run by `bench/stream.sh {reps} {secs}` on {today}: {cpu_desc} ({cpu_model}), "
             f"kernel {platform.release()}, {plumb_v}, {iperf_v}, {netperf_v}, neper 1.1.0. "
             f"{reps} repetitions per tool and case, the order of the tools rotating. "
             "Medians with min-max in brackets. Gbit/s per CPU-second is the throughput divided by the "
             "sending process's CPU use (user+system seconds per second of the window): plumb from its "
             "own accounting, iperf3 from its `cpu_utilization_percent` (host_total when the client "
             "sends, remote_total when the server sends), netperf from the rusage of its process (its own "
             "CPU figures are host-wide), neper from the user and system time it prints for the sending "
             "process. neper has no socket-buffer option: in case (b) it runs with the kernel's autotuned "
             "buffers where the others have 8K. netperf opens one connection per process and is not in "
             "case (b).\n")
for case in ("a", "b"):
    lines.append(f"### ({case}) {desc[case]}\n")
    lines.append("| tool | throughput | Gbit/s per sending CPU-second | sender's CPU in user space |")
    lines.append("|---|---|---|---|")
    for tool in ("plumb",) + peers[case]:
        thr, eff, user = rows[(tool, case)]
        lines.append(f"| {tool} | {fmt(thr, 'Gbit/s')} | {fmt(eff, '')} | {fmt(user, '%', 1) if user else 'n/a'} |")
    pt, pe = rows[("plumb", case)][0], rows[("plumb", case)][1]
    ratios = []
    for k, name in ((0, "throughput"), (1, "per sending CPU-second")):
        have = [(med(rows[(t, case)][k])[0], t) for t in peers[case] if rows[(t, case)][k]]
        mine = rows[("plumb", case)][k]
        if have and mine:
            best, who = max(have)
            ratios.append(f"{name} {med(mine)[0] / best:.2f} (best peer {who})")
    if ratios:
        lines.append(f"\nRatio of plumb's median to the best peer's: {', '.join(ratios)}.\n")
    missing = [t for t in peers[case] if not rows[(t, case)][0]]
    if missing:
        lines.append(f"No figures from {', '.join(missing)}: its output could not be parsed.\n")
    lines.append("Commands:\n")
    for tool in ("plumb",) + peers[case]:
        lines.append(f"    {cmds[(tool, case)]}")
    lines.append("")
open(f"{work}/section.md", "w").write("\n".join(lines) + "\n")
PY
write_section "$OUT" '## stream: plumb vs [^\n]*\n' "$work/section.md"
