//! `plumb bisect --tree DIR`: git bisects the commits of a kernel tree
//! between --good and --bad, and plumb answers each commit git checks out:
//! it builds it, boots it, and checks its figures against the good commit's.
//! A commit that does not build or boot is a skip. The tree is put back on
//! its branch (`git bisect reset`) however the bisection ends.

use super::{table, Bench, Row, Step, SKIP};
use crate::Failure;
use plumb_compare::{Bisect, Side};
use plumb_run::vm::Guest;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;

/// The build when --build gives none: the tree's own .config (defconfig
/// where it has none) with what the points need merged in, and the
/// build directory plumb boots laid out in $PLUMB_BUILD_OUT.
/// docs/bisect.md shows it.
const DEFAULT_BUILD: &str = r#"set -e
[ -f .config ] || make defconfig
for symbol in $PLUMB_CONFIG_ENABLE; do scripts/config --enable "$symbol"; done
make olddefconfig
make -j"$(nproc)" bzImage
mkdir -p "$PLUMB_BUILD_OUT/arch/x86/boot"
cp arch/x86/boot/bzImage "$PLUMB_BUILD_OUT/arch/x86/boot/bzImage"
cp .config "$PLUMB_BUILD_OUT/.config"
if grep -q '^CONFIG_MODULES=y' .config; then
  make -j"$(nproc)" modules
  make modules_install INSTALL_MOD_PATH="$PLUMB_BUILD_OUT"
fi
"#;

/// The lines of a failed build's output shown on stderr.
const BUILD_TAIL: usize = 20;

/// One commit as a step names it.
#[derive(Clone)]
struct Commit {
    sha: String,
    /// git's abbreviation, as in the label `bisect-SHORT`.
    short: String,
    subject: String,
}

impl Commit {
    fn label(&self) -> String {
        format!("bisect-{}", self.short)
    }

    /// The table's first column: the abbreviation and the subject, cut
    /// short enough to leave the row readable.
    fn shown(&self) -> String {
        const MAX: usize = 40;
        let subject: String = if self.subject.chars().count() > MAX {
            let cut: String = self.subject.chars().take(MAX - 1).collect();
            format!("{cut}…")
        } else {
            self.subject.clone()
        };
        format!("{} {subject}", self.short)
    }
}

/// git in the tree, in the C locale (its words are plumb's to read).
struct Git {
    dir: PathBuf,
}

impl Git {
    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new("git");
        c.arg("-C").arg(&self.dir).args(args).env("LC_ALL", "C");
        c.stdin(Stdio::null());
        c
    }

    fn output(&self, args: &[&str]) -> Result<std::process::Output, Failure> {
        self.command(args).output().map_err(|e| {
            Failure::usage(format!(
                "--tree {}: cannot run git ({e}); install the git package",
                self.dir.display()
            ))
        })
    }

    /// What a git command that must succeed prints, trimmed.
    fn read(&self, args: &[&str]) -> Result<String, Failure> {
        let out = self.output(args)?;
        if !out.status.success() {
            return Err(self.failed(args, &out));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    fn failed(&self, args: &[&str], out: &std::process::Output) -> Failure {
        let err = String::from_utf8_lossy(&out.stderr);
        Failure::usage(format!(
            "--tree {}: git {} failed: {}",
            self.dir.display(),
            args.join(" "),
            err.lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
                .trim()
        ))
    }

    /// REV of --good or --bad as a full commit id.
    fn commit(&self, rev: &str, flag: &str) -> Result<Commit, Failure> {
        let out = self.output(&[
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            &format!("{rev}^{{commit}}"),
        ])?;
        if !out.status.success() {
            return Err(Failure::usage(format!(
                "{flag} {rev}: not a commit of {}",
                self.dir.display()
            )));
        }
        self.describe(String::from_utf8_lossy(&out.stdout).trim())
    }

    fn describe(&self, sha: &str) -> Result<Commit, Failure> {
        let line = self.read(&["log", "-1", "--format=%h %s", sha])?;
        let (short, subject) = line.split_once(' ').unwrap_or((&line, ""));
        Ok(Commit {
            sha: sha.to_string(),
            short: short.to_string(),
            subject: subject.to_string(),
        })
    }

    /// A path in the git directory, as git names it.
    fn path(&self, name: &str) -> Result<PathBuf, Failure> {
        Ok(self
            .dir
            .join(self.read(&["rev-parse", "--git-path", name])?))
    }

    /// Runs a bisect command, passing on what git says about it.
    fn bisect(&self, args: &[&str]) -> Result<std::process::Output, Failure> {
        let out = self.output(&[&["bisect"][..], args].concat())?;
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            eprintln!("git: {line}");
        }
        Ok(out)
    }
}

/// A `git bisect` under way in the tree; dropping it resets the bisection,
/// which checks out the branch the tree was on. While it lasts, a file of
/// plumb's own in the git directory ([`MARK`]) holds the process's PID, so
/// that a run killed before it could reset (SIGKILL, a lost session) is
/// told from a bisection of the user's, and the next run resets it.
struct Session<'a>(&'a Git);

/// The file in the git directory that says a plumb run holds the bisect.
const MARK: &str = "plumb-bisect";

impl<'a> Session<'a> {
    /// Starts bisecting between `good` and `bad`, marked as plumb's.
    fn start(git: &'a Git, good: &str, bad: &str) -> Result<Session<'a>, Failure> {
        let mark = git.path(MARK)?;
        std::fs::write(&mark, format!("{}\n", std::process::id())).map_err(|e| {
            Failure::usage(format!(
                "--tree {}: cannot write {} ({e})",
                git.dir.display(),
                mark.display()
            ))
        })?;
        let args = ["bisect", "start", bad, good, "--"];
        let failed = match git.output(&args) {
            Ok(out) if out.status.success() => return Ok(Session(git)),
            Ok(out) => git.failed(&args[..2], &out),
            Err(e) => e,
        };
        let _ = std::fs::remove_file(&mark);
        Err(failed)
    }

    /// Ends what a plumb run killed while it bisected left in the tree: the
    /// bisection, its mark and its scratch directory. Refuses a bisection
    /// that is the user's, or that a live plumb run holds.
    fn clear_leftover(git: &Git) -> Result<(), Failure> {
        let shown = git.dir.display();
        let started = git.path("BISECT_START")?;
        let mark = git.path(MARK)?;
        let holder = std::fs::read_to_string(&mark)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok());
        if !started.exists() {
            // A mark without a bisection: a run killed between the two.
            let _ = std::fs::remove_file(&mark);
            return Ok(());
        }
        let Some(pid) = holder else {
            return Err(Failure::usage(format!(
                "--tree {shown}: a git bisect is under way there; end it with git bisect reset first"
            )));
        };
        if plumb_alive(pid) {
            return Err(Failure::usage(format!(
                "--tree {shown}: plumb (pid {pid}) is bisecting there; wait for it or end it"
            )));
        }
        eprintln!(
            "plumb: --tree {shown}: a plumb bisect (pid {pid}) ended without putting the tree \
             back; running git bisect reset"
        );
        let reset = git.output(&["bisect", "reset"])?;
        if !reset.status.success() {
            return Err(git.failed(&["bisect", "reset"], &reset));
        }
        let _ = std::fs::remove_file(&mark);
        let _ = std::fs::remove_dir_all(scratch_dir(pid));
        Ok(())
    }
}

/// Whether process `pid` is a plumb.
fn plumb_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .is_ok_and(|comm| comm.trim_end().starts_with("plumb"))
}

/// The scratch directory (build logs, the modules' staging) of plumb run
/// `pid`'s bisection.
fn scratch_dir(pid: u32) -> PathBuf {
    std::env::temp_dir().join(format!("plumb-bisect-{pid}"))
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        let ok = self
            .0
            .output(&["bisect", "reset"])
            .is_ok_and(|o| o.status.success());
        if !ok {
            eprintln!(
                "plumb: --tree {}: git bisect reset failed; run it there to put the tree back",
                self.0.dir.display()
            );
        }
        if let Ok(mark) = self.0.path(MARK) {
            let _ = std::fs::remove_file(mark);
        }
    }
}

/// Where the bisection stands after an answer, as git's refs say.
enum State {
    /// git checked out this commit to test next.
    Next(String),
    Done(End),
}

enum End {
    /// refs/bisect/bad is the first bad commit.
    FirstBad(String),
    /// Only skipped commits are left before refs/bisect/bad (the first
    /// field): the first bad is one of them or it.
    Among(String, Vec<String>),
}

fn state(git: &Git) -> Result<State, Failure> {
    let bad = git.read(&["rev-parse", "refs/bisect/bad"])?;
    let left = git.read(&[
        "rev-list",
        "refs/bisect/bad",
        "--not",
        "--glob=refs/bisect/good-*",
    ])?;
    let left: Vec<String> = left.lines().map(str::to_string).collect();
    if left == [bad.clone()] {
        return Ok(State::Done(End::FirstBad(bad)));
    }
    let skipped = git.read(&[
        "for-each-ref",
        "--format=%(objectname)",
        "refs/bisect/skip-*",
    ])?;
    let skipped: Vec<&str> = skipped.lines().collect();
    if left
        .iter()
        .all(|c| *c == bad || skipped.contains(&c.as_str()))
    {
        return Ok(State::Done(End::Among(bad, left)));
    }
    Ok(State::Next(git.read(&["rev-parse", "HEAD"])?))
}

/// A directory of plumb's for the builds' output, removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `script` run as a build: `sh -c` in the tree, told where to leave the
/// kernel, which commit it is, and what the configuration needs.
fn build_command(script: &str, tree: &Path, out: &Path, commit: &str, enable: &str) -> Command {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(script)
        .current_dir(tree)
        .env("PLUMB_BUILD_OUT", out)
        .env("PLUMB_COMMIT", commit)
        .env("PLUMB_CONFIG_ENABLE", enable);
    c
}

/// One bisection over a tree: how each commit is built and measured.
struct Bisection<'a> {
    bench: Bench<'a>,
    git: &'a Git,
    build: String,
    /// `--image`: the kernel the build leaves in the tree, else a build
    /// directory in `$PLUMB_BUILD_OUT`.
    image: Option<PathBuf>,
    /// `$PLUMB_CONFIG_ENABLE`: the Kconfig symbols the points need.
    enable: String,
    scratch: Scratch,
    /// With --lab-class: the commits are measured by the lab's agents.
    lab: Option<OnLab>,
}

/// A tree's bisection whose kernels the lab's agents boot: each commit is
/// built here, put where they see it (--builds), and booted beside the good
/// commit by one agent, as `--lab-class` does for images.
struct OnLab {
    lab: plumb_store::lab::Lab,
    store: plumb_store::Store,
    class: String,
    /// The experiment file, as the sets hold it.
    file: String,
    builds: PathBuf,
    /// The kernels put in `builds`, taken out again at the end.
    made: Vec<PathBuf>,
}

impl Drop for OnLab {
    fn drop(&mut self) {
        for m in &self.made {
            let _ = std::fs::remove_dir_all(m);
        }
    }
}

/// What every commit is measured against.
enum Reference {
    /// The good commit's runs, made here.
    Here(Side),
    /// The good commit's kernel, booted by an agent beside each commit.
    Lab { label: String, kernel: PathBuf },
}

impl Bisection<'_> {
    fn interrupted(&self) -> bool {
        self.bench.vm.interrupted.load(Ordering::Relaxed)
    }

    /// The good commit, checked out, as every other is measured against:
    /// its runs here, or its kernel for the agents.
    fn reference(&mut self, c: &Commit) -> Result<Reference, Failure> {
        if self.lab.is_none() {
            return self.measure(c, 1).map(Reference::Here);
        }
        eprintln!("step 1: building {}", c.shown());
        let kernel = self.put(c)?;
        Ok(Reference::Lab {
            label: c.label(),
            kernel,
        })
    }

    /// What commit `c`, checked out, answers against the good one.
    fn step(&mut self, c: &Commit, order: usize, reference: &Reference) -> Result<Step, Failure> {
        let (label, good) = match reference {
            Reference::Here(side) => {
                let measured = self.measure(c, order);
                return self.bench.judge(side, measured, order);
            }
            Reference::Lab { label, kernel } => (label, kernel),
        };
        eprintln!("step {order}: building {}", c.shown());
        let kernel = match self.put(c) {
            Ok(k) => k,
            Err(f) => {
                return self
                    .bench
                    .judge(&Side::new(label, vec![], None), Err(f), order)
            }
        };
        let Bisection { bench, lab, .. } = self;
        let on = lab.as_mut().expect("a lab's bisection");
        let candidate = c.label();
        let id = super::lab::submit_beside(
            &mut on.lab,
            bench,
            &on.class,
            &on.file,
            (label, &good.display().to_string()),
            (&candidate, &kernel.display().to_string()),
        )?;
        eprintln!(
            "step {order}: {} beside the good commit: set {id}",
            c.shown()
        );
        match super::lab::measured(&mut on.lab, &on.store, id, label, &candidate)? {
            Ok((good, measured)) => bench.judge(&good, Ok(measured), order),
            Err(why) => Ok(Step {
                order,
                answer: Bisect::Skip,
                said: why,
                emulated: false,
                more: None,
            }),
        }
    }

    /// Builds the commit checked out into --builds for the agents: its
    /// kernel's path there, refused as a skip where it is none.
    fn put(&mut self, c: &Commit) -> Result<PathBuf, Failure> {
        let on = self.lab.as_mut().expect("a lab's bisection");
        let out = on.builds.join(c.label());
        on.made.push(out.clone());
        let kernel = self.build(c, &out)?;
        self.open(c, &kernel)?;
        Ok(kernel)
    }

    /// Builds the commit checked out and measures it: a failure with
    /// [`SKIP`] when it does not build, leaves no kernel, or does not boot.
    fn measure(&mut self, c: &Commit, order: usize) -> Result<Side, Failure> {
        eprintln!("step {order}: building {}", c.shown());
        let out = self.scratch.0.join(&c.short);
        let kernel = self.build(c, &out);
        let opened = kernel.and_then(|k| self.open(c, &k));
        // The guest holds the image and modules it needs in memory.
        let _ = std::fs::remove_dir_all(&out);
        let guest = opened?;
        eprintln!("step {order}: {} ({}) boots", c.short, guest.label());
        self.bench.measure(&guest)
    }

    /// The guest of the kernel built for `c`; one that is none is a skip.
    fn open(&self, c: &Commit, kernel: &Path) -> Result<Guest, Failure> {
        Guest::open(kernel, Some(c.label()), &self.bench.vm, &self.bench.specs()).map_err(|e| {
            match e.fault {
                plumb_run::vm::Fault::Interrupted => super::super::run::guest_failure(e),
                _ => Failure {
                    code: SKIP,
                    message: format!("no kernel to boot: {}", e.message),
                },
            }
        })
    }

    /// Runs the build command for `c` with `out` as its $PLUMB_BUILD_OUT
    /// and returns the kernel it left: `out` itself, or --image copied
    /// there. Its output goes to a log, whose end is shown when it fails.
    fn build(&self, c: &Commit, out: &Path) -> Result<PathBuf, Failure> {
        use std::os::unix::process::CommandExt;
        let log_path = self.scratch.0.join(format!("build-{}.log", c.short));
        let _ = std::fs::remove_dir_all(out);
        let log = std::fs::create_dir_all(out)
            .and_then(|_| std::fs::File::create(&log_path))
            .map_err(|e| Failure::usage(format!("{}: {e}", out.display())))?;
        let err = log
            .try_clone()
            .map_err(|e| Failure::usage(format!("{}: {e}", log_path.display())))?;
        let mut child = build_command(&self.build, &self.git.dir, out, &c.sha, &self.enable)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            // Its own group, so that an interrupt ends make and every
            // compiler under it.
            .process_group(0)
            .spawn()
            .map_err(|e| Failure::usage(format!("--build: cannot run sh ({e})")))?;
        let status = loop {
            if self.interrupted() {
                let _ = plumb_sys::process::terminate_group(child.id());
                let _ = child.wait();
                return Err(Failure {
                    code: crate::exit::INTERRUPTED,
                    message: format!("interrupted while building {}", c.short),
                });
            }
            match child.try_wait() {
                Ok(Some(s)) => break s,
                Ok(None) => std::thread::sleep(std::time::Duration::from_millis(100)),
                Err(e) => return Err(Failure::usage(format!("--build: {e}"))),
            }
        };
        if !status.success() {
            let text = std::fs::read_to_string(&log_path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            for l in &lines[lines.len().saturating_sub(BUILD_TAIL)..] {
                eprintln!("  | {l}");
            }
            let why = status
                .code()
                .map_or_else(|| "killed by a signal".to_string(), |c| format!("exit {c}"));
            return Err(Failure {
                code: SKIP,
                message: format!("build failed ({why})"),
            });
        }
        let Some(image) = &self.image else {
            return Ok(out.to_path_buf());
        };
        // The tree's file is the next commit's build's to overwrite.
        let kernel = out.join("kernel");
        std::fs::copy(self.git.dir.join(image), &kernel).map_err(|e| Failure {
            code: SKIP,
            message: format!("the build left no {} ({e})", image.display()),
        })?;
        Ok(kernel)
    }

    fn checkout(&self, c: &Commit) -> Result<(), Failure> {
        self.git
            .read(&["checkout", "--quiet", "--detach", &c.sha])
            .map(drop)
    }

    /// Stops at an interrupt between steps (a guest's own run stops at one
    /// and says so).
    fn go_on(&self) -> Result<(), Failure> {
        if self.interrupted() {
            return Err(Failure {
                code: crate::exit::INTERRUPTED,
                message: "interrupted".into(),
            });
        }
        Ok(())
    }
}

pub(super) fn exec(bench: Bench, dir: &Path) -> Result<i32, Failure> {
    let a = bench.a;
    let git = Git {
        dir: dir.to_path_buf(),
    };
    let shown = dir.display();
    let inside = git.output(&["rev-parse", "--is-inside-work-tree"])?;
    if String::from_utf8_lossy(&inside.stdout).trim() != "true" {
        return Err(Failure::usage(format!(
            "--tree {shown}: not a git work tree"
        )));
    }
    Session::clear_leftover(&git)?;
    if !git
        .read(&["status", "--porcelain", "--untracked-files=no"])?
        .is_empty()
    {
        return Err(Failure::usage(format!(
            "--tree {shown}: tracked files have changes; commit or stash them first"
        )));
    }
    let good = git.commit(&a.good, "--good")?;
    let bad = git.commit(&a.bad, "--bad")?;
    if good.sha == bad.sha {
        return Err(Failure::usage(format!(
            "--bad {}: the same commit as --good",
            a.bad
        )));
    }
    let ancestor = git.output(&["merge-base", "--is-ancestor", &good.sha, &bad.sha])?;
    if !ancestor.status.success() {
        return Err(Failure::usage(format!(
            "--good {}: not an ancestor of --bad {}",
            a.good, a.bad
        )));
    }
    // Oldest first, for the table.
    let history: Vec<String> = std::iter::once(good.sha.clone())
        .chain(
            git.read(&[
                "rev-list",
                "--topo-order",
                "--reverse",
                &bad.sha,
                "--not",
                &good.sha,
            ])?
            .lines()
            .map(str::to_string),
        )
        .collect();
    let modules: Vec<&str> = bench
        .specs()
        .iter()
        .flat_map(|s| plumb_run::vm::modules_needed(s))
        .collect();
    let enable = plumb_run::vm::kernel::config_needed(&modules).join(" ");
    let scratch = scratch_dir(std::process::id());
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)
        .map_err(|e| Failure::usage(format!("cannot make {}: {e}", scratch.display())))?;
    let lab = match &a.lab_class {
        Some(class) => Some(on_lab(a, class)?),
        None => None,
    };
    let mut b = Bisection {
        bench,
        git: &git,
        build: a.build.clone().unwrap_or_else(|| DEFAULT_BUILD.to_string()),
        image: a.image.clone(),
        enable,
        scratch: Scratch(scratch),
        lab,
    };

    // What git checks out first is told once good and bad are measured.
    let session = Session::start(&git, &good.sha, &bad.sha)?;
    let mut tested: Vec<(Commit, Step)> = Vec::new();
    // Everything is measured against the good commit: it must build and
    // boot.
    b.checkout(&good)?;
    let reference = b
        .reference(&good)
        .map_err(|f| super::no_reference(format!("--good {} ({})", a.good, good.short), f))?;
    tested.push((good.clone(), Step::reference()));
    b.go_on()?;
    b.checkout(&bad)?;
    let last = b.step(&bad, 2, &reference)?;
    let answer = last.answer;
    let more = last.more_line();
    tested.push((bad.clone(), last));
    if answer != Bisect::Bad {
        drop(session);
        return Err(Failure::usage(format!(
            "--bad {}: {} against --good, not bad: nothing to bisect{more}\n{}",
            a.bad,
            super::answer_word(Some(answer)),
            commit_table(&history, &tested).trim_end()
        )));
    }
    b.go_on()?;
    let mut said = (["bisect", "next"], git.bisect(&["next"])?);
    let mut order = 2;
    let end = loop {
        match state(&git)? {
            State::Next(sha) => {
                // git moved on to no new commit: what it said is why.
                if tested.iter().any(|(c, _)| c.sha == sha) {
                    return Err(git.failed(&said.0, &said.1));
                }
                order += 1;
                let c = git.describe(&sha)?;
                let step = b.step(&c, order, &reference)?;
                let word = super::answer_word(Some(step.answer));
                tested.push((c, step));
                b.go_on()?;
                let out = git.bisect(&[word, &sha])?;
                // Its status is 2 when only skipped commits are left, which
                // the refs say as well.
                if !out.status.success() && !matches!(state(&git)?, State::Done(End::Among(..))) {
                    return Err(git.failed(&["bisect", word], &out));
                }
                said = (["bisect", word], out);
            }
            State::Done(end) => break end,
        }
    };
    // The tree is back on its branch before plumb says how it ended.
    drop(session);
    crate::out!("{}", commit_table(&history, &tested));
    let name = |sha: &str| {
        tested.iter().find(|(c, _)| c.sha == sha).map_or_else(
            || sha[..12.min(sha.len())].to_string(),
            |(c, _)| c.short.clone(),
        )
    };
    match end {
        End::FirstBad(sha) => {
            let c = git.describe(&sha)?;
            crate::outln!("first bad: {} ({}) {}", c.sha, c.label(), c.subject);
            Ok(0)
        }
        End::Among(bad, left) => {
            let skipped: Vec<String> = left
                .iter()
                .rev()
                .filter(|s| **s != bad)
                .map(|s| name(s))
                .collect();
            crate::outln!(
                "cannot tell which is first bad: {} or a skipped commit before it: {}",
                name(&bad),
                skipped.join(", ")
            );
            Ok(SKIP)
        }
    }
}

/// The lab a bisection's commits go to, and where their kernels are put
/// for its agents.
fn on_lab(a: &crate::args::BisectArgs, class: &str) -> Result<OnLab, Failure> {
    let Some(builds) = &a.builds else {
        return Err(Failure::usage(
            "--lab-class: with --tree, give --builds DIR, a directory the agents see at the same path, for the commits' kernels",
        ));
    };
    let builds = std::fs::create_dir_all(builds)
        .and_then(|_| std::fs::canonicalize(builds))
        .map_err(|e| Failure::usage(format!("--builds {}: {e}", builds.display())))?;
    let (lab, store) = super::lab::open(a)?;
    Ok(OnLab {
        lab,
        store,
        class: class.to_string(),
        file: super::lab::points_file(a)?,
        builds,
        made: Vec::new(),
    })
}

/// The commits tested, oldest first.
fn commit_table(history: &[String], tested: &[(Commit, Step)]) -> String {
    let mut rows: Vec<(usize, Row)> = tested
        .iter()
        .map(|(c, s)| {
            let at = history
                .iter()
                .position(|h| *h == c.sha)
                .unwrap_or(usize::MAX);
            (at, (c.shown(), c.label(), Some(s)))
        })
        .collect();
    rows.sort_by_key(|(at, _)| *at);
    let rows: Vec<_> = rows.into_iter().map(|(_, r)| r).collect();
    table("commit", &rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tree whose make and scripts/config do what the kernel's do to
    /// the files the default build reads and leaves, without compiling.
    fn fake_tree(dir: &Path) {
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir.join("scripts")).unwrap();
        std::fs::write(
            dir.join("Makefile"),
            "defconfig:\n\techo CONFIG_MODULES=y > .config\n\
             olddefconfig:\n\techo CONFIG_OLDDEFCONFIG=y >> .config\n\
             bzImage:\n\tmkdir -p arch/x86/boot && echo image > arch/x86/boot/bzImage\n\
             modules:\n\ttouch modules.order\n\
             modules_install:\n\tmkdir -p $(INSTALL_MOD_PATH)/lib/modules/6.0.0/kernel\n",
        )
        .unwrap();
        let config = dir.join("scripts/config");
        std::fs::write(
            &config,
            "#!/bin/sh\n[ \"$1\" = --enable ] && echo \"CONFIG_$2=y\" >> .config\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn the_default_build_merges_the_symbols_and_lays_out_a_build_directory() {
        if Command::new("make").arg("--version").output().is_err() {
            eprintln!("skipped: the_default_build_merges_the_symbols: no make");
            return;
        }
        let base = std::env::temp_dir().join(format!("plumb-default-build-{}", std::process::id()));
        let (tree, out) = (base.join("tree"), base.join("out"));
        let build = |out: &Path| {
            let _ = std::fs::remove_dir_all(out);
            std::fs::create_dir_all(out).unwrap();
            let enable = plumb_run::vm::kernel::config_needed(&["veth", "tcp_bbr"]).join(" ");
            build_command(DEFAULT_BUILD, &tree, out, "0123abcd", &enable)
                .output()
                .unwrap()
        };
        // No .config: defconfig, the symbols merged in, modules installed
        // where plumb looks for them.
        fake_tree(&tree);
        let o = build(&out);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let config = std::fs::read_to_string(out.join(".config")).unwrap();
        for line in ["CONFIG_MODULES=y", "CONFIG_VETH=y", "CONFIG_TCP_CONG_BBR=y"] {
            assert!(config.lines().any(|l| l == line), "{line}: {config}");
        }
        assert!(config.ends_with("CONFIG_OLDDEFCONFIG=y\n"), "{config}");
        assert!(out.join("arch/x86/boot/bzImage").is_file());
        assert!(out.join("lib/modules/6.0.0/kernel").is_dir());
        // The tree's own .config is kept, and without modules none are
        // built or installed.
        fake_tree(&tree);
        std::fs::write(tree.join(".config"), "CONFIG_OWN=y\n").unwrap();
        let o = build(&out);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let config = std::fs::read_to_string(out.join(".config")).unwrap();
        assert!(config.starts_with("CONFIG_OWN=y\n"), "{config}");
        assert!(!config.contains("CONFIG_MODULES=y"), "{config}");
        assert!(!out.join("lib").exists());
        assert!(!tree.join("modules.order").exists());
        // A step that fails fails the build.
        std::fs::remove_file(tree.join("Makefile")).unwrap();
        assert!(!build(&out).status.success());
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn a_long_subject_is_cut_in_the_table() {
        let c = Commit {
            sha: "0123456789abcdef".into(),
            short: "0123456".into(),
            subject: "net: a subject much longer than the table should show in full".into(),
        };
        assert_eq!(c.label(), "bisect-0123456");
        let shown = c.shown();
        assert!(shown.starts_with("0123456 net: a subject"), "{shown}");
        assert_eq!(shown.chars().count(), 8 + 40, "{shown}");
        assert!(shown.ends_with('…'), "{shown}");
    }
}
