#!/usr/bin/env bash
# What the congestion control does to a lone stream on each engine: plumb
# run stream, 1 flow of 128K messages over loopback, with --cc bbr and
# --cc cubic, on epoll and io_uring. BBR paces (with no fq qdisc on lo,
# TCP's own pacing timer does it) and cubic does not; the table gives, from
# plumb's records, the rate, the host's busy CPU per GB and the host's timer
# interrupts and function-call IPIs per GB (the record's `interrupts`, x86's
# names). Writes the "cc" section of BENCHMARKS.md.
#
#   bench/cc.sh [REPS] [SECONDS]      (defaults: 6 repetitions, 4 s)
#
# HEADING names the section (default "cc"), so that a rerun on another
# day can stand beside the first rather than replace it.
#
# Each repetition runs every case once, starting one case further each
# time (bench_rotate). io_uring against epoll, under each congestion
# control, is the geometric mean of the repetitions' ratios with its 95 %
# interval, called only where the interval leaves 1 out. --cc sets the
# flows' sockets only; the host's default is left alone. bbr is a module:
# root loads it on first use (tests/setup.sh does too).
. "$(dirname "$0")/lib.sh"
REPS=${1:-6}
SECS=${2:-4}
HEADING=${HEADING:-cc}
bench_local

CASES=()
for io in epoll uring; do
  for cc in bbr cubic; do
    CASES+=("$io-$cc --io $io --cc $cc")
  done
done

run() { bench_record "$1" stream --msg-size 128K "${@:2}"; }
bench_rotate "$REPS" "${CASES[@]}"

section=$work/section.md
python3 - "$work" "$REPS" "$SECS" "$("$PLUMB" --version)" \
  "$(cat /proc/sys/net/ipv4/tcp_congestion_control)" "$HEADING" >"$section" <<'PY'
import statistics, sys
sys.path.insert(0, "bench")
from ratio import ratio_interval, shown, spread
from record import iteration, machine
work, reps, secs, version, default_cc, heading = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]

def figures(name, rep):
    """(Gbit/s, host busy CPU-s per GB, timer interrupts per GB, IPIs per GB)."""
    it = iteration(work, name, rep)
    if it is None:
        return None
    d, c = it["derived"], it["client"]
    gb = c["bytes_received"] if c["bytes_received"] else it["server"]["bytes_received"]
    gb /= 1e9
    irq = c.get("interrupts", {})
    return (d["throughput_bps"] / 1e9, d["host_cpu_s_per_gb"],
            irq.get("LOC", 0) / gb, irq.get("CAL", 0) / gb)

out = [f"## {heading}: a lone stream under bbr and cubic, on each engine", ""]
out.append(f"Run by `bench/cc.sh {reps} {secs}` with `{version}` on {machine()}, host default `{default_cc}`: "
           f"`plumb run stream --msg-size 128K --io IO --cc CC`, {reps} repetitions of {secs} s "
           "after 1 s of warm-up, the cases rotating. Medians with min-max. Timer interrupts "
           "and function-call IPIs are the host's (`interrupts` in the record: LOC and CAL of "
           "/proc/interrupts over the window) per GB received. io_uring against epoll is the "
           "geometric mean of each repetition's ratio, with its 95 % Student-t interval; per "
           "CPU is the inverse ratio of the busy CPU per GB (above 1: cheaper).")
out.append("")
out.append("| cc | io | Gbit/s | host CPU-s/GB | timer interrupts/GB | function-call IPIs/GB | rate, uring/epoll | per CPU, uring/epoll |")
out.append("|---|---|---|---|---:|---:|---|---|")
for cc in ("bbr", "cubic"):
    base = {r: figures(f"epoll-{cc}", r) for r in range(1, reps + 1)}
    for io in ("epoll", "uring"):
        got = {r: figures(f"{io}-{cc}", r) for r in range(1, reps + 1)}
        ok = [r for r in got if got[r]]
        if not ok:
            out.append(f"| {cc} | {io} | failed | failed | - | - | - | - |")
            continue
        col = lambda k: [got[r][k] for r in ok]
        vs_rate = vs_cpu = "-"
        if io == "uring":
            both = [r for r in ok if base[r]]
            vs_rate = shown(ratio_interval([(base[r][0], got[r][0]) for r in both]), "faster", "slower")
            vs_cpu = shown(ratio_interval([(got[r][1], base[r][1]) for r in both]), "cheaper", "dearer")
        out.append(f"| {cc} | {io} | {spread(col(0), '{:.1f}')} | {spread(col(1), '{:.3f}')} "
                   f"| {statistics.median(col(2)):.0f} | {statistics.median(col(3)):.0f} | {vs_rate} | {vs_cpu} |")
out.append("")
print("\n".join(out))
PY
write_section "$OUT" "## $HEADING: " "$section"
