//! `plumb report` of a stored experiment in the three renderings, and the
//! HTML page opened in headless Chromium: it must render with no console
//! message and no network, and what Chromium lays out (plots, their
//! series, axis labels, the cliff sentences) is read back from the page.

mod common;
use common::{
    assert_ok, assert_says, chromium, items, plumb, quick_rr, render, skip, TempDb,
    PLAIN_AND_NODELAY,
};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("plumb-report-{}-{name}", std::process::id()))
}

/// A script added to a copy of the page: after layout it measures every
/// plot as Chromium drew it (sizes from getBBox, so an element that is in
/// the markup but draws nothing measures 0) and writes the findings as JSON
/// into the page, where `--dump-dom` brings them out.
const PROBE: &str = r#"<pre id="plumb-probe"></pre><script>
(function () {
  const box = (e) => { const b = e.getBBox(); return { w: b.width, h: b.height }; };
  const out = { svgs: [], cliffs: [] };
  for (const svg of document.querySelectorAll('svg')) {
    let h = svg.previousElementSibling;
    while (h && h.tagName !== 'H2') h = h.previousElementSibling;
    const r = svg.getBoundingClientRect();
    out.svgs.push({
      heading: h ? h.textContent : '',
      w: r.width, h: r.height,
      series: [...svg.querySelectorAll('polyline')].map((p) => Object.assign(
        { stroke: p.getAttribute('stroke'), points: p.points.numberOfItems, length: p.getTotalLength() }, box(p))),
      marks: [...svg.querySelectorAll('circle')].map((c) => Object.assign(
        { title: c.querySelector('title') ? c.querySelector('title').textContent : '' }, box(c))),
      bars: [...svg.querySelectorAll('rect')].filter((x) => x.querySelector('title')).map((x) => Object.assign(
        { title: x.querySelector('title').textContent }, box(x))),
      texts: [...svg.querySelectorAll('text')].map((t) => Object.assign(
        { class: t.getAttribute('class'), text: t.textContent }, box(t))),
    });
  }
  for (const li of document.querySelectorAll('li.cliff')) {
    const r = li.getBoundingClientRect();
    out.cliffs.push({ text: li.innerText, w: r.width, h: r.height });
  }
  document.getElementById('plumb-probe').textContent = JSON.stringify(out);
})();
</script>"#;

/// What Chromium drew of `page`: the probe's findings, and the console.
fn probe(browser: &str, page: &Path) -> (Value, Vec<String>) {
    let html = std::fs::read_to_string(page).unwrap();
    let probed = temp(&format!(
        "probed-{}",
        page.file_name().unwrap().to_string_lossy()
    ));
    let at = html.rfind("</body>").expect("a </body>");
    std::fs::write(&probed, format!("{}{PROBE}{}", &html[..at], &html[at..])).unwrap();
    let (dom, console) = render(browser, &probed);
    let _ = std::fs::remove_file(&probed);
    let start = dom
        .find("<pre id=\"plumb-probe\">")
        .unwrap_or_else(|| panic!("no probe in the rendered page: {dom}"))
        + "<pre id=\"plumb-probe\">".len();
    let end = start + dom[start..].find("</pre>").unwrap();
    let json = dom[start..end]
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    let v = serde_json::from_str(&json).unwrap_or_else(|e| panic!("probe {e}: {json}"));
    (v, console)
}

fn n(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

/// The plot under the heading `heading`.
fn plot<'a>(p: &'a Value, heading: &str) -> Result<&'a Value, String> {
    items(&p["svgs"])
        .find(|s| s["heading"] == heading)
        .ok_or_else(|| format!("no plot under '{heading}'"))
}

/// A line plot drawn with one visible series per name in `series`, each
/// through `points` points with a visible marker per point, the axis label
/// `axis` and the x labels `ticks` drawn with some width.
fn check_lines(
    p: &Value,
    heading: &str,
    series: &[&str],
    points: u64,
    axis: &str,
    ticks: &[&str],
) -> Result<(), String> {
    let svg = plot(p, heading)?;
    if n(&svg["w"]) < 100.0 || n(&svg["h"]) < 100.0 {
        return Err(format!("{heading}: plot drawn {}x{}", svg["w"], svg["h"]));
    }
    let lines = svg["series"].as_array().unwrap();
    if lines.len() != series.len() {
        return Err(format!(
            "{heading}: {} series drawn, want {}",
            lines.len(),
            series.len()
        ));
    }
    for l in lines {
        if l["points"].as_u64() != Some(points) || n(&l["length"]) <= 0.0 || n(&l["w"]) <= 0.0 {
            return Err(format!(
                "{heading}: a series is not drawn through {points} points: {l}"
            ));
        }
    }
    let texts = svg["texts"].as_array().unwrap();
    let drawn = |class: &str, text: &str| {
        texts
            .iter()
            .any(|t| t["class"] == class && t["text"] == text && n(&t["w"]) > 0.0)
    };
    for name in series {
        if !drawn("t", name) {
            return Err(format!("{heading}: no legend entry '{name}'"));
        }
        let marks = items(&svg["marks"])
            .filter(|m| {
                m["title"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with(&format!("{name}: "))
                    && n(&m["w"]) > 0.0
            })
            .count();
        if marks as u64 != points {
            return Err(format!(
                "{heading}: {marks} markers of '{name}', want {points}"
            ));
        }
    }
    if !drawn("a", axis) {
        return Err(format!("{heading}: no axis label '{axis}'"));
    }
    for t in ticks {
        if !drawn("t", t) {
            return Err(format!("{heading}: no x label '{t}'"));
        }
    }
    // The y axis has tick labels too (numbers with a unit).
    let y_ticks = texts
        .iter()
        .filter(|t| t["class"] == "t" && n(&t["w"]) > 0.0)
        .count();
    if y_ticks < series.len() + ticks.len() + 2 {
        return Err(format!("{heading}: only {y_ticks} labels drawn"));
    }
    Ok(())
}

/// Everything the experiment below must show, as Chromium drew it.
fn check_page(p: &Value, cliffs: &[String]) -> Result<(), String> {
    check_lines(
        p,
        "transactions/s by req_size",
        &["plain", "nodelay"],
        3,
        "req_size",
        &["1", "100", "16000000"],
    )?;
    check_lines(
        p,
        "Latency percentiles",
        &[
            "plain req_size=1",
            "plain req_size=100",
            "plain req_size=16000000",
            "nodelay req_size=1",
            "nodelay req_size=100",
            "nodelay req_size=16000000",
        ],
        5,
        "percentile",
        &["p50", "p99"],
    )?;
    let cpu = plot(p, "CPU per end")?;
    let bars = items(&cpu["bars"])
        .filter(|b| n(&b["w"]) > 0.0 && n(&b["h"]) > 0.0)
        .count();
    // Six points, two ends, and at least the system time of each drawn.
    if bars < 12 {
        return Err(format!("CPU per end: {bars} bars drawn: {cpu}"));
    }
    let drawn: Vec<&str> = items(&p["cliffs"])
        .filter(|c| n(&c["w"]) > 0.0 && n(&c["h"]) > 0.0)
        .map(|c| c["text"].as_str().unwrap())
        .collect();
    for c in cliffs {
        if !drawn.iter().any(|d| d.trim() == c) {
            return Err(format!("cliff '{c}' not drawn; drawn: {drawn:?}"));
        }
    }
    if drawn.len() != cliffs.len() {
        return Err(format!("cliffs drawn {drawn:?}, want {cliffs:?}"));
    }
    Ok(())
}

#[test]
fn an_experiment_report_renders_everywhere_and_in_chromium() {
    let file = temp("exp.toml");
    std::fs::write(
        &file,
        quick_rr("report-test", "iterations = 2\norder = \"interleaved\"")
            + r#"
[matrix]
# A 16 MB request takes a hundred times longer than a small one on
# loopback (a 1 MB one only about twice, under the cliff factor): a cliff
# between 100 and 16000000 whatever the machine's noise.
req_size = [1, 100, 16000000]
"# + PLAIN_AND_NODELAY,
    )
    .unwrap();
    let db = TempDb::new("report");
    let out = plumb()
        .env("PLUMB_JOURNAL", temp("journal"))
        .args(["sweep", file.to_str().unwrap(), "--db", db.path()])
        .output()
        .unwrap();
    assert_ok(&out);

    let page = temp("page.html");
    let out = plumb()
        .args(["report", "--experiment", "report-test", "--db", db.path()])
        .arg("--html")
        .arg(&page)
        .output()
        .unwrap();
    let text = assert_says(
        &out,
        &[
            "transactions/s by req_size",
            "cliffs:",
            "CPU per end",
            "latency percentiles (us)",
            "softirq share of each CPU",
            "A = plain   B = nodelay",
        ],
    );
    let md = plumb()
        .args(["report", "--experiment", "report-test"])
        .args(["--format", "markdown", "--db", db.path()])
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

    // The cliff sentences of the terminal rendering, which the page must
    // show as well.
    let cliffs: Vec<String> = text
        .split("cliffs:")
        .nth(1)
        .unwrap()
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(|l| l.trim().to_string())
        .collect();
    assert_eq!(cliffs.len(), 2, "a cliff per variant:\n{text}");
    for c in &cliffs {
        assert!(c.contains("between req_size 100 and 16000000"), "{c}");
    }

    let Some(browser) = chromium() else {
        skip("chromium is not installed (apt-get install chromium; tests/setup.sh installs it)");
        return;
    };
    let (drawn, console) = probe(browser, &page);
    assert!(console.is_empty(), "console messages: {console:?}");
    if let Err(e) = check_page(&drawn, &cliffs) {
        panic!("{e}\nas drawn: {drawn}");
    }

    // The check fails on a page whose plot is empty: the same page with the
    // first plot's lines and markers left without points.
    let html = std::fs::read_to_string(&page).unwrap();
    let first = html.find("<svg").unwrap();
    let end = first + html[first..].find("</svg>").unwrap();
    let emptied = html[first..end]
        .split("points=\"")
        .enumerate()
        .map(|(i, part)| {
            if i == 0 {
                part.to_string()
            } else {
                format!("points=\"{}", &part[part.find('"').unwrap()..])
            }
        })
        .collect::<String>()
        .replace(" r=\"3.5\"", " r=\"0\"");
    let empty = temp("empty.html");
    std::fs::write(
        &empty,
        format!("{}{emptied}{}", &html[..first], &html[end..]),
    )
    .unwrap();
    let (drawn, _) = probe(browser, &empty);
    let e = check_page(&drawn, &cliffs).expect_err("a page with an empty plot passed the check");
    assert!(e.contains("transactions/s by req_size"), "{e}");

    // The console check itself catches a broken page.
    let broken = temp("broken.html");
    std::fs::write(
        &broken,
        "<html><body><script>no_such_function();</script></body></html>",
    )
    .unwrap();
    let (_, console) = render(browser, &broken);
    assert!(
        console.iter().any(|l| l.contains("no_such_function")),
        "{console:?}"
    );
    for f in [file, page, empty, broken, temp("journal")] {
        let _ = std::fs::remove_file(f);
    }
}
