#!/usr/bin/env bash
# The benchmark of record: plumb against netperf, neper, iperf3, sockperf
# and qperf on every case (stream with 1 and 32 flows, rr with 1, 1000 and
# 10000 flows, crr closed by either end, udp-stream, udp-rr) in one
# alternating run, the same flows and threads for every tool, rate and cost
# measured for all from the kernel's counters and /proc/stat (and each
# tool's own report beside them). Writes the "peers" section of BENCHMARKS.md: per case, plumb's
# ratio to the best peer in rate and per busy CPU-second with its interval
# over the repetitions. bench/peers.py says how each figure is taken.
#
#   bench/peers.sh [REPS] [SECONDS] [CASE...]   (defaults: 5, 5, every case)
#
# PLUMB=path/to/plumb uses a binary built elsewhere; PEERS=DIR a directory
# holding netperf, netserver and neper's binaries (default: what
# ../shared/peers/build.sh builds); OUT=FILE another file than
# BENCHMARKS.md; RAW=FILE (a new file) keeps every run's figures (JSON
# lines) there, and RENDER_ONLY=1 with RAW=FILE writes the section again
# from them; HEADING="peers on 16 CPUs" writes another machine's section
# under its own heading, beside the one of record; TCP_CC=cubic runs every tool
# under that congestion control, by setting the host's default
# (net.ipv4.tcp_congestion_control, which every tool's sockets take: qperf
# has no option for it) for the run and putting it back on exit; IO=auto
# runs plumb once per case without `--io`, on the engine a user gets by
# default (the section names the engine its records say ran). Its many
# repetitions are no test: CI does not run it.
. "$(dirname "$0")/lib.sh"
REPS=${1:-5}
SECS=${2:-5}
shift $(( $# > 2 ? 2 : $# ))

bench_need iperf3 sockperf qperf
bench_setup
if [[ -n ${TCP_CC:-} ]]; then
  cc_was=$(sysctl -n net.ipv4.tcp_congestion_control)
  # A run killed outright cannot put it back: this says how.
  echo "net.ipv4.tcp_congestion_control $cc_was -> $TCP_CC for the run (to undo by hand: sysctl -w net.ipv4.tcp_congestion_control=$cc_was)"
  trap 'sysctl -qw net.ipv4.tcp_congestion_control="$cc_was"; bench_cleanup' EXIT
  sysctl -qw net.ipv4.tcp_congestion_control="$TCP_CC"
fi
HEADING=${HEADING:-peers}
REPS=$REPS SECS=$SECS PLUMB=$PLUMB PEERS=$PEERS WORK=$work HEADING=$HEADING TCP_CC=${TCP_CC:-} python3 bench/peers.py "$@"
write_section "$OUT" "## $HEADING: [^\\n]*\\n" "$work/section.md"
