#!/usr/bin/env bash
# The test command: installs what the end-to-end tests need (as root, with
# apt-get, only what is missing), runs `cargo test --workspace
# --no-fail-fast` with any arguments given, and ends with the tests that
# were skipped and their count.
#
# Tests whose precondition is missing (root, a tool, a kernel module) print
# `skipped: <test>: <why>` and return; under CI=true they fail instead, so a
# broken CI image cannot pass by skipping.
set -uo pipefail
cd "$(dirname "$0")/.."

export DEBIAN_FRONTEND=noninteractive

# command -> Debian package that has it
tools=(
  "ip iproute2"             # namespaces, veth pairs, addresses
  "sysctl procps"           # sysctls inside a namespace
  "ps procps"
  "iptables-legacy iptables" # the udp-rr loss test drops datagrams with a rule
  "ethtool ethtool"         # the knob tests switch offloads
  "chromium chromium"       # the report test renders the HTML page
  "strace strace"           # the zero-copy tests check which system calls moved the bytes
  "cc gcc"                  # build scripts of the dependencies
  "modprobe kmod"           # loads tcp_bbr for the congestion-control test
  "man man-db"              # the man pages render without warnings
  "zsh zsh"                 # the completion scripts parse in their shells
  "fish fish"
  "ssh openssh-client"      # the ssh tests reach their own sshd in a namespace
  "ping iputils-ping"       # the delay-line test pings through the emulated path
  "openssl openssl"         # the PostgreSQL TLS test makes its CA and certificates
  "qemu-system-x86_64 qemu-system-x86" # the --kernel tests boot distribution kernels
  "xz xz-utils"             # 6.12's modules are xz-compressed
  "dpkg-deb dpkg"           # a kernel package is unpacked with it
  "git git"                 # bisect --tree drives git bisect in a tree of its test's
  "systemd-analyze systemd" # the lab agent's unit file is checked with it
)

missing=()
for t in "${tools[@]}"; do
  read -r cmd pkg <<<"$t"
  command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
done
# The ssh tests start their own sshd (not on every PATH: it is in sbin).
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
# The PostgreSQL store tests (crates/store/tests/postgres.rs) start their
# own server; Debian keeps initdb and pg_ctl off PATH, in a versioned dir.
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || command -v initdb >/dev/null 2>&1 ||
  missing+=(postgresql)
# libc headers for the C compiler
[ -e /usr/include/stdio.h ] || missing+=(libc6-dev)
# A font, or Chromium lays out the report's text with no width.
[ -n "$(fc-list 2>/dev/null)" ] || missing+=(fonts-dejavu-core)
# The OpenMetrics test parses with prometheus_client. Debian's package
# serves /usr/bin/python3, which the test prefers to the python3 on PATH.
/usr/bin/python3 -c 'import prometheus_client' 2>/dev/null ||
  python3 -c 'import prometheus_client' 2>/dev/null || missing+=(python3-prometheus-client)
missing=($(printf '%s\n' "${missing[@]}" | sort -u))

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "tests/setup.sh: installing ${missing[*]}" >&2
    apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
      { echo "tests/setup.sh: apt-get install ${missing[*]} failed" >&2; exit 1; }
  else
    echo "tests/setup.sh: not root (or no apt-get): cannot install ${missing[*]};" \
      "the tests that need them will say so when skipped" >&2
  fi
fi

# The congestion-control test asks for bbr, which the kernel may have as a
# module not yet loaded.
if ! grep -qw bbr /proc/sys/net/ipv4/tcp_available_congestion_control 2>/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    modprobe tcp_bbr 2>/dev/null || echo "tests/setup.sh: modprobe tcp_bbr failed" >&2
  fi
fi

# Namespaces that a test process killed mid-run left behind (the tests name
# theirs plumb-TAG-PID): their addresses would clash with the new run's.
# Only those whose process is gone; plumb's own veth namespaces are
# `plumb topology down`'s.
if [ "$(id -u)" = 0 ] && command -v ip >/dev/null 2>&1; then
  for ns in $(ip netns list 2>/dev/null | awk '/^plumb-[a-z0-9]+-[0-9]+( |$)/ {print $1}'); do
    pid=${ns##*-}
    if [ ! -e "/proc/$pid" ] && ip netns del "$ns" 2>/dev/null; then
      echo "tests/setup.sh: removed namespace $ns, left by test process $pid, which is gone" >&2
    fi
  done
fi

# The --kernel tests (tests/vm.rs) boot Debian's cloud kernels: the two
# newest 6.1 packages and the two newest 6.12 ones the archive offers,
# fetched once and kept between runs (PLUMB_TEST_KERNELS says where).
kernels=${PLUMB_TEST_KERNELS:-/var/cache/plumb-test-kernels}
# The two newest packages of each series, oldest first.
newest_kernels() {
  apt-cache search --names-only '^linux-image-6\.(1\.0-[0-9]+|12\.[0-9]+\+deb[0-9]+)-cloud-amd64$' 2>/dev/null |
    awk '{print $1}' | sort -V | awk -F- '{split($3, v, "."); s = v[1] "." v[2]; n[s]++; all[s, n[s]] = $0}
      END {for (s in n) for (i = n[s] - 1; i <= n[s]; i++) if (i > 0) print all[s, i]}' | sort -V
}
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  mkdir -p "$kernels"
  want=$(newest_kernels)
  if [ -z "$want" ]; then
    apt-get update -qq >/dev/null 2>&1
    want=$(newest_kernels)
  fi
  for pkg in $want; do
    compgen -G "$kernels/${pkg}_*.deb" >/dev/null && continue
    (cd "$kernels" && apt-get download -qq "$pkg" 2>/dev/null) ||
      echo "tests/setup.sh: apt-get download $pkg failed" >&2
  done
fi
export PLUMB_TEST_KERNELS=$kernels

# Where the tests record their skips (CARGO_TARGET_TMPDIR of the tests).
target=${CARGO_TARGET_DIR:-target}
skipped="$target/tmp/skipped.txt"
mkdir -p "$target/tmp"
: >"$skipped"

cargo test --workspace --no-fail-fast "$@"
rc=$?

n=$(grep -c '^skipped: ' "$skipped" 2>/dev/null || true)
echo
if [ "${n:-0}" -gt 0 ]; then
  sort "$skipped"
  echo "tests/setup.sh: $n skipped (cargo counts them as passed)"
else
  echo "tests/setup.sh: none skipped"
fi
exit $rc
