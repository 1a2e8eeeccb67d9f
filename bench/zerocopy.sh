#!/usr/bin/env bash
# CPU cost of the zero-copy send modes: plumb run stream --zerocopy
# none|msg|sendfile|splice with 64K and 1M messages, on loopback and on a
# veth pair between two namespaces this script creates (198.18.0.1 and
# .2/30, removed on exit), against iperf3 -Z (sendfile) on the same paths.
# Writes the "zerocopy" section of BENCHMARKS.md.
#
#   bench/zerocopy.sh [REPS] [SECONDS]      (defaults: 5 repetitions, 5 s)
#
# Every repetition runs every case once, in reverse order on even
# repetitions, so that drift hits all cases alike. Reported per case:
# CPU seconds per GB (10^9 bytes received) of the sending and of the
# receiving process, and throughput; medians with min-max. For msg also the
# share of completions the kernel flagged as copied. Needs root (namespaces).
. "$(dirname "$0")/lib.sh"
REPS=${1:-5}
SECS=${2:-5}

if [[ $(id -u) != 0 ]]; then
  echo "bench/zerocopy.sh: needs root to create the veth namespaces" >&2
  exit 1
fi
bench_need iperf3
cargo build --release -q
PLUMB=$PWD/target/release/plumb
work=$(mktemp -d)
NSA=plumb-bza-$$
NSB=plumb-bzb-$$
cleanup() {
  ip netns del "$NSA" 2>/dev/null || true
  ip netns del "$NSB" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

ip netns add "$NSA"
ip netns add "$NSB"
ip link add plumb-bza0 netns "$NSA" type veth peer name plumb-bzb0 netns "$NSB"
ip -n "$NSA" addr add 198.18.0.1/30 dev plumb-bza0
ip -n "$NSB" addr add 198.18.0.2/30 dev plumb-bzb0
for ns in "$NSA" "$NSB"; do
  ip -n "$ns" link set lo up
done
ip -n "$NSA" link set plumb-bza0 up
ip -n "$NSB" link set plumb-bzb0 up

port=$((20000 + RANDOM % 20000))

plumb_case() { # path size mode
  local path=$1 size=$2 mode=$3 f="$work/plumb-$1-$2-$3-$rep.json"
  local args=(run stream --json --iterations 1 --no-store --duration "${SECS}s" --warmup 1s
              --msg-size "$size" --zerocopy "$mode")
  if [[ $path == lo ]]; then
    "$PLUMB" "${args[@]}" >"$f" || true
  else
    # One `serve --once` per run, in the far namespace.
    ip netns exec "$NSB" "$PLUMB" serve --once --listen 198.18.0.2:$port >/dev/null 2>&1 &
    local spid=$!
    sleep 0.3
    ip netns exec "$NSA" "$PLUMB" "${args[@]}" --server 198.18.0.2:$port >"$f" || true
    wait "$spid" 2>/dev/null || true
  fi
}

iperf3_case() { # path size
  local path=$1 size=$2 f="$work/iperf3-$1-$2-$rep.json"
  if [[ $path == lo ]]; then
    iperf3 -s -1 -p "$port" -B 127.0.0.1 >/dev/null 2>&1 &
    local spid=$!
    sleep 0.3
    iperf3 -c 127.0.0.1 -p "$port" -t "$SECS" -Z -l "$size" -J >"$f" || true
  else
    ip netns exec "$NSB" iperf3 -s -1 -p "$port" -B 198.18.0.2 >/dev/null 2>&1 &
    local spid=$!
    sleep 0.3
    ip netns exec "$NSA" iperf3 -c 198.18.0.2 -p "$port" -t "$SECS" -Z -l "$size" -J >"$f" || true
  fi
  wait "$spid" 2>/dev/null || true
}

cases=()
for path in lo veth; do
  for size in 64K 1M; do
    for mode in none msg sendfile splice iperf3; do
      cases+=("$path $size $mode")
    done
  done
done

for rep in $(seq 1 "$REPS"); do
  echo "repetition $rep/$REPS" >&2
  order=("${cases[@]}")
  if (( rep % 2 == 0 )); then
    order=()
    for (( i=${#cases[@]}-1; i>=0; i-- )); do order+=("${cases[$i]}"); done
  fi
  for c in "${order[@]}"; do
    read -r path size mode <<<"$c"
    if [[ $mode == iperf3 ]]; then
      iperf3_case "$path" "$size"
    else
      plumb_case "$path" "$size" "$mode"
    fi
  done
done

python3 - "$work" "$REPS" "$SECS" "$("$PLUMB" --version)" "$(iperf3 --version | head -1)" <<'PY'
import glob, json, os, platform, re, statistics, sys, datetime
sys.path.insert(0, "bench")
from ratio import ratio_interval, called
work, reps, secs, plumb_v, iperf_v = sys.argv[1:]

def med(xs):
    xs = sorted(xs)
    return statistics.median(xs), xs[0], xs[-1]

def fmt(xs, digits=3):
    if not xs:
        return "n/a"
    m, lo, hi = med(xs)
    return f"{m:.{digits}f} ({lo:.{digits}f}-{hi:.{digits}f})"

rows = {}
failed = {}
# The sender's CPU per GB by repetition, so that each mode is set against
# plain writes of the same repetition.
by_rep = {}

def rep_of(path):
    return int(re.search(r"-(\d+)\.json$", path).group(1))
for path in ("lo", "veth"):
    for size in ("64K", "1M"):
        for mode in ("none", "msg", "sendfile", "splice"):
            snd, rcv, thr, cop = [], [], [], []
            files = sorted(glob.glob(f"{work}/plumb-{path}-{size}-{mode}-*.json"))
            for f in files:
                try:
                    it = json.load(open(f))["iterations"][0]
                except Exception:
                    failed[(path, size, mode)] = failed.get((path, size, mode), 0) + 1
                    continue
                d = it["derived"]
                snd.append(d["client_cpu_s_per_gb"])
                by_rep.setdefault((path, size, mode), {})[rep_of(f)] = d["client_cpu_s_per_gb"]
                rcv.append(d["server_cpu_s_per_gb"])
                thr.append(d["throughput_bps"] / 1e9)
                z = it["client"].get("zerocopy")
                if z and z["completions"]:
                    cop.append(100.0 * z["copied"] / z["completions"])
            rows[(path, size, mode)] = (snd, rcv, thr, cop)
        snd, rcv, thr = [], [], []
        for f in sorted(glob.glob(f"{work}/iperf3-{path}-{size}-*.json")):
            try:
                end = json.load(open(f))["end"]
                gb = end["sum_received"]["bytes"] / 1e9
                secs_ = end["sum_received"]["seconds"]
                cpu = end["cpu_utilization_percent"]
            except Exception:
                failed[(path, size, "iperf3")] = failed.get((path, size, "iperf3"), 0) + 1
                continue
            snd.append(cpu["host_total"] / 100 * secs_ / gb)
            by_rep.setdefault((path, size, "iperf3"), {})[rep_of(f)] = snd[-1]
            rcv.append(cpu["remote_total"] / 100 * secs_ / gb)
            thr.append(end["sum_received"]["bits_per_second"] / 1e9)
        rows[(path, size, "iperf3")] = (snd, rcv, thr, [])

cpu_model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
today = datetime.date.today().isoformat()
L = []
L.append("## zerocopy: CPU per GB of the send modes, loopback and veth\n")
L.append(f"Run by `bench/zerocopy.sh {reps} {secs}` on {today}: {os.cpu_count()} CPUs ({cpu_model}), "
         f"kernel {platform.release()}, {plumb_v}, {iperf_v}. One flow, client sends, "
         f"{secs} s window after 1 s warm-up, {reps} repetitions of every case, all cases once per "
         "repetition in alternating order. CPU s/GB is the user+system time of the sending "
         "(client) and receiving (server) process per 10^9 bytes received; plumb from its own "
         "accounting, iperf3 -Z from its `cpu_utilization_percent` (host_total, remote_total) "
         "times the test length. Medians with min-max in brackets. veth: two namespaces joined "
         "by a veth pair, 198.18.0.1 to 198.18.0.2, MTU 1500. The machine is shared with other "
         "builds, so spreads are wide.\n")
L.append("On loopback and veth the kernel copies the data of every MSG_ZEROCOPY send when it is delivered (the last column), so msg here measures only its overhead (pinning pages, reading completions) on top of that copy; a gain needs a NIC. sendfile and splice hand page-cache pages of the message file to the socket without a copy on the sending side; the receiver still copies into user space.\n")
names = {"none": "plumb write", "msg": "plumb MSG_ZEROCOPY", "sendfile": "plumb sendfile",
         "splice": "plumb splice", "iperf3": "iperf3 -Z (sendfile)"}
for path in ("lo", "veth"):
    for size in ("64K", "1M"):
        L.append(f"### {'loopback' if path == 'lo' else 'veth'}, {size} messages\n")
        L.append("| mode | sender CPU s/GB | receiver CPU s/GB | throughput Gbit/s | completions copied |")
        L.append("|---|---|---|---|---|")
        for mode in ("none", "msg", "sendfile", "splice", "iperf3"):
            snd, rcv, thr, cop = rows[(path, size, mode)]
            n = failed.get((path, size, mode), 0)
            note = f" ({n} failed)" if n else ""
            L.append(f"| {names[mode]}{note} | {fmt(snd)} | {fmt(rcv)} | {fmt(thr, 2)} | "
                     f"{fmt(cop, 1) + ' %' if cop else '-'} |")
        base = by_rep.get((path, size, "none"), {})
        if base:
            parts = []
            for mode in ("msg", "sendfile", "splice", "iperf3"):
                other = by_rep.get((path, size, mode), {})
                iv = ratio_interval([(base[r], other[r]) for r in sorted(base) if r in other])
                if iv:
                    parts.append(f"{names[mode]} {iv[0]:.2f} [{iv[1]:.2f}, {iv[2]:.2f}] "
                                 f"{called(iv, 'more', 'less')}")
            L.append("\nSender CPU per GB relative to plain writes of the same repetition (geometric mean "
                     "of the ratios, 95 % Student-t interval; more or less only where it leaves 1 out): "
                     + ", ".join(parts) + ".\n")
L.append("Commands (veth: the client in one namespace, `plumb serve --once` / `iperf3 -s -1` in the other):\n")
L.append(f"    plumb run stream --json --iterations 1 --no-store --duration {secs}s --warmup 1s --msg-size SIZE --zerocopy MODE [--server 198.18.0.2:PORT]")
L.append(f"    iperf3 -c ADDR -t {secs} -Z -l SIZE -J")
L.append("")
open(f"{work}/section.md", "w").write("\n".join(L) + "\n")
PY
write_section "$OUT" '## zerocopy: CPU per GB of the send modes, loopback and veth\n' "$work/section.md"
