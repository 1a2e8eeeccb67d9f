//! Flame graphs as self-contained SVG. No script: the picture has to read
//! the same in a mail attachment, a CI artifact viewer or an `<img>` tag, so
//! the exact numbers live in hover `<title>`s instead of interactive zoom.

use crate::table::esc;
use std::collections::BTreeMap;
use std::fmt::Write;

/// One stack, root first, with its weight (e.g. CPU-seconds).
pub struct Stack<'a> {
    pub frames: Vec<&'a str>,
    pub value: f64,
}

const FRAME_H: f64 = 16.0;
const PAD: f64 = 10.0;
/// Room above the frames for the title and the diff legend; the same in
/// both graphs so a plain and a differential graph stack up alike.
const TOP: f64 = 44.0;
/// Monospace at 11 px advances about 0.6 em per character.
const CHAR_W: f64 = 6.6;
const MIN_TEXT_W: f64 = 20.0;
/// Narrower frames are sub-pixel noise that only bloats the file.
const MIN_FRAME_W: f64 = 0.1;

/// A merged call tree; children keyed by name, so iteration order is
/// alphabetical as in flamegraph.pl and two graphs line up frame by frame.
#[derive(Default)]
struct Node<'a> {
    value: f64,
    children: BTreeMap<&'a str, Node<'a>>,
}

impl<'a> Node<'a> {
    fn merge(stacks: &[Stack<'a>]) -> Self {
        let mut root = Node::default();
        // Negative or non-finite weights have no width to draw.
        for s in stacks
            .iter()
            .filter(|s| s.value.is_finite() && s.value > 0.0)
        {
            let mut node = &mut root;
            node.value += s.value;
            for &f in &s.frames {
                node = node.children.entry(f).or_default();
                node.value += s.value;
            }
        }
        root
    }

    fn depth(&self) -> usize {
        1 + self.children.values().map(Node::depth).max().unwrap_or(0)
    }
}

/// Fill colour and hover text of a frame from its name, its value and the
/// value of the same frame in the base graph (0 when there is none).
type Paint<'p> = dyn Fn(&str, f64, f64) -> (String, String) + 'p;

/// A plain flame graph: width by value, root at the bottom (like Brendan
/// Gregg's flamegraph.pl), warm colours derived deterministically from a hash
/// of the function name (kernel-looking names and names with " [module]" may
/// keep the same palette; deterministic is what matters).
pub fn flame_svg(title: &str, stacks: &[Stack], width_px: u32) -> String {
    let root = Node::merge(stacks);
    let total = root.value;
    let paint = |name: &str, v: f64, _: f64| {
        let t = format!("{name}: {} ({:.1} %)", num(v), 100.0 * v / total);
        (hot(name), t)
    };
    render(title, None, &root, None, width_px, "", &paint)
}

/// A differential flame graph: widths by the candidate's value (`cand`), each
/// frame coloured by the change of its inclusive value from base to candidate:
/// red for growth, blue for shrinkage, white/near-white for no change,
/// saturation proportional to |change| relative to the frame's larger side
/// (clamped); frames present only in base are not drawn (their loss shows as
/// blue on the parent); the <title> says "name: base X -> cand Y (+Z %)".
/// Formatting of values: a `unit` string appended (e.g. "ms/GB").
pub fn diff_flame_svg(
    title: &str,
    base: &[Stack],
    cand: &[Stack],
    unit: &str,
    width_px: u32,
) -> String {
    let base = Node::merge(base);
    let cand = Node::merge(cand);
    let paint = |name: &str, c: f64, b: f64| {
        let change = if b > 0.0 {
            format!("{:+.1} %", 100.0 * (c - b) / b)
        } else {
            "new".to_string()
        };
        let t = format!(
            "{name}: base {} -> cand {} ({change})",
            with_unit(b, unit),
            with_unit(c, unit)
        );
        (change_fill(b, c), t)
    };
    // White frames on a light background need an edge to stay apart.
    let edge = " stroke=\"#bbb\" stroke-width=\"0.5\"";
    let legend = "red: grew, blue: shrank, width: candidate";
    render(
        title,
        Some(legend),
        &cand,
        Some(&base),
        width_px,
        edge,
        &paint,
    )
}

fn render(
    title: &str,
    legend: Option<&str>,
    root: &Node,
    base: Option<&Node>,
    width_px: u32,
    edge: &str,
    paint: &Paint,
) -> String {
    let width = f64::from(width_px);
    if root.value <= 0.0 {
        let mut svg = header(title, legend, width, TOP + FRAME_H + PAD);
        let _ = writeln!(
            svg,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">no samples</text></svg>",
            width / 2.0,
            TOP + 12.0
        );
        return svg;
    }
    let height = TOP + root.depth() as f64 * FRAME_H + PAD;
    let mut canvas = Canvas {
        svg: header(title, legend, width, height),
        scale: (width - 2.0 * PAD).max(0.0) / root.value,
        bottom: height - PAD,
        edge,
        paint,
    };
    canvas.frame("all", root, base, PAD, 0);
    canvas.svg.push_str("</svg>\n");
    canvas.svg
}

fn header(title: &str, legend: Option<&str>, width: f64, height: f64) -> String {
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\" font-family=\"monospace\" font-size=\"11\">\
         <rect width=\"100%\" height=\"100%\" fill=\"#f8f8f4\"/>\
         <text x=\"{}\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">{}</text>",
        width / 2.0,
        esc(title)
    );
    if let Some(l) = legend {
        let _ = write!(
            s,
            "<text x=\"{}\" y=\"36\" text-anchor=\"middle\">{}</text>",
            width / 2.0,
            esc(l)
        );
    }
    s
}

struct Canvas<'p> {
    svg: String,
    scale: f64,
    bottom: f64,
    edge: &'p str,
    paint: &'p Paint<'p>,
}

impl Canvas<'_> {
    /// Draws `node` and, left to right, its children on the row above;
    /// `base` is the same path in the base tree, if it exists there.
    fn frame(&mut self, name: &str, node: &Node, base: Option<&Node>, x: f64, depth: usize) {
        let w = node.value * self.scale;
        if w < MIN_FRAME_W {
            return;
        }
        let y = self.bottom - (depth + 1) as f64 * FRAME_H;
        let (fill, title) = (self.paint)(name, node.value, base.map_or(0.0, |b| b.value));
        let _ = write!(
            self.svg,
            "<g><title>{}</title><rect x=\"{x:.2}\" y=\"{y}\" width=\"{w:.2}\" height=\"{}\" \
             rx=\"2\" fill=\"{fill}\"{}/>",
            esc(&title),
            FRAME_H - 1.0,
            self.edge
        );
        if let Some(text) = label(name, w) {
            let _ = write!(
                self.svg,
                "<text x=\"{:.2}\" y=\"{}\">{}</text>",
                x + 3.0,
                y + 11.5,
                esc(&text)
            );
        }
        self.svg.push_str("</g>");
        let mut cx = x;
        for (&child_name, child) in &node.children {
            let child_base = base.and_then(|b| b.children.get(child_name));
            self.frame(child_name, child, child_base, cx, depth + 1);
            cx += child.value * self.scale;
        }
    }
}

/// The name cut to what fits the frame, or nothing when even a stub would
/// not: truncating here rather than with a clip path keeps the file plain.
fn label(name: &str, w: f64) -> Option<String> {
    if w < MIN_TEXT_W {
        return None;
    }
    let fit = ((w - 6.0) / CHAR_W).floor() as usize;
    if name.chars().count() <= fit {
        Some(name.to_string())
    } else if fit >= 3 {
        Some(name.chars().take(fit - 2).chain("..".chars()).collect())
    } else {
        None
    }
}

/// flamegraph.pl's "hot" palette, keyed by an FNV-1a hash of the name so a
/// function keeps its colour across runs and machines (std's hasher is
/// randomly seeded).
fn hot(name: &str) -> String {
    let h = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    // The high bytes of FNV are the well-mixed ones.
    let part = |shift: u32| ((h >> shift) & 0xff) as f64 / 255.0;
    format!(
        "rgb({},{},{})",
        205 + (50.0 * part(56)) as u8,
        (230.0 * part(48)) as u8,
        (55.0 * part(40)) as u8
    )
}

/// Red for growth, blue for shrinkage; relative to the larger side, so a
/// frame that appeared or vanished is fully saturated and no change is white.
fn change_fill(base: f64, cand: f64) -> String {
    let big = base.max(cand);
    let rel = if big > 0.0 {
        ((cand - base).abs() / big).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let fade = (255.0 * (1.0 - rel)).round() as u8;
    if cand >= base {
        format!("rgb(255,{fade},{fade})")
    } else {
        format!("rgb({fade},{fade},255)")
    }
}

/// About three significant figures, without trailing zeros.
fn num(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 || a == 0.0 {
        return format!("{v:.0}");
    }
    let decimals = (2 - a.log10().floor() as i32).clamp(0, 9) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn with_unit(v: f64, unit: &str) -> String {
    if unit.is_empty() {
        num(v)
    } else {
        format!("{} {unit}", num(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st<'a>(frames: &[&'a str], value: f64) -> Stack<'a> {
        Stack {
            frames: frames.to_vec(),
            value,
        }
    }

    /// Balanced tags, entities that are entities, and no markup outside
    /// tags: enough of well-formedness for what this module writes.
    fn assert_well_formed(svg: &str) {
        assert!(!svg.contains("<script"), "{svg}");
        let mut open: Vec<&str> = Vec::new();
        let mut rest = svg;
        while let Some(lt) = rest.find('<') {
            check_text(&rest[..lt]);
            let gt = rest[lt..].find('>').expect("unclosed tag") + lt;
            let tag = &rest[lt + 1..gt];
            assert!(!tag.contains('<'), "'<' inside tag {tag}");
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(open.pop(), Some(name.trim()), "mismatched </{name}>");
            } else if !tag.ends_with('/') {
                open.push(tag.split_whitespace().next().expect("empty tag"));
            }
            rest = &rest[gt + 1..];
        }
        check_text(rest);
        assert!(open.is_empty(), "unclosed: {open:?}");
        assert!(svg.trim_start().starts_with("<svg"));
    }

    fn check_text(text: &str) {
        assert!(!text.contains('>'), "stray '>' in {text}");
        for (i, _) in text.match_indices('&') {
            let ok = ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
                .iter()
                .any(|e| text[i..].starts_with(e));
            assert!(ok, "bare '&' in {text}");
        }
    }

    /// (title, rect attributes) of every frame drawn.
    fn frames(svg: &str) -> Vec<(String, BTreeMap<String, String>)> {
        svg.split("<g><title>")
            .skip(1)
            .map(|g| {
                let (title, rest) = g.split_once("</title>").unwrap();
                let rect = &rest[rest.find("<rect").unwrap() + 5..];
                let rect = &rect[..rect.find("/>").unwrap()];
                let attrs = rect
                    .split_whitespace()
                    .filter_map(|a| a.split_once('='))
                    .map(|(k, v)| (k.to_string(), v.trim_matches('"').to_string()))
                    .collect();
                (title.to_string(), attrs)
            })
            .collect()
    }

    fn frame(svg: &str, prefix: &str) -> BTreeMap<String, String> {
        frames(svg)
            .into_iter()
            .find(|(t, _)| t.starts_with(prefix))
            .unwrap_or_else(|| panic!("no frame {prefix} in {svg}"))
            .1
    }

    fn rgb(fill: &str) -> (u8, u8, u8) {
        let inner = fill
            .strip_prefix("rgb(")
            .unwrap()
            .strip_suffix(')')
            .unwrap();
        let v: Vec<u8> = inner.split(',').map(|p| p.parse().unwrap()).collect();
        (v[0], v[1], v[2])
    }

    #[test]
    fn shared_prefix_merges_into_one_parent() {
        let stacks = [st(&["main", "read"], 1.5), st(&["main", "write"], 2.5)];
        let root = Node::merge(&stacks);
        assert_eq!(root.value, 4.0);
        assert_eq!(root.children.len(), 1);
        let main = &root.children["main"];
        assert_eq!(main.value, 4.0);
        assert_eq!(main.children["read"].value, 1.5);
        assert_eq!(main.children["write"].value, 2.5);
        assert_eq!(root.depth(), 3);

        let svg = flame_svg("t", &stacks, 800);
        assert_eq!(svg.matches("<title>main:").count(), 1);
        assert!(svg.contains("<title>main: 4 (100.0 %)</title>"), "{svg}");
        assert_well_formed(&svg);
    }

    #[test]
    fn widths_follow_values() {
        let stacks = [st(&["a"], 1.0), st(&["b"], 3.0)];
        let svg = flame_svg("t", &stacks, 1000);
        let w = |p: &str| frame(&svg, p)["width"].parse::<f64>().unwrap();
        assert!((w("all:") - 980.0).abs() < 0.01);
        assert!((w("b:") / w("a:") - 3.0).abs() < 1e-3);
        assert!((w("a:") + w("b:") - w("all:")).abs() < 0.02);
        // Alphabetical order: a left of b, both on the row above the root.
        let x = |p: &str| frame(&svg, p)["x"].parse::<f64>().unwrap();
        assert!(x("a:") < x("b:"));
        assert_eq!(frame(&svg, "a:")["y"], frame(&svg, "b:")["y"]);
        assert_well_formed(&svg);
    }

    #[test]
    fn narrow_frames_and_labels_are_left_out() {
        let stacks = [
            st(&["wide"], 1.0),
            st(&["speck"], 1e-6),
            st(&["thin"], 0.01),
        ];
        let svg = flame_svg("t", &stacks, 1000);
        assert!(!svg.contains("speck"));
        // ~10 px: drawn, hover title present, but no label.
        assert!(svg.contains("<title>thin:"));
        assert!(!svg.contains(">thin</text>"));
        assert!(svg.contains(">wide</text>"));
        assert_eq!(label("abcdefghij", 40.0).as_deref(), Some("abc.."));
        assert_eq!(label("abcdefghij", 19.0), None);
        assert_well_formed(&svg);
    }

    #[test]
    fn names_are_escaped() {
        let name = "a<b>&\"c\"";
        let svg = flame_svg("x & 'y'", &[st(&[name], 1.0)], 600);
        assert!(!svg.contains(name));
        assert!(svg.contains("a&lt;b&gt;&amp;&quot;c&quot;"), "{svg}");
        assert!(svg.contains("x &amp; &apos;y&apos;"));
        assert_well_formed(&svg);
    }

    #[test]
    fn colours_are_deterministic_and_warm() {
        let svg = flame_svg("t", &[st(&["f", "g"], 1.0), st(&["g"], 1.0)], 600);
        let fills: Vec<String> = frames(&svg)
            .into_iter()
            .filter(|(t, _)| t.starts_with("g:"))
            .map(|(_, a)| a["fill"].clone())
            .collect();
        assert_eq!(fills.len(), 2);
        assert_eq!(fills[0], fills[1]);
        let (r, _, b) = rgb(&fills[0]);
        assert!(r >= 205 && b <= 55);
        assert_eq!(
            svg,
            flame_svg("t", &[st(&["f", "g"], 1.0), st(&["g"], 1.0)], 600)
        );
    }

    #[test]
    fn diff_colours_growth_red_and_shrinkage_blue() {
        let base = [
            st(&["main", "grow"], 1.0),
            st(&["main", "shrink"], 4.0),
            st(&["main", "gone"], 2.0),
            st(&["main", "same"], 2.0),
        ];
        let cand = [
            st(&["main", "grow"], 3.0),
            st(&["main", "shrink"], 1.0),
            st(&["main", "same"], 2.0),
            st(&["main", "fresh"], 1.0),
        ];
        let svg = diff_flame_svg("d", &base, &cand, "ms/GB", 1000);
        let (r, _, b) = rgb(&frame(&svg, "grow:")["fill"]);
        assert!(r > b, "grow {r} {b}");
        let (r, _, b) = rgb(&frame(&svg, "shrink:")["fill"]);
        assert!(b > r, "shrink {r} {b}");
        assert_eq!(frame(&svg, "same:")["fill"], "rgb(255,255,255)");
        assert_eq!(frame(&svg, "fresh:")["fill"], "rgb(255,0,0)");
        // main: 9 -> 7, its lost child shows here.
        let (r, _, b) = rgb(&frame(&svg, "main:")["fill"]);
        assert!(b > r);
        assert!(!svg.contains("gone"));
        assert!(
            svg.contains("<title>grow: base 1 ms/GB -&gt; cand 3 ms/GB (+200.0 %)</title>"),
            "{svg}"
        );
        assert!(svg.contains("<title>fresh: base 0 ms/GB -&gt; cand 1 ms/GB (new)</title>"));
        assert!(svg.contains("red: grew, blue: shrank, width: candidate"));
        // Widths are the candidate's.
        let w = |p: &str| frame(&svg, p)["width"].parse::<f64>().unwrap();
        assert!((w("grow:") / w("shrink:") - 3.0).abs() < 1e-3);
        assert_well_formed(&svg);
    }

    #[test]
    fn no_samples_is_still_an_svg() {
        let flat = flame_svg("empty", &[], 400);
        assert!(flat.contains("no samples"));
        assert_well_formed(&flat);
        let zero = [st(&["a"], 0.0)];
        let diff = diff_flame_svg("empty", &[st(&["a"], 1.0)], &zero, "s", 400);
        assert!(diff.contains("no samples"));
        assert_well_formed(&diff);
    }

    #[test]
    fn numbers_read_short() {
        assert_eq!(num(1.0), "1");
        assert_eq!(num(0.01234), "0.0123");
        assert_eq!(num(12.345), "12.3");
        assert_eq!(num(1234.4), "1234");
    }
}
