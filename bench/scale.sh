#!/usr/bin/env bash
# plumb and neper at scale: rr and crr with thousands of concurrent flows from
# two worker threads on each end, 1-byte requests and responses, crr closing
# every connection with FIN on both tools (plumb --close fin, neper
# --time-wait). Writes the "scale" section of BENCHMARKS.md. neper comes from
# ../shared/peers/build.sh (or PEERS=DIR holding its binaries); netperf opens
# one connection per process and has no part here.
#
#   bench/scale.sh [REPS] [SECONDS] [FLOWS...]   (defaults: 5, 10, 1000 10000 30000)
#
# PLUMB=path/to/plumb uses a binary built elsewhere (the script then builds
# nothing, so it runs on a machine without a toolchain); OUT=FILE writes the
# section to another file than BENCHMARKS.md.
#
# Every flow holds a descriptor on each end: plumb raises its soft
# RLIMIT_NOFILE to the hard one, and flows beyond what one process may then
# open run as a flow group, several client processes each with its own
# embedded server, started together and added up (a run plumb refuses is
# recorded as "not run: <its error>"). Flows beyond a share of one source
# address's local port range spread over 127.0.0.x sources.
# Reported per workload and flow count: transactions/s, p99 round trip,
# client CPU per transaction, and the resident set of each process at the
# end of the window; medians with min-max over the repetitions, the workloads
# and flow counts alternating within each repetition. plumb against neper:
# plumb/neper for transactions/s, client CPU per transaction and client RSS,
# the geometric mean of the paired repetitions' ratios with its 95 %
# Student-t interval (bench/ratio.py), a difference called only where the
# interval leaves 1 out: the two tools' runs of one repetition follow each
# other closely, so drift between repetitions hits both sides of a pair
# alike and does not pass for a difference.
. "$(dirname "$0")/lib.sh"
REPS=${1:-5}
SECS=${2:-10}
shift $(( $# > 2 ? 2 : $# ))
FLOWS=("$@")
(( ${#FLOWS[@]} )) || FLOWS=(1000 10000 30000)

bench_setup
# neper keeps every flow's descriptor in one process on each end.
ulimit -n "$(ulimit -Hn)"
port=$((20000 + RANDOM % 10000))

one() { # workload flows
  local w=$1 f=$2 rc=0 base="$work/$1-$2-$rep" close=()
  [[ $w == crr ]] && close=(--close fin)
  "$PLUMB" run "$w" --json --iterations 1 --no-store --duration "${SECS}s" --warmup 1s --flows "$f" --threads 2 \
    "${close[@]}" >"$base.json" 2>"$base.stderr" || rc=$?
  if (( rc )); then
    rm -f "$base.json"
    { grep -m1 '^plumb: error:' "$base.stderr" || tail -n1 "$base.stderr"; } >"$base.err" || true
    [[ -s $base.err ]] || echo "exit status $rc" >"$base.err"
    echo "plumb run $w --flows $f: exit status $rc, recorded as not run" >&2
  fi
}

neper() { # workload flows
  local w=$1 f=$2 base="$work/neper-$1-$2-$rep" tw=()
  [[ $w == crr ]] && tw=(--time-wait)
  port=$((port + 2))
  timeout $((SECS + 60)) "$PEERS/tcp_$w" -C "$port" -P $((port + 1)) -l $((SECS + 30)) --nolog -F "$f" -T 2 \
    "${tw[@]}" >/dev/null 2>&1 &
  srv=$!
  sleep 0.5
  timeout $((SECS + 60)) "$PEERS/tcp_$w" -c -H 127.0.0.1 -C "$port" -P $((port + 1)) -l "$SECS" --nolog \
    -F "$f" -T 2 -p 99 "${tw[@]}" >"$base.txt" 2>&1 || echo "neper tcp_$w -F $f: exit status $?" >&2
  stop_srv
}

for rep in $(seq 1 "$REPS"); do
  echo "repetition $rep/$REPS" >&2
  for f in "${FLOWS[@]}"; do
    if (( rep % 2 )); then
      one rr "$f"; neper rr "$f"; one crr "$f"; neper crr "$f"
    else
      neper crr "$f"; one crr "$f"; neper rr "$f"; one rr "$f"
    fi
  done
done

python3 - "$work" "$REPS" "$SECS" "$("$PLUMB" --version)" "${FLOWS[@]}" <<'PY'
import datetime, glob, json, os, platform, resource, statistics, sys
sys.path.insert(0, "bench")
from ratio import ratio_interval, called
work, reps, secs, plumb_v, *flows = sys.argv[1:]

def add(into, path, **vals):
    """One run's figures into a tool's lists, and under its repetition (the
    file name's last field), so that a ratio pairs the two tools' runs of one
    repetition even where a run of another repetition was left out."""
    rep = int(os.path.splitext(path)[0].rsplit("-", 1)[1])
    for k, v in vals.items():
        into[k].append(v)
        into["at"].setdefault(k, {})[rep] = v

def fmt(xs, digits=1):
    if not xs:
        return "n/a"
    xs = sorted(xs)
    return f"{statistics.median(xs):.{digits}f} ({xs[0]:.{digits}f}-{xs[-1]:.{digits}f})"

rows = []
for f in flows:
    for w in ("rr", "crr"):
        r = {"tps": [], "p99": [], "cpu": [], "crss": [], "srss": [], "err": [], "at": {}}
        for p in sorted(glob.glob(f"{work}/{w}-{f}-*.json")):
            it = json.load(open(p))["iterations"][0]
            add(r, p, tps=it["derived"]["tps"], p99=it["client"]["latency"]["p99_us"],
                cpu=1e6 * it["derived"]["client_cpu_s_per_tx"],
                crss=it["client"]["process"]["rss_bytes"] / 2**20,
                srss=it["server"]["process"]["rss_bytes"] / 2**20)
        for p in sorted(glob.glob(f"{work}/{w}-{f}-*.err")):
            r["err"].append(open(p).read().strip().replace("|", "\\|"))
        rows.append((w, f, "plumb", r))
        n = {"tps": [], "p99": [], "cpu": [], "crss": [], "srss": [], "err": [], "at": {}}
        for p in sorted(glob.glob(f"{work}/neper-{w}-{f}-*.txt")):
            kv = dict(l.split("=", 1) for l in open(p, errors="replace").read().splitlines() if "=" in l)
            try:
                tx = float(kv["num_transactions"])
                cpu = sum(float(kv[k + "_end"]) - float(kv[k + "_start"]) for k in ("utime", "stime"))
                if tx <= 0:
                    raise ValueError
                add(n, p, tps=tx / float(kv["total_run_time"]), p99=1e6 * float(kv["latency_p99"]),
                    cpu=1e6 * cpu / tx, crss=float(kv["maxrss_end"]) / 1024)
            except (KeyError, ValueError):
                n["err"].append("no transactions or unreadable output")
        rows.append((w, f, "neper", n))

cpu_model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
_aff = len(os.sched_getaffinity(0))
cpu_desc = f"{_aff} CPUs" if _aff == os.cpu_count() else f"{_aff} of {os.cpu_count()} CPUs (the run confined to {_aff} with taskset)"
nofile = resource.getrlimit(resource.RLIMIT_NOFILE)
lines = ["## scale: rr and crr with thousands of flows, plumb and neper\n"]
lines.append(f"Run by `bench/scale.sh {reps} {secs} {' '.join(flows)}` on {datetime.date.today().isoformat()}: "
             f"{cpu_desc} ({cpu_model}), kernel {platform.release()}, RLIMIT_NOFILE soft {nofile[0]} "
             f"hard {nofile[1]}, {plumb_v}, neper 1.1.0. {reps} repetitions of {secs} s per workload and flow count, 2 worker "
             "threads on each end, 1-byte request and response. Each tool: medians with min-max in brackets. "
             "plumb against neper (the second table): the geometric mean of the paired repetitions' ratios "
             "plumb/neper (plumb's run of a repetition against neper's run of the same workload and flow count in "
             "that repetition) with its 95 % Student-t interval in brackets; a difference is called only where the "
             "interval leaves 1 out. For transactions/s a ratio above 1 means plumb did more; for client CPU per "
             "transaction lower is better, so a ratio below 1 means plumb spent less; for client RSS a ratio below "
             "1 means plumb's client held less memory.\n")
lines.append("| workload | flows | tool | transactions/s | p99 round trip (µs) | client CPU per transaction (µs) | client RSS (MiB) | server RSS (MiB) |")
lines.append("|---|---|---|---|---|---|---|---|")
notes = []
by = {(w, f, t): r for w, f, t, r in rows}
for w, f, t, r in rows:
    if r["tps"]:
        lines.append(f"| {w} | {f} | {t} | {fmt(r['tps'], 0)} | {fmt(r['p99'])} | {fmt(r['cpu'], 2)} | "
                     f"{fmt(r['crss'])} | {fmt(r['srss'])} |")
        if r["err"]:
            notes.append(f"{t} {w} {f} flows: {len(r['err'])} of {reps} runs not run: {'; '.join(sorted(set(r['err'])))}")
    else:
        why = "; ".join(sorted(set(r["err"]))) or "no result"
        lines.append(f"| {w} | {f} | {t} | not run: {why} | | | | |")
if notes:
    lines.append("\n" + "\n".join(f"- {n}" for n in notes))

# (key, heading, words for a ratio above 1 and below 1)
METRICS = (("tps", "transactions/s", "better", "worse"),
           ("cpu", "client CPU per transaction (lower is better)", "worse", "better"),
           ("crss", "client RSS", "more memory", "less memory"))
lines.append("\nplumb against neper, the only peer with many flows per process:\n")
lines.append("| workload | flows | " + " | ".join(f"{h}, plumb/neper [95 %] | called" for _, h, _, _ in METRICS) + " |")
lines.append("|---" * (2 + 2 * len(METRICS)) + "|")
for f in flows:
    for w in ("rr", "crr"):
        mine, theirs = by[(w, f, "plumb")]["at"], by[(w, f, "neper")]["at"]
        cells = []
        for k, _, above, below in METRICS:
            a, b = theirs.get(k, {}), mine.get(k, {})
            iv = ratio_interval([(a[r], b[r]) for r in sorted(b) if r in a])
            if not a or not b:
                # A tool that could not run is not a lack of repetitions.
                cells += ["n/a", f"{'neper' if not a else 'plumb'} did not run"]
                continue
            cells += [f"{iv[0]:.3f} [{iv[1]:.3f}, {iv[2]:.3f}]" if iv else "n/a", called(iv, above, below)]
        lines.append(f"| {w} | {f} | " + " | ".join(cells) + " |")
lines.append("\nClient CPU per transaction is the client process's user+system time over the window divided by "
             "its transactions (`derived.client_cpu_s_per_tx`); RSS is each process's resident set at the end "
             "of the window (`client.process.rss_bytes`, `server.process.rss_bytes`). In crr every transaction "
             "is a new connection, closed with FIN by both tools (neper with --time-wait; its default, like plumb's, "
             "is a reset). neper's figures: transactions over its run time, its p99, its client process's "
             "user+system time per transaction, and its client's peak RSS (it reports no server RSS; the RSS ratio "
             "sets it against plumb's client RSS at the end of the window). Where the flows need more descriptors "
             "than RLIMIT_NOFILE lets one process open, plumb runs them as a flow group of several client processes, "
             "each with its own embedded server; CPU and RSS are then the sums over the group's processes.\n")
lines.append("Commands (WORKLOAD rr or crr, FLOWS as in the table; crr adds `--close fin` to plumb and "
             "`--time-wait` to both neper processes):\n")
lines.append(f"    plumb run WORKLOAD --json --iterations 1 --no-store --duration {secs}s --warmup 1s --flows FLOWS --threads 2")
lines.append(f"    tcp_WORKLOAD -C PORT -P PORT2 -l {int(secs) + 30} --nolog -F FLOWS -T 2")
lines.append(f"    tcp_WORKLOAD -c -H 127.0.0.1 -C PORT -P PORT2 -l {secs} --nolog -F FLOWS -T 2 -p 99")
open(f"{work}/section.md", "w").write("\n".join(lines) + "\n")
PY
write_section "$OUT" '## scale: rr and crr with thousands of flows[^\n]*\n' "$work/section.md"
