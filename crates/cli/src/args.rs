//! Arguments of every subcommand. The spec fields of `plumb run` are taken
//! as typed, named after `plumb_spec::Field`, and turned into a spec by
//! `plumb_spec::build` as an experiment file's fields are; other values go
//! through the spec crate's parser for their unit. A bad value is refused
//! on one line that names the flag and the accepted forms.

use clap::builder::TypedValueParser;
use clap::{Args, Parser, Subcommand, ValueEnum};
pub use plumb_report::format::of;
pub use plumb_report::Format;

/// `--format`'s parser for a command that writes `formats`: their names
/// are the possible values, so help, completions and errors list them.
fn formats(formats: &'static [Format]) -> impl TypedValueParser<Value = Format> {
    clap::builder::PossibleValuesParser::new(formats.iter().map(|f| f.name()))
        .map(|name| Format::from_name(&name).expect("one of the possible values"))
}

#[derive(Parser, Debug)]
#[command(
    name = "plumb",
    version = env!("PLUMB_BUILD"),
    about = "A network performance regression lab for Linux",
    long_about = "plumb runs TCP workloads with its own traffic engine, accounts CPU and kernel \
                  counters on both ends, and reports what it measured."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

// Parsed once per process; boxing the run arguments would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a workload against an embedded server on loopback, or --server.
    #[command(subcommand)]
    Run(RunCommand),
    /// Serve tests for clients on other hosts (or, with --once, one test).
    Serve(ServeArgs),
    /// List the runs in the result database, newest first.
    List(ListArgs),
    /// Print one stored run: its summary, or its record with --json.
    Show(ShowArgs),
    /// Write stored runs as JSON (for `plumb import` elsewhere) or CSV.
    Export(ExportArgs),
    /// Add the runs of a JSON export to the result database.
    Import(ImportArgs),
    /// Remove runs from the result database.
    Delete(DeleteArgs),
    /// One test point's metric run after run (or label after label), with
    /// the changes in it found by E-divisive means.
    History(HistoryArgs),
    /// Work on result databases as a whole.
    #[command(subcommand)]
    Db(DbCommand),
    /// Print this host's environment, or what differs between two runs.
    Env(EnvArgs),
    /// Compare two labels (or run ids): verdicts, CPU budget, environment diff.
    Compare(CompareArgs),
    /// Exit 0 (good), 1 (regression) or 125 (cannot tell), for `git bisect run`.
    Check(CheckArgs),
    /// Find the first kernel image of an ordered series, or the first
    /// commit of a kernel tree (--tree), whose figures changed: each step
    /// boots one kernel and runs an experiment's points.
    Bisect(BisectArgs),
    /// Audit this host's settings for network benchmarking, and how busy it is.
    Doctor(DoctorArgs),
    /// One process of a flow group (run by `plumb run` itself).
    #[command(name = "flow-group-member", hide = true)]
    FlowGroupMember,
    /// Put back host settings a plumb process changed and could not restore
    /// (it was killed): what the knob journal still holds.
    Restore(RestoreArgs),
    /// Run every point of an experiment file (docs/experiments.md), store
    /// each, and compare the variants.
    Sweep(SweepArgs),
    /// Report an experiment, or labels and runs: the metric against each
    /// swept axis, cliffs, CPU, latency, verdicts; --html for a page.
    Report(ReportArgs),
    /// A lab of many hosts on one PostgreSQL: submit an experiment's points
    /// as jobs, see their progress, wait for them (docs/lab.md).
    #[command(subcommand)]
    Lab(LabCommand),
    /// Claim a lab's jobs and run them on this host, one at a time, until
    /// stopped (docs/lab.md).
    Agent(AgentArgs),
    /// The namespaces and veth pairs of --topology veth.
    #[command(subcommand)]
    Topology(TopologyCommand),
    /// Print a shell completion script (bash, zsh or fish) on stdout.
    Completions(CompletionsArgs),
    /// Write one man page per command (plumb.1, plumb-run.1, ...) into DIR.
    Man(ManArgs),
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Args, Debug)]
pub struct CompletionsArgs {
    pub shell: Shell,
}

#[derive(Args, Debug)]
pub struct ManArgs {
    /// The directory to write the pages into (created if missing).
    pub dir: std::path::PathBuf,
}

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Labels or run ids, one line each.
    pub names: Vec<String>,
    /// The runs of this experiment (by its name), one line per variant.
    #[arg(long, value_name = "NAME")]
    pub experiment: Option<String>,
    /// With --experiment: only the runs under this label.
    #[arg(long)]
    pub label: Option<String>,
    /// The line the others are compared with [default: the first].
    #[arg(long, value_name = "LINE")]
    pub baseline: Option<String>,
    /// Also write one self-contained HTML page with the plots.
    #[arg(long, value_name = "FILE")]
    pub html: Option<std::path::PathBuf>,
    #[arg(long, default_value = "terminal", value_parser = formats(of::REPORT))]
    pub format: Format,
    /// Adjacent points whose ratio is at least this are a cliff.
    #[arg(long, default_value = "4", value_name = "FACTOR")]
    pub cliff_factor: f64,
    #[command(flatten)]
    pub db: DbArgs,
}

#[derive(Args, Debug)]
pub struct SweepArgs {
    /// The experiment file (TOML).
    pub file: std::path::PathBuf,
    /// Refuse to start a point while another plumb run measures on this
    /// host (without it, both runs carry a warning in their records).
    #[arg(long)]
    pub exclusive: bool,
    /// Use the file's [quick] profile: short windows, fewer points.
    #[arg(long)]
    pub quick: bool,
    /// Print every point's summary line, spec key and spec, the label, the
    /// server end and the iterations, and stop: nothing is measured, stored
    /// or set (with --format json, as one JSON document).
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub profile: ProfileArgs,
    /// Go on with an interrupted experiment: points already stored under
    /// the label are not run again.
    #[arg(long)]
    pub resume: bool,
    /// Store the runs under this label [default: the file's, else the kernel release].
    #[arg(long, value_parser = label)]
    pub label: Option<String>,
    /// Seed of the random order [default: the file's, else drawn and printed].
    #[arg(long, value_name = "SEED")]
    pub order_seed: Option<u64>,
    /// The server end of every point [default: the file's `server`, else
    /// the embedded server]: as `plumb run --server`.
    #[command(flatten)]
    pub far: ServerArgs,
    #[command(flatten)]
    pub vm: VmArgs,
    #[command(flatten)]
    pub verdict: VerdictArgs,
    #[command(flatten)]
    pub db: DbArgs,
}

#[derive(Subcommand, Debug)]
pub enum LabCommand {
    /// Queue every point of an experiment file as jobs for the agents of a
    /// class: each cell's variants one job, run on one host, interleaved.
    Submit(LabSubmitArgs),
    /// Each job set's progress and each agent's last word.
    Status(LabStatusArgs),
    /// Wait until a job set is done; exit 0, or as `plumb check` against
    /// --baseline, or 128 when a job failed.
    Wait(LabWaitArgs),
    /// Watch a directory for new kernel packages or images: submit the
    /// points file for each as it appears, find changes between kernels
    /// once their runs are in, and mail and post each change once.
    Watch(LabWatchArgs),
    /// Give a database role what an agent needs and nothing more: claim
    /// jobs through the lab's functions, write runs (run by the lab's
    /// owner, who makes the tables first).
    Grant(LabGrantArgs),
}

#[derive(Args, Debug)]
pub struct LabWatchArgs {
    /// The directory new kernels appear in: linux-image-*.deb packages,
    /// vmlinuz-* or bzImage* images (at this path on the agents' hosts
    /// too).
    pub dir: std::path::PathBuf,
    /// The experiment file each new kernel is measured with.
    #[arg(long, value_name = "FILE")]
    pub points: std::path::PathBuf,
    /// The class of agents that measure them.
    #[arg(long, default_value = "default", value_parser = label)]
    pub class: String,
    /// How many times a job is tried before it is failed for good.
    #[arg(long, default_value = "3", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub attempts: u32,
    /// How often to look in the directory and at the runs.
    #[arg(long, default_value = "60s", value_parser = duration, value_name = "TIME")]
    pub every: u64,
    /// Look once: submit what is new, wait until every kernel's runs are
    /// in, report what changed, and exit.
    #[arg(long)]
    pub once: bool,
    /// The largest p-value of a change reported.
    #[arg(long, default_value = "0.05", value_name = "P")]
    pub max_p: f64,
    /// The least change of a point's mean that is reported.
    #[arg(long, default_value = "5", value_parser = percent, value_name = "PERCENT")]
    pub min_change: f64,
    /// Mail each change to this address; repeat it for more.
    #[arg(long, value_name = "ADDR")]
    pub mail_to: Vec<String>,
    /// The mail's sender [default: plumb@HOSTNAME].
    #[arg(long, value_name = "ADDR")]
    pub mail_from: Option<String>,
    /// Send the mail through this SMTP server (HOST[:PORT], port 25)
    /// [default: the host's sendmail].
    #[arg(long, value_name = "HOST[:PORT]")]
    pub smtp: Option<String>,
    /// The sendmail program, when no --smtp is given.
    #[arg(long, default_value = "/usr/sbin/sendmail", value_name = "PATH")]
    pub sendmail: String,
    /// POST each report as JSON to this URL (http://HOST[:PORT]/PATH).
    #[arg(long, value_name = "URL")]
    pub webhook: Option<String>,
    #[command(flatten)]
    pub tree: WatchTreeArgs,
    #[command(flatten)]
    pub db: DbArgs,
}

/// A git tree whose new commits a watch builds into its directory.
#[derive(Args, Debug)]
pub struct WatchTreeArgs {
    /// Follow this git tree as well: at each look the commit --branch
    /// names, when it is new, is checked out in a work tree of plumb's
    /// (DIR/.plumb-build, kept between builds) and built by --build; the
    /// image it leaves is put in DIR as vmlinuz-DESCRIBE (`git describe
    /// --tags --always`), to be measured as any kernel found there.
    #[arg(long, value_name = "TREE", requires = "build")]
    pub git: Option<std::path::PathBuf>,
    /// With --git: the commit to follow (fetch the tree to move it).
    #[arg(long, value_name = "REF", default_value = "HEAD")]
    pub branch: String,
    /// With --git: the command that builds the kernel, run by sh in the
    /// work tree (`make olddefconfig && make -j8 bzImage`).
    #[arg(long, value_name = "COMMAND", requires = "git")]
    pub build: Option<String>,
    /// With --git: where the build leaves the image, in the work tree.
    #[arg(long, value_name = "PATH", default_value = "arch/x86/boot/bzImage")]
    pub image: std::path::PathBuf,
}

#[derive(Args, Debug)]
pub struct LabGrantArgs {
    /// The agents' role (made beforehand: CREATE ROLE ... LOGIN).
    pub role: String,
    /// Print the statements instead of running them.
    #[arg(long)]
    pub print: bool,
    #[command(flatten)]
    pub db: DbArgs,
}

#[derive(Args, Debug)]
pub struct LabSubmitArgs {
    /// The experiment file (TOML), as `plumb sweep` takes it.
    pub file: std::path::PathBuf,
    /// Use the file's [quick] profile.
    #[arg(long)]
    pub quick: bool,
    /// Store the runs under this label [default: the file's, else `lab`].
    #[arg(long, value_parser = label)]
    pub label: Option<String>,
    /// Seed of the random order within each job [default: the file's, else drawn].
    #[arg(long, value_name = "SEED")]
    pub order_seed: Option<u64>,
    /// The class of host the jobs need: only agents of this class claim them.
    #[arg(long, default_value = "default", value_parser = label)]
    pub class: String,
    /// Boot this kernel in a guest on the agent's host for every job, as
    /// `plumb sweep --kernel` does (an image, a linux-image .deb or a build
    /// directory, at this path on the agents' hosts); repeat it to compare
    /// kernels, each job booting every one in turn. Runs are labelled by
    /// LABEL in LABEL=IMAGE, else --label when there is one kernel, else
    /// the guest's release.
    #[arg(long, value_parser = kernel, value_name = "[LABEL=]IMAGE")]
    pub kernel: Vec<String>,
    /// How many times a job is tried (a failure, or an agent that stopped
    /// answering) before it is failed for good.
    #[arg(long, default_value = "3", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub attempts: u32,
    #[command(flatten)]
    pub db: DbArgs,
}

#[derive(Args, Debug)]
pub struct LabStatusArgs {
    /// One job set [default: the ten newest].
    pub set: Option<i64>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub db: DbArgs,
}

#[derive(Args, Debug)]
pub struct LabWaitArgs {
    /// The job set.
    pub set: i64,
    /// Give up (exit 124) after this long [default: wait for ever].
    #[arg(long, value_parser = duration, value_name = "TIME")]
    pub timeout: Option<u64>,
    /// Then compare the set's label against this one as `plumb check` does,
    /// and exit as it would (0 good, 1 regression, 125 cannot tell).
    #[arg(long, value_name = "LABEL")]
    pub baseline: Option<String>,
    /// The drop that --baseline calls a regression.
    #[arg(long, default_value = "5", value_parser = percent, value_name = "PERCENT")]
    pub threshold: f64,
    #[command(flatten)]
    pub db: DbArgs,
}

#[derive(Args, Debug)]
pub struct AgentArgs {
    /// The class of jobs this host runs.
    #[arg(long, default_value = "default", value_parser = label)]
    pub class: String,
    /// This agent's name in the lab [default: the host's name].
    #[arg(long, value_parser = label)]
    pub name: Option<String>,
    /// How long a claimed job stays this agent's without a renewal; renewed
    /// every third of it. An agent that stops answering loses its job after
    /// this long.
    #[arg(long, default_value = "30s", value_parser = duration, value_name = "TIME")]
    pub lease: u64,
    /// How often to look for a job when the queue is empty.
    #[arg(long, default_value = "2s", value_parser = duration, value_name = "TIME")]
    pub poll: u64,
    /// A knob a job may set on this host (`sysctl:net.core.rmem_max`), or
    /// every knob under a prefix (`sysctl:net.ipv4.*`); repeat it. A job
    /// whose points set any other knob fails on this host with the knob
    /// named.
    #[arg(long, value_name = "KNOB")]
    pub allow_knob: Vec<String>,
    /// Exit once no job of this agent's class is queued or running
    /// anywhere (a running one may yet come back to the queue).
    #[arg(long)]
    pub until_empty: bool,
    /// How this host boots the guests of a set with kernels.
    #[command(flatten)]
    pub boot: BootArgs,
    #[command(flatten)]
    pub db: DbArgs,
}

#[derive(Args, Debug)]
pub struct RestoreArgs {
    /// The knob journal [default: $PLUMB_JOURNAL, else $XDG_STATE_HOME/plumb/journal].
    #[arg(long, value_name = "PATH")]
    pub journal: Option<std::path::PathBuf>,
}

fn knob_setting(s: &str) -> Result<plumb_run::knob::Setting, String> {
    s.parse().map_err(|e: plumb_run::knob::KnobError| e.0)
}

#[derive(Args, Debug)]
pub struct FilterArgs {
    /// Only runs under this label.
    #[arg(long)]
    pub label: Option<String>,
    /// Only runs of this workload (stream).
    #[arg(long)]
    pub workload: Option<String>,
    /// Only runs started at or after this date or time (2026-11-01, RFC 3339).
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
    /// Only runs started before this date or time.
    #[arg(long, value_name = "DATE")]
    pub until: Option<String>,
    /// At most this many runs.
    #[arg(long)]
    pub limit: Option<usize>,
}

#[derive(Args, Debug)]
pub struct ListArgs {
    #[command(flatten)]
    pub filter: FilterArgs,
    /// One JSON array or CSV lines instead of the table.
    #[arg(long, value_parser = formats(of::LIST))]
    pub format: Option<Format>,
    #[command(flatten)]
    pub db: DbArgs,
}

#[derive(Args, Debug)]
pub struct ShowArgs {
    /// The run id, as `plumb list` shows it.
    pub run: String,
    /// Print the stored record as JSON (schema plumb.run/1).
    #[arg(long)]
    pub json: bool,
    /// Each end's top kernel and plumb functions, by self and total time,
    /// of a run made with --profile.
    #[arg(long, conflicts_with = "json")]
    pub profile: bool,
    /// With --profile: also write each end's flame graph to FILE as a
    /// self-contained HTML page.
    #[arg(long, value_name = "FILE", requires = "profile")]
    pub flame: Option<std::path::PathBuf>,
    /// Also write the run's TCP over its window to FILE as a self-contained
    /// HTML page: each end's throughput, its flows' congestion window,
    /// smoothed RTT, the peer's advertised window and the data in flight,
    /// and what limited the senders.
    #[arg(long, value_name = "FILE", conflicts_with = "json")]
    pub html: Option<std::path::PathBuf>,
    /// With --html: draw each sampled flow as its own line beside the
    /// mean, rather than the flows' spread as a band around it.
    #[arg(long, requires = "html")]
    pub per_flow: bool,
    #[command(flatten)]
    pub db: DbArgs,
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    #[command(flatten)]
    pub filter: FilterArgs,
    /// json (for `import`), csv (a line per iteration) or openmetrics (the
    /// latest run of each test point as gauges, for Prometheus' textfile
    /// collector or a pushgateway).
    #[arg(long, default_value = "json", value_parser = formats(of::EXPORT))]
    pub format: Format,
    /// Write here instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub db: DbArgs,
}

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// A file written by `plumb export --format json` (- for stdin).
    pub file: std::path::PathBuf,
    #[command(flatten)]
    pub db: DbArgs,
}

#[derive(Args, Debug)]
pub struct DeleteArgs {
    /// Run ids.
    #[arg(required = true)]
    pub runs: Vec<String>,
    #[command(flatten)]
    pub db: DbArgs,
}

#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// An interface the tests will use (repeatable; default lo).
    #[arg(long = "interface", value_name = "NAME")]
    pub interfaces: Vec<String>,
    /// How long to watch the CPUs and processes for other work.
    #[arg(long, default_value = "2s", value_parser = duration, value_name = "TIME")]
    pub sample: u64,
    /// Print JSON (schema plumb.doctor/1).
    #[arg(long)]
    pub json: bool,
    /// Boot this kernel (an image, a package or a build directory) under
    /// KVM to find out afresh whether guests can use KVM here; the answer
    /// is remembered for --accel auto.
    #[arg(long, value_name = "IMAGE")]
    pub kernel: Option<std::path::PathBuf>,
}

#[derive(Args, Debug)]
pub struct EnvArgs {
    /// Two runs or labels (the newest run under the label) to diff.
    #[arg(long, num_args = 2, value_names = ["A", "B"])]
    pub diff: Option<Vec<String>>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub db: DbArgs,
}

#[derive(Args, Debug)]
pub struct VerdictArgs {
    /// Significance level of the test.
    #[arg(long, default_value = "0.05", value_parser = alpha)]
    pub alpha: f64,
    /// Changes whose whole interval lies within ±this percent are no change.
    #[arg(long, default_value = "2", value_parser = percent, value_name = "PERCENT")]
    pub noise_band: f64,
    #[arg(long, default_value = "terminal", value_parser = formats(of::COMPARISON))]
    pub format: Format,
}

/// The figure a comparison decides on, where a point's headline is not
/// what matters.
#[derive(Args, Debug)]
pub struct DecideArgs {
    /// Judge the points of runs of parts that have it on this figure of
    /// their probes rather than on their headline, and only those points:
    /// PROBE:STAT@LOADS (STAT p50, p90, p99 or max, in ms, more being
    /// worse) or rpm@LOADS (responsiveness, more being better), over the
    /// stretches in which exactly LOADS ran: a phase of `plumb run load`
    /// (idle, download, upload, both) or part names joined by +. For
    /// example self:p99@both.
    #[arg(long, value_name = "FIGURE", value_parser = figure)]
    pub decide_on: Option<plumb_compare::decide::Figure>,
}

fn figure(s: &str) -> Result<plumb_compare::decide::Figure, String> {
    s.parse()
}

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The baseline: a label, or a run id.
    pub a: String,
    /// The candidate: a label, or a run id.
    pub b: String,
    #[command(flatten)]
    pub verdict: VerdictArgs,
    #[command(flatten)]
    pub decide: DecideArgs,
    /// Per end, the functions whose CPU time per unit of work changed,
    /// of runs made with --profile on both sides.
    #[arg(long)]
    pub profile: bool,
    /// With --profile: also write a differential flame graph per end, with
    /// the table of the functions that moved, to FILE as HTML.
    #[arg(long, value_name = "FILE", requires = "profile")]
    pub flame: Option<std::path::PathBuf>,
    /// With --profile: only the functions whose names contain NAME (each
    /// listed however little it moved); repeat for more.
    #[arg(long, value_name = "NAME", requires = "profile")]
    pub function: Vec<String>,
    /// Also write the comparison to FILE as one self-contained HTML page:
    /// per test point the verdict, and A's and B's median iterations in the
    /// same plots: each end's throughput, its flows' congestion window,
    /// smoothed RTT, the peer's advertised window and the data in flight,
    /// and what limited the senders.
    #[arg(long, value_name = "FILE")]
    pub html: Option<std::path::PathBuf>,
    /// With --html: draw each sampled flow as its own line beside its
    /// side's mean, rather than the flows' spread as a band around it.
    #[arg(long, requires = "html")]
    pub per_flow: bool,
    /// Give a verdict on two single test points made on different machines
    /// (a host and a guest, or guests under KVM and TCG), which compare
    /// otherwise refuses to weigh against each other.
    #[arg(long)]
    pub across_machines: bool,
    #[command(flatten)]
    pub db: DbArgs,
}

/// When a test point has run often enough.
#[derive(Args, Debug)]
pub struct RepeatArgs {
    /// Iterations of the test: MIN..MAX runs at least MIN and stops at the
    /// confidence target or MAX; N runs exactly N.
    #[arg(long, default_value = "3..10", value_parser = plumb_spec::parse_iterations, value_name = "MIN..MAX")]
    pub iterations: (u32, u32),
    /// Target for the interval of the mean: LEVEL:WIDTH in percent, 95:2.5
    /// meaning the 95 % interval within ±2.5 % of the mean.
    #[arg(long, default_value = "95:2.5", value_parser = plumb_spec::parse_confidence, value_name = "LEVEL:WIDTH")]
    pub confidence: (f64, f64),
}

impl RepeatArgs {
    pub fn repeat(&self) -> plumb_run::Repeat {
        plumb_run::Repeat {
            min: self.iterations.0,
            max: self.iterations.1,
            level: self.confidence.0,
            target: self.confidence.1,
        }
    }
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The label whose runs are the reference.
    #[arg(long)]
    pub baseline: String,
    /// Compare against runs already stored under this label instead of
    /// running the baseline's test points now.
    #[arg(long)]
    pub candidate: Option<String>,
    /// A significant change for the worse larger than this percent is bad:
    /// a drop of the headline, or a rise of a latency (--decide-on).
    #[arg(long, default_value = "5", value_parser = percent, value_name = "PERCENT")]
    pub threshold: f64,
    /// Label for the runs made now [default: the kernel release].
    #[arg(long, value_parser = label)]
    pub label: Option<String>,
    #[command(flatten)]
    pub repeat: RepeatArgs,
    /// Do not keep the runs made now.
    #[arg(long)]
    pub no_store: bool,
    /// Print the baseline's test points that would run now (summary line,
    /// spec key, spec), the label and the iterations, and stop: nothing is
    /// measured, stored or set.
    #[arg(long)]
    pub dry_run: bool,
    /// The server end of the runs made now, as `plumb run --server`
    /// [default: the embedded server].
    #[command(flatten)]
    pub far: ServerArgs,
    /// Make the runs in a guest of this kernel, all in one boot: a kernel
    /// that does not boot answers 125, so `git bisect run` skips it.
    #[arg(long, value_parser = kernel, value_name = "[LABEL=]IMAGE")]
    pub kernel: Option<String>,
    #[command(flatten)]
    pub boot: BootArgs,
    #[command(flatten)]
    pub verdict: VerdictArgs,
    #[command(flatten)]
    pub decide: DecideArgs,
    #[command(flatten)]
    pub db: DbArgs,
}

/// Which change a bisect looks for.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeArg {
    /// A regression: a significant change for the worse.
    Worse,
    /// A fix: a significant change for the better.
    Better,
    /// Either.
    Any,
}

#[derive(Args, Debug)]
pub struct BisectArgs {
    /// The experiment file whose points each step runs (all of them, or
    /// its [quick] profile's with --quick).
    #[arg(long, value_name = "FILE")]
    pub points: std::path::PathBuf,
    /// Use the file's [quick] profile.
    #[arg(long)]
    pub quick: bool,
    /// The image known good: the figures every step is compared with.
    #[arg(long, value_parser = kernel, value_name = "[LABEL=]IMAGE")]
    pub good: String,
    /// The image known bad.
    #[arg(long, value_parser = kernel, value_name = "[LABEL=]IMAGE")]
    pub bad: String,
    /// The images between them, oldest first.
    #[arg(value_parser = kernel, value_name = "IMAGE")]
    pub between: Vec<String>,
    /// Bisect the commits of this kernel tree with git bisect instead:
    /// --good and --bad name commits (REV as git takes it), each commit git
    /// checks out is built, booted and checked, its runs labelled
    /// bisect-COMMIT, and the tree is put back on its branch at the end.
    #[arg(long, value_name = "DIR", conflicts_with = "between")]
    pub tree: Option<std::path::PathBuf>,
    /// With --tree: the command that builds the commit checked out (sh -c,
    /// in DIR; a status other than 0 skips the commit). It leaves a build
    /// directory in $PLUMB_BUILD_OUT: arch/x86/boot/bzImage, .config, the
    /// modules under lib/modules; $PLUMB_COMMIT is the commit and
    /// $PLUMB_CONFIG_ENABLE the Kconfig symbols the points need [default:
    /// make defconfig where there is no .config, scripts/config --enable
    /// each symbol, make olddefconfig bzImage modules, modules_install into
    /// $PLUMB_BUILD_OUT].
    #[arg(long, value_name = "CMD", requires = "tree")]
    pub build: Option<String>,
    /// With --tree: the kernel --build leaves in the tree (a bzImage, or a
    /// .deb package), booted instead of a build directory in
    /// $PLUMB_BUILD_OUT.
    #[arg(long, value_name = "PATH", requires = "build")]
    pub image: Option<std::path::PathBuf>,
    /// With --tree and --lab-class: the directory each commit's kernel is
    /// put in for the agents to boot, a path they see as this host does
    /// (a shared file system); emptied of them at the end.
    #[arg(long, value_name = "DIR", requires_all = ["tree", "lab_class"])]
    pub builds: Option<std::path::PathBuf>,
    /// A significant change larger than this percent is bad.
    #[arg(long, default_value = "5", value_parser = percent, value_name = "PERCENT")]
    pub threshold: f64,
    /// The change looked for.
    #[arg(long, value_enum, default_value = "worse")]
    pub change: ChangeArg,
    /// Do not keep the steps' runs.
    #[arg(long)]
    pub no_store: bool,
    /// Spread each step's images over the lab's agents of this class (--db
    /// the lab's PostgreSQL, docs/lab.md): several images of the range at
    /// once, each booted beside the good one by its agent, so that every
    /// comparison stays on one machine. Every run is stored in the lab.
    /// With --tree, each commit git picks is built here and booted beside
    /// the good commit by an agent (with --builds).
    #[arg(long, value_name = "CLASS", value_parser = label, conflicts_with = "no_store")]
    pub lab_class: Option<String>,
    /// Images tested at once with --lab-class [default: the class's agents
    /// seen in the last two minutes]; a tree's commits are one at a time,
    /// as git bisect picks them.
    #[arg(long, value_name = "N", requires = "lab_class", conflicts_with = "tree", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub parallel: Option<u32>,
    #[command(flatten)]
    pub boot: BootArgs,
    #[command(flatten)]
    pub verdict: VerdictArgs,
    #[command(flatten)]
    pub decide: DecideArgs,
    #[command(flatten)]
    pub db: DbArgs,
}

fn alpha(s: &str) -> Result<f64, String> {
    s.parse::<f64>()
        .ok()
        .filter(|a| *a > 0.0 && *a < 0.5)
        .ok_or_else(|| {
            format!(
                "'{s}' is not a significance level; use a number like 0.05 (above 0, below 0.5)"
            )
        })
}

fn percent(s: &str) -> Result<f64, String> {
    s.trim_end_matches('%')
        .parse::<f64>()
        .ok()
        .filter(|p| (0.0..100.0).contains(p))
        .map(|p| p / 100.0)
        .ok_or_else(|| format!("'{s}' is not a percentage; use a number like 2 or 2.5 (0 to 100)"))
}

mod workload;

/// The label new runs are stored under: `--label`, or the release of the
/// kernel they ran on.
pub fn label_or_kernel(label: Option<&str>) -> String {
    label.map_or_else(plumb_sys::proc::kernel_release, str::to_string)
}
pub use workload::RunCommand;

fn size(s: &str) -> Result<u64, String> {
    plumb_spec::parse_size(s).map_err(|e| e.to_string())
}
fn rate(s: &str) -> Result<u64, String> {
    plumb_spec::parse_rate(s).map_err(|e| e.to_string())
}
fn duration(s: &str) -> Result<u64, String> {
    plumb_spec::parse_duration(s).map_err(|e| e.to_string())
}
/// Where the server end is: the flags `run` and `sweep` share.
#[derive(Args, Debug, Clone)]
pub struct ServerArgs {
    /// A `plumb serve` to test against, HOST[:PORT], or ssh://[USER@]HOST[:SSHPORT]
    /// to have plumb start one there over ssh; without it an embedded server
    /// runs on loopback.
    #[arg(long, value_name = "HOST[:PORT]")]
    pub server: Option<String>,
    /// The pre-shared key of a `plumb serve --psk-file`.
    #[arg(long, value_name = "FILE")]
    pub psk_file: Option<std::path::PathBuf>,
    /// With --server ssh://: the command that reaches the far host
    /// [default: $PLUMB_SSH_COMMAND, else ssh]; split at spaces.
    #[arg(long, value_name = "COMMAND")]
    pub ssh_command: Option<String>,
    /// With --server ssh://: the far host's address for the test's
    /// connections, when ssh reaches it over another network.
    #[arg(long, value_name = "ADDR")]
    pub server_address: Option<String>,
    /// With --server ssh://: copy this plumb to the far host although it is
    /// not a static build (the far host has the same C library).
    #[arg(long)]
    pub ssh_copy_dynamic: bool,
}

impl ServerArgs {
    /// No server flag given: the embedded server.
    pub fn none() -> ServerArgs {
        ServerArgs {
            server: None,
            psk_file: None,
            ssh_command: None,
            server_address: None,
            ssh_copy_dynamic: false,
        }
    }
}

#[derive(Args, Debug)]
pub struct CommonArgs {
    /// Refuse to start while another plumb run measures on this host
    /// (without it, both runs carry a warning in their records).
    #[arg(long)]
    pub exclusive: bool,
    /// Print the test point's summary line, spec key and spec, the label,
    /// the server end and the iterations, and stop: nothing is measured,
    /// stored or set (with --json, as one JSON document).
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub profile: ProfileArgs,
    /// Use IPv4 (the default).
    #[arg(short = '4', long = "ipv4", conflicts_with = "ipv6")]
    pub ipv4: bool,
    /// Use IPv6.
    #[arg(short = '6', long = "ipv6")]
    pub ipv6: bool,
    #[command(flatten)]
    pub far: ServerArgs,
    /// What this run is compared as [default: the kernel release].
    #[arg(long, value_parser = label)]
    pub label: Option<String>,
    /// Print the run record as JSON (schema plumb.run/1) instead of a summary.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub repeat: RepeatArgs,
    #[command(flatten)]
    pub db: DbArgs,
    /// Do not keep the run in the result database.
    #[arg(long)]
    pub no_store: bool,
    /// Set a host knob for the run and restore it afterwards, KNOB=VALUE:
    /// sysctl:net.core.rmem_max=8388608, rps:lo=3, mtu:IFACE=1500,
    /// offload:IFACE:gro=off, gso_max_size:IFACE=65536, qdisc:IFACE=fq maxrate 1gbit
    /// (KNOB@NETNS acts in a namespace). Repeatable.
    #[arg(long = "knob", value_parser = knob_setting, value_name = "KNOB=VALUE")]
    pub knobs: Vec<plumb_run::knob::Setting>,
    /// Set a knob on the server end's host for the run, KNOB=VALUE as for
    /// --knob: a `plumb serve --allow-knobs --psk-file K` sets it for each
    /// session (the client must give the key), a server started over ssh://
    /// always may; under --topology veth it acts in the server's namespace,
    /// and with the embedded server on this host it is a --knob. Repeatable.
    #[arg(long = "server-knob", value_parser = knob_setting, value_name = "KNOB=VALUE")]
    pub server_knobs: Vec<plumb_run::knob::Setting>,
    #[command(flatten)]
    pub vm: VmArgs,
    /// Do not run here: submit this run to the lab in the PostgreSQL
    /// database of --db, for an agent of CLASS to make (see `plumb lab`),
    /// and print the job set's id.
    #[arg(long, value_name = "CLASS", value_parser = label)]
    pub lab: Option<String>,
}

/// A kernel to boot in a virtual machine and run the test in.
#[derive(Args, Debug, Clone)]
pub struct VmArgs {
    /// Boot this kernel in a virtual machine (QEMU) and run both ends
    /// inside it, with the knobs set there: a kernel image (bzImage), a
    /// linux-image .deb (its modules are taken from it), or a kernel build
    /// directory with its modules installed under it. Its runs are labelled
    /// by the guest's kernel release, or LABEL in LABEL=IMAGE. `sweep`
    /// takes it more than once and runs every point under each kernel.
    #[arg(long, value_parser = kernel, value_name = "[LABEL=]IMAGE")]
    pub kernel: Vec<String>,
    #[command(flatten)]
    pub boot: BootArgs,
}

/// How a guest is booted.
#[derive(Args, Debug, Clone)]
pub struct BootArgs {
    /// The guest's accelerator: auto (KVM where a boot shows it works, TCG
    /// otherwise), kvm or tcg.
    #[arg(long, default_value = "auto", value_name = "ACCEL")]
    pub accel: plumb_run::vm::Accel,
    /// The guest's vCPUs.
    #[arg(long, default_value_t = plumb_run::vm::DEFAULT_VCPUS, value_name = "N")]
    pub vcpus: u32,
    /// The guest's memory in MiB.
    #[arg(long = "vm-memory", default_value_t = plumb_run::vm::DEFAULT_MEMORY_MIB, value_name = "MIB")]
    pub vm_memory: u32,
    /// How long a guest may take to boot to plumb before it counts as hung
    /// and is killed.
    #[arg(long, default_value = "120s", value_parser = duration, value_name = "DURATION")]
    pub boot_timeout: u64,
    /// More words for the guest kernel's command line (mitigations=off,
    /// isolcpus=1); the guest's environment records the whole line.
    #[arg(long, value_name = "WORDS", allow_hyphen_values = true)]
    pub kernel_append: Option<String>,
    /// Run each end in a guest of its own, the two joined by a virtio-net
    /// link (client 198.18.0.1, server 198.18.0.2), so that a NIC driver,
    /// its interrupts and GRO are on the path.
    #[arg(long)]
    pub vm_link: bool,
}

impl BootArgs {
    pub fn options(&self) -> Result<plumb_run::vm::VmOptions, String> {
        if self.vcpus == 0 {
            return Err("--vcpus: a guest needs at least 1 vCPU".into());
        }
        if self.vm_memory < 256 {
            return Err(format!(
                "--vm-memory: {} MiB is too little for a guest; give at least 256",
                self.vm_memory
            ));
        }
        let mut vm = plumb_run::vm::VmOptions {
            accel: self.accel,
            vcpus: self.vcpus,
            memory_mib: self.vm_memory,
            boot_timeout: std::time::Duration::from_millis(self.boot_timeout),
            append: self.kernel_append.clone().unwrap_or_default(),
            interrupted: crate::interrupt_flag(),
            link: self.vm_link,
            progress: None,
        };
        crate::cmd::guest::watch(&mut vm);
        Ok(vm)
    }
}

/// A label that runs are stored under, as the label rule allows.
fn label(s: &str) -> Result<String, String> {
    plumb_spec::check_label(s).map_err(|e| e.0)?;
    Ok(s.to_string())
}

/// A `[LABEL=]IMAGE` value whose label, where it has one, keeps to the
/// label rule.
fn kernel(s: &str) -> Result<String, String> {
    if let (Some(l), _) = kernel_arg(s) {
        label(&l)?;
    }
    Ok(s.to_string())
}

/// A `--kernel` value: the label of LABEL=IMAGE, and the image.
pub type KernelArg = (Option<String>, std::path::PathBuf);

/// LABEL=IMAGE or IMAGE; a path that exists is an image even if it holds
/// '='.
pub fn kernel_arg(k: &str) -> KernelArg {
    match k.split_once('=') {
        Some((label, image)) if !std::path::Path::new(k).exists() && !label.is_empty() => {
            (Some(label.to_string()), image.into())
        }
        _ => (None, k.into()),
    }
}

impl VmArgs {
    /// The kernels asked for, each with its label where one is given.
    pub fn kernels(&self) -> Vec<KernelArg> {
        self.kernel.iter().map(|k| kernel_arg(k)).collect()
    }

    /// How to boot the kernels, when --kernel asks for any.
    pub fn options(&self) -> Result<Option<plumb_run::vm::VmOptions>, String> {
        if self.kernel.is_empty() {
            return Ok(None);
        }
        self.boot.options().map(Some)
    }
}

#[derive(Subcommand, Debug)]
pub enum TopologyCommand {
    /// Remove the namespaces of --topology veth runs whose plumb process is
    /// gone (with --all, also those of running ones).
    Down(TopologyDownArgs),
}

#[derive(Args, Debug)]
pub struct TopologyDownArgs {
    #[arg(long)]
    pub all: bool,
}

#[derive(Args, Debug, Clone)]
pub struct DbArgs {
    /// The result database: an SQLite file, or a PostgreSQL database as
    /// postgres://USER@HOST[:PORT]/DB, with options after a ? joined by &:
    /// sslmode=MODE and sslrootcert=FILE (password from PGPASSWORD or
    /// ~/.pgpass; MODE prefer, the default, uses TLS where the server offers
    /// it, require insists on it, verify-ca also checks the server's
    /// certificate against the CA in FILE, else ~/.postgresql/root.crt,
    /// verify-full its host name too, and disable never uses TLS) [default:
    /// $PLUMB_DB, else $XDG_DATA_HOME/plumb/plumb.db].
    #[arg(long, value_name = "PATH")]
    pub db: Option<std::path::PathBuf>,
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on for control connections: ADDR[:PORT]
    /// [default: [::]:12867, which takes IPv4 and IPv6 clients].
    #[arg(long, value_name = "ADDR[:PORT]")]
    pub listen: Option<String>,
    /// Serve one test, then exit.
    #[arg(long)]
    pub once: bool,
    /// Ports for data connections, for firewalls: 50000-50099 [default: any].
    #[arg(long, value_parser = port_range, value_name = "LOW-HIGH")]
    pub data_ports: Option<(u16, u16)>,
    /// Require clients to prove they hold the pre-shared key in FILE.
    #[arg(long, value_name = "FILE")]
    pub psk_file: Option<std::path::PathBuf>,
    /// Refuse tests with more flows than this.
    #[arg(long, value_name = "N")]
    pub max_flows: Option<u32>,
    /// Refuse tests whose window or warm-up is longer than this: 60s, 10m.
    #[arg(long, value_parser = duration, value_name = "TIME")]
    pub max_duration: Option<u64>,
    /// Refuse socket buffers and message sizes above this: 4M.
    #[arg(long, value_parser = size, value_name = "SIZE")]
    pub max_buffer: Option<u64>,
    /// Refuse tests that would send faster than this in total: 1G. Streams
    /// must then be paced (--pacing-rate).
    #[arg(long, value_parser = rate, value_name = "RATE")]
    pub max_rate: Option<u64>,
    /// Accept control connections only from this block: 10.0.0.0/8,
    /// 2001:db8::/32 (repeatable) [default: from anywhere].
    #[arg(long, value_name = "CIDR")]
    pub allow: Vec<String>,
    /// Tests run at the same time; more clients are told the server is busy.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64), value_name = "N")]
    pub concurrent: u32,
    /// Log lines on stderr as text or as one JSON object each.
    #[arg(long, value_enum, default_value = "text", value_name = "FORMAT")]
    pub log: LogArg,
    /// The far end of `plumb run --server ssh://`: the key comes on stdin,
    /// the port goes to stdout, and the server ends with stdin.
    #[arg(long, hide = true, conflicts_with_all = ["once", "psk_file"])]
    pub ssh_session: bool,
    /// Set the host knobs a client asks for with --server-knob, for its
    /// session only, journalled and restored like local knobs (needs
    /// --psk-file: only a client that proves the key may change this host).
    #[arg(long, requires = "psk_file")]
    pub allow_knobs: bool,
    /// The embedded server on the client's own host and namespace: its
    /// environment is the client's, so it sends none.
    #[arg(long, hide = true)]
    pub same_host: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum LogArg {
    Text,
    Json,
}

fn port_range(s: &str) -> Result<(u16, u16), String> {
    let bad = || format!("'{s}' is not a port range; use LOW-HIGH like 50000-50099");
    let (lo, hi) = s.split_once('-').unwrap_or((s, s));
    let lo: u16 = lo.trim().parse().map_err(|_| bad())?;
    let hi: u16 = hi.trim().parse().map_err(|_| bad())?;
    if lo == 0 || lo > hi {
        return Err(bad());
    }
    Ok((lo, hi))
}

/// The command line.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    values_may_start_with_a_hyphen(Cli::command())
}

/// Every flag that takes a value takes the next word as it, so `--sndbuf -5`
/// is refused by the flag's own parser, naming the flag, rather than read
/// as an unknown flag `-5`.
fn values_may_start_with_a_hyphen(cmd: clap::Command) -> clap::Command {
    let cmd = cmd.mut_args(|a| {
        if a.get_long().is_some() && a.get_action().takes_values() {
            a.allow_hyphen_values(true)
        } else {
            a
        }
    });
    let subcommands: Vec<String> = cmd
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    subcommands.iter().fold(cmd, |cmd, name| {
        cmd.mut_subcommand(name, values_may_start_with_a_hyphen)
    })
}

/// Parses the process's arguments; on a bad one, says so on one line that
/// names the flag and returns the exit status.
pub fn parse() -> Result<Cli, i32> {
    use clap::FromArgMatches;
    command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m))
        .map_err(|e| {
            use clap::error::{ContextKind, ContextValue, ErrorKind};
            let arg = match e.get(ContextKind::InvalidArg) {
                Some(ContextValue::String(a)) => a.split([' ', '=']).next().map(str::to_string),
                _ => None,
            };
            let value = match e.get(ContextKind::InvalidValue) {
                Some(ContextValue::String(v)) => Some(v.clone()),
                _ => None,
            };
            let why = match (e.kind(), e.get(ContextKind::ValidValue)) {
                (ErrorKind::InvalidValue, Some(ContextValue::Strings(valid))) => {
                    Some(format!("use {}", valid.join(", ")))
                }
                (ErrorKind::ValueValidation, _) => {
                    std::error::Error::source(&e).map(|s| s.to_string())
                }
                _ => None,
            };
            match (arg, value, why) {
                (Some(flag), Some(value), why) if value.is_empty() => {
                    match why.filter(|w| w != "use ") {
                        Some(why) => eprintln!("plumb: error: {flag}: needs a value; {why}"),
                        None => eprintln!("plumb: error: {flag}: needs a value"),
                    }
                    2
                }
                (Some(flag), Some(value), Some(why)) if why.contains(&format!("'{value}'")) => {
                    eprintln!("plumb: error: {flag}: {why}");
                    2
                }
                (Some(flag), Some(value), Some(why)) => {
                    eprintln!("plumb: error: {flag}: '{value}' is not valid; {why}");
                    2
                }
                _ => {
                    let _ = e.print();
                    e.exit_code()
                }
            }
        })
}

/// Kernel profiles of both ends (perf_event_open on every CPU, root).
#[derive(Args, Debug, Clone)]
pub struct ProfileArgs {
    /// Sample every CPU over each window and name the functions each end's
    /// CPU time went to (`plumb show --profile`, `plumb compare --profile`).
    #[arg(long)]
    pub profile: bool,
    /// Samples per second and CPU of --profile.
    #[arg(long, value_name = "HZ", default_value_t = 997, requires = "profile")]
    pub profile_freq: u64,
    /// Data pages of each CPU's sample ring of --profile (a power of two).
    #[arg(long, value_name = "PAGES", default_value_t = 64, requires = "profile")]
    pub profile_ring: u32,
    /// Refuse to run where the kernel's tracepoints (retransmissions, drops
    /// by reason, resets; perf_event_open on every CPU) cannot be counted,
    /// rather than go on without them.
    #[arg(long)]
    pub trace: bool,
    /// Read every ACK of each end's own flows over each window
    /// (tcp:tcp_probe, filtered in the kernel by the test's port): the
    /// smoothed RTT, congestion window, the peer's window and the data in
    /// flight at each ACK, as min, median, p99 and max. A thread per end
    /// reads the records (its cost is in the record).
    #[arg(long)]
    pub tcp_probe: bool,
}

impl ProfileArgs {
    /// What each end is asked to read beyond the defaults, checked.
    pub fn observe(&self) -> Result<plumb_samples::Observe, String> {
        if let Some(why) = self
            .trace
            .then(plumb_engine::probe::tracepoint_refusal)
            .flatten()
        {
            return Err(format!("--trace: {why}"));
        }
        if let Some(why) = self.tcp_probe.then(plumb_engine::acks::refusal).flatten() {
            return Err(format!("--tcp-probe: {why}"));
        }
        Ok(plumb_samples::Observe {
            profile: self.profile()?,
            tcp_probe: self.tcp_probe,
        })
    }

    /// What --profile asks of each end, checked; None without it.
    fn profile(&self) -> Result<Option<plumb_samples::ProfileAsk>, String> {
        if !self.profile {
            return Ok(None);
        }
        if !(1..=100_000).contains(&self.profile_freq) {
            return Err(format!(
                "--profile-freq {}: give 1 to 100000 samples per second",
                self.profile_freq
            ));
        }
        if !self.profile_ring.is_power_of_two() || self.profile_ring > 4096 {
            return Err(format!(
                "--profile-ring {}: give a power of two up to 4096 pages",
                self.profile_ring
            ));
        }
        if let Some(why) = plumb_sys::perf::refusal() {
            return Err(why);
        }
        Ok(Some(plumb_samples::ProfileAsk {
            freq_hz: self.profile_freq,
            ring_pages: self.profile_ring,
        }))
    }
}

#[derive(Subcommand, Debug)]
pub enum DbCommand {
    /// Copy every run (with its environment and experiment tag) from one
    /// result database to another; runs already there (by their unique id)
    /// are skipped, so copying again adds only what is new.
    Copy(CopyArgs),
}

#[derive(Args, Debug)]
pub struct CopyArgs {
    /// The database to read.
    pub from: std::path::PathBuf,
    /// The database to write (created when missing).
    pub to: std::path::PathBuf,
}

#[derive(Args, Debug)]
pub struct HistoryArgs {
    /// The test point, by its spec key (`plumb list --format json` gives it).
    #[arg(long, value_name = "KEY")]
    pub spec_key: Option<String>,
    /// The test point of an experiment, with --point.
    #[arg(long, value_name = "NAME", requires = "point")]
    pub experiment: Option<String>,
    /// The point's id in the experiment (`sndbuf=8K,variant=rps`).
    #[arg(long, value_name = "ID", requires = "experiment")]
    pub point: Option<String>,
    /// The runs in the order of these labels (comma-separated, e.g.
    /// 6.5,6.6-rc1,6.6-rc2); runs under other labels are left out.
    #[arg(long, value_delimiter = ',', value_name = "LABELS")]
    pub labels: Vec<String>,
    /// Print only the changes, one line each (nothing when none): for cron.
    #[arg(long)]
    pub changes: bool,
    /// A change is accepted when its permutation p-value is at most this.
    #[arg(long, default_value = "0.05", value_parser = alpha, value_name = "P")]
    pub max_p: f64,
    /// Changes of the mean smaller than this percent are not reported.
    #[arg(long, default_value = "0", value_parser = percent, value_name = "PERCENT")]
    pub min_change: f64,
    /// mail writes a regression report per change, for a mailing list.
    #[arg(long, default_value = "terminal", value_parser = formats(of::HISTORY))]
    pub format: Format,
    /// Also write the series with its intervals and change points to FILE
    /// as an HTML page.
    #[arg(long, value_name = "FILE")]
    pub html: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub filter: FilterArgs,
    #[command(flatten)]
    pub db: DbArgs,
}
