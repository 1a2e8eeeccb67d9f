//! Arguments of every subcommand. Value parsers reuse the spec crate's, so a
//! bad value is reported by clap with the flag's name and the accepted forms.

use clap::{Args, Parser, Subcommand, ValueEnum};
use plumb_spec::{BufSize, CpuList};

#[derive(Parser, Debug)]
#[command(
    name = "plumb",
    version,
    about = "A network performance regression lab for Linux",
    long_about = "plumb runs TCP workloads with its own traffic engine, accounts CPU and kernel \
                  counters on both ends, and reports what it measured."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a workload against an embedded server on loopback, or --server.
    #[command(subcommand)]
    Run(RunCommand),
    /// Serve tests for clients on other hosts (or, with --once, one test).
    Serve(ServeArgs),
}

#[derive(Subcommand, Debug)]
pub enum RunCommand {
    /// Bulk TCP transfer in --msg-size writes (netperf TCP_STREAM/TCP_MAERTS).
    Stream(StreamArgs),
}

fn size(s: &str) -> Result<u64, String> {
    plumb_spec::parse_size(s).map_err(|e| e.to_string())
}
fn bufsize(s: &str) -> Result<BufSize, String> {
    s.parse::<BufSize>().map_err(|e| e.to_string())
}
fn rate(s: &str) -> Result<u64, String> {
    plumb_spec::parse_rate(s).map_err(|e| e.to_string())
}
fn duration(s: &str) -> Result<u64, String> {
    plumb_spec::parse_duration(s).map_err(|e| e.to_string())
}
fn cpulist(s: &str) -> Result<CpuList, String> {
    s.parse::<CpuList>()
        .map_err(|e| format!("{e}; use a CPU list like 0, 2-3 or 0-3,6"))
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirectionArg {
    /// The client sends, the server receives.
    Send,
    /// The server sends, the client receives (netperf TCP_MAERTS).
    Recv,
    /// Both send and receive on every flow.
    Both,
}

#[derive(Args, Debug)]
pub struct StreamArgs {
    /// Which way the data flows, seen from the client.
    #[arg(long, value_enum, default_value = "send")]
    pub direction: DirectionArg,
    /// Number of TCP connections.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub flows: u32,
    /// Worker threads on each end [default: min(flows, CPUs)].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub threads: Option<u32>,
    /// Bytes per write (and per read): 256, 8K, 128K, 1M, 1MiB.
    #[arg(long, default_value = "128K", value_parser = size, value_name = "SIZE")]
    pub msg_size: u64,
    /// SO_SNDBUF on both ends: a size like 8K, or auto (kernel autotuning).
    #[arg(long, default_value = "auto", value_parser = bufsize, value_name = "SIZE|auto")]
    pub sndbuf: BufSize,
    /// SO_RCVBUF on both ends: a size like 8K, or auto (kernel autotuning).
    #[arg(long, default_value = "auto", value_parser = bufsize, value_name = "SIZE|auto")]
    pub rcvbuf: BufSize,
    /// Set TCP_NODELAY (disable Nagle) on every flow.
    #[arg(long)]
    pub nodelay: bool,
    /// Set TCP_CORK on every flow.
    #[arg(long)]
    pub cork: bool,
    /// TCP_MAXSEG asked before connecting, in bytes.
    #[arg(long, value_name = "BYTES")]
    pub mss: Option<u32>,
    /// Congestion control (TCP_CONGESTION), e.g. cubic or bbr.
    #[arg(long, value_name = "NAME")]
    pub cc: Option<String>,
    /// Per-flow pacing with SO_MAX_PACING_RATE, in bits/s: 500M, 10G.
    #[arg(long, value_parser = rate, value_name = "RATE")]
    pub pacing_rate: Option<u64>,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Args, Debug)]
pub struct CommonArgs {
    /// Use IPv4 (the default).
    #[arg(short = '4', long = "ipv4", conflicts_with = "ipv6")]
    pub ipv4: bool,
    /// Use IPv6.
    #[arg(short = '6', long = "ipv6")]
    pub ipv6: bool,
    /// Length of the measurement window: 10s, 500ms, 2m.
    #[arg(long, default_value = "10s", value_parser = duration, value_name = "TIME")]
    pub duration: u64,
    /// Traffic before the window opens, not measured.
    #[arg(long, default_value = "1s", value_parser = duration, value_name = "TIME")]
    pub warmup: u64,
    /// Pin the client's worker threads, one CPU each in turn: 0, 0-3,6.
    #[arg(long, value_parser = cpulist, value_name = "LIST")]
    pub client_cpus: Option<CpuList>,
    /// Pin the server's worker threads, one CPU each in turn: 1, 4-7.
    #[arg(long, value_parser = cpulist, value_name = "LIST")]
    pub server_cpus: Option<CpuList>,
    /// A `plumb serve` to test against, HOST[:PORT]; without it an embedded
    /// server runs on loopback.
    #[arg(long, value_name = "HOST[:PORT]")]
    pub server: Option<String>,
    /// What this run is compared as [default: the kernel release].
    #[arg(long)]
    pub label: Option<String>,
    /// Print the run record as JSON (schema plumb.run/1) instead of a summary.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on for control connections: ADDR[:PORT].
    #[arg(long, default_value = "0.0.0.0:12867", value_name = "ADDR[:PORT]")]
    pub listen: String,
    /// Serve one test, then exit.
    #[arg(long)]
    pub once: bool,
}
