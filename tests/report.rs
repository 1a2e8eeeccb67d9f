//! `plumb report` of a stored experiment in the three renderings, and the
//! HTML page opened in headless Chromium: it must render with no console
//! message and no network.

mod common;
use common::{plumb, TempDb};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("plumb-report-{}-{name}", std::process::id()))
}

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
}

/// Opens `page` headless, screenshots it to `png`, and returns what the
/// page wrote to the console (Chromium logs each message as a CONSOLE line).
fn render(browser: &str, page: &Path, png: &Path) -> Vec<String> {
    let profile = temp("chromium-profile");
    let _ = std::fs::remove_file(png);
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1000,3000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromium starts");
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium did not finish in 120 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    let _ = std::fs::remove_dir_all(&profile);
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains("CONSOLE"))
        .map(str::to_string)
        .collect()
}

#[test]
fn an_experiment_report_renders_everywhere_and_in_chromium() {
    let file = temp("exp.toml");
    std::fs::write(
        &file,
        r#"
name = "report-test"
iterations = 2
order = "interleaved"
[base]
workload = "rr"
duration = "300ms"
warmup = "100ms"
[matrix]
req_size = [1, 100]
[[variant]]
name = "plain"
[[variant]]
name = "nodelay"
set = { nodelay = true }
"#,
    )
    .unwrap();
    let db = TempDb::new("report");
    let out = plumb()
        .env("PLUMB_JOURNAL", temp("journal"))
        .args(["sweep", file.to_str().unwrap(), "--db", db.path()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let page = temp("page.html");
    let out = plumb()
        .args(["report", "--experiment", "report-test", "--db", db.path()])
        .arg("--html")
        .arg(&page)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for want in [
        "transactions/s by req_size",
        "cliffs:",
        "CPU per end",
        "latency percentiles (us)",
        "softirq share of each CPU",
        "A = plain   B = nodelay",
    ] {
        assert!(text.contains(want), "terminal lacks '{want}':\n{text}");
    }
    let md = plumb()
        .args([
            "report",
            "--experiment",
            "report-test",
            "--format",
            "markdown",
            "--db",
            db.path(),
        ])
        .output()
        .unwrap();
    let md = String::from_utf8_lossy(&md.stdout);
    assert!(md.contains("## transactions/s by req_size"), "{md}");
    assert!(md.contains("| plain | 100 |"), "{md}");

    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<svg"));
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "the page must not reach the network"
    );

    let Some(browser) = chromium() else {
        if std::env::var_os("CI").is_some() {
            panic!("chromium is not installed; .ci/run installs it");
        }
        eprintln!("skipped the browser check: chromium is not installed here");
        return;
    };
    let png = temp("page.png");
    let console = render(browser, &page, &png);
    assert!(console.is_empty(), "console messages: {console:?}");
    let shot = std::fs::read(&png).expect("a screenshot");
    assert!(shot.starts_with(b"\x89PNG"), "a PNG");
    assert!(
        shot.len() > 20_000,
        "a page with plots, not a blank one: {} bytes",
        shot.len()
    );

    // The console check itself catches a broken page.
    let broken = temp("broken.html");
    std::fs::write(
        &broken,
        "<html><body><script>no_such_function();</script></body></html>",
    )
    .unwrap();
    let console = render(browser, &broken, &temp("broken.png"));
    assert!(
        console.iter().any(|l| l.contains("no_such_function")),
        "{console:?}"
    );
    for f in [file, page, png, broken, temp("broken.png"), temp("journal")] {
        let _ = std::fs::remove_file(f);
    }
}
