#!/usr/bin/env bash
# Writes tests/data/records-v1.sqlite beside this script: a store of runs of
# every workload and of the record's optional parts (several iterations, a
# run of parts, TCP_INFO series, ACKs and a profile, a delay line, a server
# knob, both engines), made by the plumb binary given. tests/json_schema.rs
# checks that the schema the record's types make today takes every record
# of it as stored, so a change that breaks earlier records fails there.
# Run as root (the delay line's namespaces, the profile, the knob).
# usage: tests/data/make-records.sh PATH/TO/plumb
set -euo pipefail
bin=$(realpath "$1")
cd "$(dirname "$0")"
out=$PWD/records-v1.sqlite
rm -f "$out"
export PLUMB_ACTIVITY_DIR=off
run() { "$bin" run "$@" --db "$out" --warmup 200ms --label fixture >/dev/null; }
one() { run "$@" --iterations 1 --duration 1s; }
one stream
one stream --direction both --flows 3 --sndbuf 64K --rcvbuf 64K --nodelay \
  --pacing-rate 5G --notsent-lowat 16K
one stream --direction recv --zerocopy msg --rx skip
one stream --io uring --tcp-probe --profile
one stream --topology veth --emulator plumb --delay 1ms \
  --server-knob "sysctl:net.ipv4.tcp_rmem=4096 77777 6291456"
one rr --flows 4 --resp-size 64 --resp-writes 8,rest
one crr --close fin
one udp-stream
one udp-stream --direction recv
one udp-rr --flows 3
run rr --iterations 3 --duration 1s
run rr --iterations 1 --duration 3s \
  --part load=stream:flows=2:direction=both:start=1s:stop=2s
sqlite3 "$out" VACUUM
ls -l "$out"
