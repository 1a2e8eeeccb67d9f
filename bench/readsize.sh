#!/usr/bin/env bash
# What the read size does to a stream: plumb run stream with --read-size
# 128K (whole messages, the default), 32K and 8K, on both engines, with 1
# and 4 flows of 128K messages over loopback; and at 128K and 32K with
# --rcvlowat the read size, so that a receiver is woken once a read's
# worth is queued. Writes the "readsize" section of BENCHMARKS.md.
#
#   bench/readsize.sh [REPS] [SECONDS]      (defaults: 6 repetitions, 4 s)
#
# Each repetition runs every case once, starting one case further each
# time (bench_rotate). Per case: the rate and the host's busy CPU seconds
# per GB, from plumb's records (the kernel's byte counts and /proc/stat);
# medians with min-max, and each read size against whole messages on the
# same engine and flows as a ratio with its 95 % interval over the
# repetitions, called only where the interval leaves 1 out.
. "$(dirname "$0")/lib.sh"
REPS=${1:-6}
SECS=${2:-4}
bench_local

# NAME FLAGS...: the name is engine-flows-readsize.
CASES=()
for io in epoll uring; do
  for flows in 1 4; do
    for rs in 128K 32K 8K; do
      CASES+=("$io-$flows-$rs --io $io --flows $flows --read-size $rs")
    done
    for rs in 128K 32K; do
      CASES+=("$io-$flows-$rs-lw --io $io --flows $flows --read-size $rs --rcvlowat $rs")
    done
  done
done

run() { bench_record "$1" stream --msg-size 128K "${@:2}"; }
bench_rotate "$REPS" "${CASES[@]}"

section=$work/section.md
python3 - "$work" "$REPS" "$SECS" "$("$PLUMB" --version)" >"$section" <<'PY'
import sys
sys.path.insert(0, "bench")
from ratio import ratio_interval, shown, spread
from record import iteration, machine
work, reps, secs, version = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]

def figures(name, rep):
    it = iteration(work, name, rep)
    if it is None:
        return None
    d = it["derived"]
    return d["throughput_bps"] / 1e9, d["host_cpu_s_per_gb"]

out = ["## readsize: what the read size does to a stream", ""]
out.append(f"Run by `bench/readsize.sh {reps} {secs}` with `{version}` on {machine()}: `plumb run stream --msg-size 128K --io IO "
           f"--flows N --read-size SIZE [--rcvlowat SIZE]`, {reps} repetitions of {secs} s after 1 s of warm-up, "
           "the cases rotating so that none always follows the same one, both ends on the "
           "same threads. Medians with min-max; against 128K is the geometric mean of the "
           "ratios of each repetition's case to the same repetition's 128K case of that engine "
           "and flow count, with its 95 % Student-t interval; per CPU is the inverse ratio of "
           "the host's busy CPU seconds per GB (above 1: cheaper).")
out.append("")
out.append("| io | flows | read size | rcvlowat | Gbit/s | host CPU-s/GB | rate against 128K | per CPU against 128K |")
out.append("|---|---:|---:|---:|---|---|---|---|")
for io in ("epoll", "uring"):
    for flows in (1, 4):
        base = {r: figures(f"{io}-{flows}-128K", r) for r in range(1, reps + 1)}
        for rs, lw in (("128K", ""), ("32K", ""), ("8K", ""), ("128K", "-lw"), ("32K", "-lw")):
            got = {r: figures(f"{io}-{flows}-{rs}{lw}", r) for r in range(1, reps + 1)}
            ok = [r for r in got if got[r] and base[r]]
            lowat = rs if lw else "-"
            if not ok:
                out.append(f"| {io} | {flows} | {rs} | {lowat} | failed | failed | - | - |")
                continue
            rate = [got[r][0] for r in ok]
            cpu = [got[r][1] for r in ok]
            if rs == "128K" and not lw:
                vs_rate = vs_cpu = "-"
            else:
                ri = ratio_interval([(base[r][0], got[r][0]) for r in ok])
                ci = ratio_interval([(got[r][1], base[r][1]) for r in ok])
                vs_rate = shown(ri, "faster", "slower")
                vs_cpu = shown(ci, "cheaper", "dearer")
            out.append(f"| {io} | {flows} | {rs} | {lowat} | {spread(rate, '{:.1f}')} | {spread(cpu, '{:.3f}')} "
                       f"| {vs_rate} | {vs_cpu} |")
out.append("")
print("\n".join(out))
PY
write_section "$OUT" "## readsize: " "$section"
