#!/usr/bin/env bash
# plumb against iperf3 on loopback, alternating the two tools so that drift
# hits both alike. Writes the "stream" section of BENCHMARKS.md.
#
#   bench/stream.sh [REPS] [SECONDS]      (defaults: 5 repetitions, 10 s)
#
# PLUMB=path/to/plumb and IPERF3=path/to/iperf3 use binaries from elsewhere
# (then nothing is built or installed); OUT=FILE writes the section to another
# file than BENCHMARKS.md.
#
# Cases:
#   a) one flow of 128K writes, client sends
#   b) 32 flows of 256-byte writes, 8K buffers, TCP_NODELAY, receive direction
#      (the server sends: iperf3 -R -P 32 -l 256 -w 8K -N)
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

if ! command -v "$IPERF3" >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iperf3
fi
if [[ -z ${PLUMB:-} ]]; then
  cargo build --release -q
  PLUMB=target/release/plumb
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

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

for rep in $(seq 1 "$REPS"); do
  echo "repetition $rep/$REPS" >&2
  if (( rep % 2 )); then
    plumb_case a --msg-size 128K
    iperf3_case a -l 128K
    plumb_case b --flows 32 --msg-size 256 --sndbuf 8K --rcvbuf 8K --nodelay --direction recv
    iperf3_case b -R -P 32 -l 256 -w 8K -N
  else
    iperf3_case a -l 128K
    plumb_case a --msg-size 128K
    iperf3_case b -R -P 32 -l 256 -w 8K -N
    plumb_case b --flows 32 --msg-size 256 --sndbuf 8K --rcvbuf 8K --nodelay --direction recv
  fi
done

python3 - "$work" "$REPS" "$SECS" "$OUT" "$("$PLUMB" --version)" "$("$IPERF3" --version | head -1)" <<'PY'
import glob, json, os, platform, re, statistics, subprocess, sys, datetime
work, reps, secs, out, plumb_v, iperf_v = sys.argv[1:]

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

_aff = len(os.sched_getaffinity(0))
cpu_desc = f"{_aff} CPUs" if _aff == os.cpu_count() else f"{_aff} of {os.cpu_count()} CPUs (the run confined to {_aff} with taskset)"
cpu_model = ""
for line in open("/proc/cpuinfo"):
    if line.startswith("model name"):
        cpu_model = line.split(":", 1)[1].strip()
        break
today = datetime.date.today().isoformat()
desc = {
    "a": "one flow, 128K writes, client sends",
    "b": "32 flows, 256 B writes, 8K buffers, nodelay, receive direction",
}
cmds = {
    ("plumb", "a"): f"plumb run stream --json --iterations 1 --no-store --duration {secs}s --warmup 1s --msg-size 128K",
    ("iperf3", "a"): f"iperf3 -c 127.0.0.1 -t {secs} -O 1 -J -l 128K",
    ("plumb", "b"): f"plumb run stream --json --iterations 1 --no-store --duration {secs}s --warmup 1s --flows 32 --msg-size 256 --sndbuf 8K --rcvbuf 8K --nodelay --direction recv",
    ("iperf3", "b"): f"iperf3 -c 127.0.0.1 -t {secs} -O 1 -J -R -P 32 -l 256 -w 8K -N",
}
lines = []
lines.append("## stream: plumb vs iperf3 on loopback\n")
lines.append(f"Run by `bench/stream.sh {reps} {secs}` on {today}: {cpu_desc} ({cpu_model}), "
             f"kernel {platform.release()}, {plumb_v}, {iperf_v}. "
             f"{reps} repetitions per tool and case, the tools alternating. "
             "Medians with min-max in brackets. Gbit/s per CPU-second is the throughput divided by the "
             "sending process's CPU use (user+system seconds per second of the window): plumb from its "
             "own accounting, iperf3 from its `cpu_utilization_percent` (host_total when the client "
             "sends, remote_total when the server sends).\n")
for case in ("a", "b"):
    lines.append(f"### ({case}) {desc[case]}\n")
    lines.append("| tool | throughput | Gbit/s per sending CPU-second | sender's CPU in user space |")
    lines.append("|---|---|---|---|")
    for tool in ("plumb", "iperf3"):
        thr, eff, user = rows[(tool, case)]
        lines.append(f"| {tool} | {fmt(thr, 'Gbit/s')} | {fmt(eff, '')} | {fmt(user, '%', 1) if user else 'n/a'} |")
    pe = rows[("plumb", case)][1]; ie = rows[("iperf3", case)][1]
    pt = rows[("plumb", case)][0]; it = rows[("iperf3", case)][0]
    if pe and ie:
        lines.append(f"\nRatio plumb/iperf3 of the medians: throughput {med(pt)[0]/med(it)[0]:.2f}, "
                     f"per sending CPU-second {med(pe)[0]/med(ie)[0]:.2f}.\n")
    lines.append("Commands:\n")
    for tool in ("plumb", "iperf3"):
        lines.append(f"    {cmds[(tool, case)]}")
    lines.append("")
section = "\n".join(lines) + "\n"

text = open(out).read() if os.path.exists(out) else "# Benchmarks\n\nEach section is written by the script it names; rerun it to refresh.\n\n"
pat = re.compile(r"## stream: plumb vs iperf3 on loopback\n.*?(?=\n## |\Z)", re.S)
text = pat.sub(lambda m: section.rstrip() + "\n", text) if pat.search(text) else text.rstrip() + "\n\n" + section
open(out, "w").write(text)
print(section)
PY
