#!/usr/bin/env bash
# plumb's latency under load (`plumb run load`) beside flent's RRUL on one
# bottleneck of this script's own: client, router and server namespaces,
# the router's egress each way an HTB shaper at 20 Mbit/s over a 200 KiB
# pfifo, as plumb builds it for --topology veth --qdisc pfifo --link-rate
# 20M --queue 200K, so that both tools' probes wait in the same queue.
# Writes the "rrul" section of BENCHMARKS.md. Needs root (namespaces, tc).
#
#   bench/rrul.sh                 (REPS=5 repetitions unless set)
#
# Each repetition runs flent's rrul (-l 30) and then one `plumb run load`
# (5 s phases), both from the client namespace against servers in the
# server namespace, under cubic at both ends. PLUMB=path/to/plumb uses a
# binary built elsewhere, PEERS=DIR netperf's (the demo build is DIR/../demo,
# which flent needs), DATA=DIR keeps flent's data files and plumb's records
# there (default: a new directory under /tmp, printed at the end), and
# RENDER_ONLY=1 with DATA=DIR writes the section again from them.
. "$(dirname "$0")/lib.sh"
REPS=${REPS:-5}
LENGTH=30
PHASE=5
RATE_BPS=20000000
# The FIFO of plumb's --queue 200K, counted as plumb counts it: in packets
# of the MTU.
LIMIT=$((200 * 1024 / 1500))
client=198.18.0.1 server=198.18.0.2

# The measurement: the path, its servers, the repetitions.
measure() {
  bench_need flent irtt ethtool ping=iputils-ping
  bench_setup
  DATA=${DATA:-$(mktemp -d /tmp/rrul-data.XXXXXX)}
  mkdir -p "$DATA"
  demo=$(dirname "$PEERS")/demo

  ns=rrul-$$
  c=$ns-client r=$ns-router s=$ns-server
  pids=()
  cleanup() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    # What those servers forked (netserver's tests), and what a flent or
    # plumb cut short left behind: only ever processes in this run's
    # namespaces.
    for n in "$c" "$r" "$s"; do
      for p in $(ip netns pids "$n" 2>/dev/null); do kill "$p" 2>/dev/null || true; done
    done
    sleep 0.5
    for n in "$c" "$r" "$s"; do ip netns del "$n" 2>/dev/null || true; done
    bench_cleanup
  }
  trap cleanup EXIT
  trap 'exit 130' INT TERM

  at() { local n=$1; shift; ip netns exec "$n" "$@"; }

  for n in "$c" "$r" "$s"; do
    ip netns add "$n"
    # No IPv6 at all, link-local included: every address is 198.18.0.0/15.
    at "$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    ip -n "$n" link set lo up
  done
  at "$r" sysctl -qw net.ipv4.ip_forward=1
  for n in "$c" "$s"; do at "$n" sysctl -qw net.ipv4.tcp_congestion_control=cubic; done
  ip link add rrul-c netns "$c" type veth peer name rrul-rc netns "$r"
  ip link add rrul-s netns "$s" type veth peer name rrul-rs netns "$r"
  # As plumb: each end's own address, and a /30 to the router.
  ip -n "$c" addr add $client/32 dev rrul-c
  ip -n "$c" addr add 198.18.1.1/30 dev rrul-c
  ip -n "$s" addr add $server/32 dev rrul-s
  ip -n "$s" addr add 198.18.1.6/30 dev rrul-s
  ip -n "$r" addr add 198.18.1.2/30 dev rrul-rc
  ip -n "$r" addr add 198.18.1.5/30 dev rrul-rs
  while read -r n dev; do
    # Whole segments would pass the packet-counted FIFO as one packet.
    at "$n" ethtool -K "$dev" tso off gso off gro off
    ip -n "$n" link set "$dev" up
  done <<<"$c rrul-c
  $s rrul-s
  $r rrul-rc
  $r rrul-rs"
  ip -n "$r" route add $server/32 via 198.18.1.6
  ip -n "$r" route add $client/32 via 198.18.1.1
  ip -n "$c" route add $server/32 via 198.18.1.2 src $client
  ip -n "$s" route add $client/32 via 198.18.1.5 src $server

  # The bottleneck on the router's egress each way, as plumb's topology.rs
  # sets it: HTB at the rate, plumb's control connection (CS6, TOS 0xc0) in a
  # class of its own ahead of the test's queue, and the test's FIFO. None of
  # RRUL's markings (CS0, CS1, CS5, EF) is CS6.
  RATE=${RATE_BPS}bit
  for dev in rrul-rc rrul-rs; do
    tc -n "$r" qdisc add dev $dev root handle 1: htb default 1
    tc -n "$r" class add dev $dev parent 1: classid 1:1 htb rate $RATE ceil $RATE quantum 1514
    tc -n "$r" class add dev $dev parent 1: classid 1:2 htb rate 1mbit ceil $RATE prio 0 quantum 1514
    tc -n "$r" filter add dev $dev parent 1: protocol ip prio 1 u32 match ip tos 0xc0 0xfc flowid 1:2
    tc -n "$r" qdisc add dev $dev parent 1:1 handle 10: pfifo limit $LIMIT
  done

  at "$s" "$demo/netserver" -D -4 -L $server >"$work/netserver.log" 2>&1 &
  pids+=($!)
  at "$s" irtt server -b $server >"$work/irtt.log" 2>&1 &
  pids+=($!)
  at "$s" "$PLUMB" serve --listen $server:12867 >"$work/serve.log" 2>&1 &
  pids+=($!)
  sleep 1
  at "$c" ping -c 3 -i 0.2 -q $server >/dev/null

  # Alternating, so that a drift of the host over the run reaches both tools.
  for rep in $(seq 1 "$REPS"); do
    PATH=$demo:$PATH at "$c" flent rrul -H $server -l $LENGTH -D "$DATA" -t "rep$rep" \
      >"$DATA/flent-$rep.log" 2>&1 || { cat "$DATA/flent-$rep.log"; exit 1; }
    at "$c" "$PLUMB" run load --server $server --phase ${PHASE}s --load-flows 4 --cc cubic \
      --iterations 1 --db "$DATA/plumb.db" >"$DATA/plumb-$rep.txt" 2>"$work/plumb.err" ||
      { cat "$work/plumb.err"; exit 1; }
    id=$(sed -n 's/^stored as run \([0-9]*\).*/\1/p' "$work/plumb.err")
    "$PLUMB" show "$id" --json --db "$DATA/plumb.db" >"$DATA/plumb-$rep.json"
    echo "rrul: repetition $rep of $REPS done" >&2
  done
  # Whether the FIFOs filled and dropped, as a full queue should.
  tc -n "$r" -s qdisc show >"$DATA/router-qdiscs.txt"
}

if [[ -n ${RENDER_ONLY:-} ]]; then : "${DATA:?RENDER_ONLY needs DATA=DIR}"; else measure; fi
python3 bench/rrul.py "$DATA" "$REPS" $LENGTH $PHASE $LIMIT $RATE_BPS $server \
  "REPS=$REPS bash bench/rrul.sh" >"$DATA/section.md"
write_section "$OUT" "## rrul:" "$DATA/section.md"
echo "rrul: flent's data files and plumb's records are in $DATA" >&2
