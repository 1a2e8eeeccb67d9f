#!/usr/bin/env bash
# `plumb bisect --tree` with its default build, once, on a real kernel
# source: Debian's linux-source package unpacked into a git repository of
# two commits (the second adds a line to README, so its build is the
# tree's incremental one), bisected with the window point over a 10 ms veth
# path. Not run in CI: the first build is the whole kernel's.
#
#   bench/bisect-tree.sh [SERIES]
#
# SERIES is the linux-source package's series (default 6.1). WORK=DIR
# keeps the tree (default a directory under /tmp, removed afterwards);
# ACCEL=tcg|kvm|auto picks the accelerator (default auto). Appends a
# "## bisect --tree, the default build" section to $OUT (BENCHMARKS.md)
# with the command, the machine, each build's time from the step lines,
# and the whole bisection's wall and CPU time.
set -euo pipefail
cd "$(dirname "$0")/.."
SERIES=${1:-6.1}
OUT=${OUT:-BENCHMARKS.md}
ACCEL=${ACCEL:-auto}
PLUMB=${PLUMB:-target/release/plumb}
[[ -x $PLUMB ]] || cargo build --release -q
own_work=
if [[ -z ${WORK:-} ]]; then
  WORK=$(mktemp -d /tmp/plumb-bisect-tree.XXXXXX)
  own_work=1
fi
cleanup() { [[ -n $own_work ]] && rm -rf "$WORK"; }
trap cleanup EXIT
for tool in git make gcc bc flex bison dpkg-deb; do
  command -v "$tool" >/dev/null || { echo "bench/bisect-tree.sh: $tool is missing (apt-get install build-essential bc flex bison libelf-dev libssl-dev git)" >&2; exit 2; }
done

tree=$WORK/linux-source-$SERIES
if [[ ! -d $tree/.git ]]; then
  (cd "$WORK" && apt-get download -qq "linux-source-$SERIES")
  dpkg-deb -x "$WORK"/linux-source-"$SERIES"_*.deb "$WORK/pkg"
  tar -xaf "$WORK/pkg/usr/src/linux-source-$SERIES.tar.xz" -C "$WORK"
  rm -rf "$WORK/pkg"
  # Debian's tree ignores everything at its top: add it all.
  (cd "$tree" && git init -q -b lab &&
    git -c user.name=plumb -c user.email=plumb@example.invalid add -A -f &&
    git -c user.name=plumb -c user.email=plumb@example.invalid commit -qm "linux-source $SERIES" &&
    echo "# bench" >>README &&
    git -c user.name=plumb -c user.email=plumb@example.invalid commit -qam "README: one line more")
fi

points=$WORK/window.toml
cat >"$points" <<'EOF'
name = "small-window"
iterations = "3..3"
[base]
workload = "stream"
topology = "veth"
delay = "10ms"
rcvbuf = "16K"
duration = "2s"
warmup = "500ms"
EOF

log=$WORK/bisect.log
# Each line of plumb's with the second it came, so that a step's build
# time is the gap from its "building" line to its "boots" line.
/usr/bin/time -f '%e %U %S' -o "$WORK/time" \
  "$PLUMB" bisect --points "$points" --tree "$tree" --good lab~1 --bad lab \
  --accel "$ACCEL" --no-store 2>&1 |
  while IFS= read -r line; do printf '%s %s\n' "$(date +%s)" "$line"; done >"$log" || true
# time's last line holds the figures; a line before it says how the
# command exited where it failed.
read -r wall user sys < <(tail -n 1 "$WORK/time")
cpu=$(echo "$user + $sys" | bc)
# "SECS step N: building SHA ..." then "SECS step N: SHA (label) boots":
# the build is the gap, the measure the gap to the next step's line.
builds=$(awk 'b && ($2 == "step" || $2 == "plumb:" || $2 == "first") {
    printf "step %s booted and measured in %d s\n", step, $1 - b; b = 0 }
  $2 == "step" && $4 == "building" { step = $3; t = $1; next }
  $2 == "step" && $3 == step && $NF == "boots" { printf "step %s built in %d s\n", step, $1 - t; b = $1 }' "$log")
steps=$(cut -d' ' -f2- "$log" | grep -E '^(step|git:|first bad|cannot tell|plumb:)|nothing to bisect|^[0-9a-f]{7} ' | head -n 40 || true)

{
  echo
  echo "## bisect --tree, the default build"
  echo
  echo "$(date -u +%Y-%m-%d), $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), host kernel $(uname -r)."
  echo
  echo '```'
  echo "bench/bisect-tree.sh $SERIES   # ACCEL=$ACCEL"
  echo "$PLUMB bisect --points window.toml --tree linux-source-$SERIES --good lab~1 --bad lab --accel $ACCEL --no-store"
  echo '```'
  echo
  echo "The whole bisection: ${wall} s wall, ${cpu} CPU-seconds (the builds, the boots and the runs)."
  echo
  echo "$builds" | sed 's/^/- /'
  echo
  echo '```'
  echo "$steps"
  echo '```'
} >>"$OUT"
echo "bench/bisect-tree.sh: ${wall} s wall, ${cpu} CPU-s; the log is $log" >&2
tail -n 30 "$log" >&2
