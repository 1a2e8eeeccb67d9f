//! One table, three renderings: aligned terminal columns, Markdown pipes and
//! an HTML `<table>`. A report section says its columns and cells once;
//! how each output format draws a table is said here, once.

use std::fmt::Write;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    /// Figures: right-aligned in every rendering.
    Right,
}

#[derive(Debug, Clone)]
struct Column {
    header: String,
    align: Align,
    /// The least terminal width, so that tables of one report line up
    /// whatever their cells.
    width: usize,
    /// Spaces before it on a terminal.
    gap: usize,
}

#[derive(Debug, Clone)]
struct Row {
    cells: Vec<String>,
    /// What the row is (a verdict: `regression`, `grew`), for a page's
    /// style to mark; the other renderings carry it in a cell already.
    class: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Table {
    columns: Vec<Column>,
    rows: Vec<Row>,
}

impl Table {
    /// Columns as (header, alignment, least terminal width).
    pub fn new<S: Into<String>>(columns: impl IntoIterator<Item = (S, Align, usize)>) -> Table {
        Table {
            columns: columns
                .into_iter()
                .map(|(header, align, width)| Column {
                    header: header.into(),
                    align,
                    width,
                    gap: 1,
                })
                .collect(),
            rows: Vec::new(),
        }
    }

    /// Sets a terminal's spaces before `column` (one unless set), to set a
    /// column of another kind apart from the figures before it.
    pub fn gap(mut self, column: usize, spaces: usize) -> Table {
        if let Some(c) = self.columns.get_mut(column) {
            c.gap = spaces;
        }
        self
    }

    /// One row; a row with fewer cells than columns leaves the rest empty.
    pub fn row(&mut self, cells: impl IntoIterator<Item = String>) {
        self.rows.push(Row {
            cells: cells.into_iter().collect(),
            class: None,
        });
    }

    /// One row of a kind a page marks: its class in HTML, with spaces made
    /// dashes (`no change` -> `no-change`).
    pub fn row_of_class(&mut self, class: &str, cells: impl IntoIterator<Item = String>) {
        self.rows.push(Row {
            cells: cells.into_iter().collect(),
            class: Some(class.replace(' ', "-")),
        });
    }

    fn cell(row: &Row, i: usize) -> &str {
        row.cells.get(i).map_or("", String::as_str)
    }

    /// Columns one space apart (or their gap), each line after `indent`.
    pub fn terminal(&self, indent: &str) -> String {
        let widths: Vec<usize> = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| {
                self.rows
                    .iter()
                    .map(|r| Self::cell(r, i).chars().count())
                    .chain([c.width, c.header.chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |cells: Vec<&str>| {
            let mut l = indent.to_string();
            for (i, (c, text)) in self.columns.iter().zip(cells).enumerate() {
                if i > 0 {
                    l.push_str(&" ".repeat(c.gap));
                }
                let w = widths[i];
                let _ = match c.align {
                    Align::Left => write!(l, "{text:<w$}"),
                    Align::Right => write!(l, "{text:>w$}"),
                };
            }
            l.truncate(l.trim_end().len());
            l.push('\n');
            l
        };
        let mut o = line(self.columns.iter().map(|c| c.header.as_str()).collect());
        for r in &self.rows {
            o.push_str(&line(
                (0..self.columns.len()).map(|i| Self::cell(r, i)).collect(),
            ));
        }
        o
    }

    /// A Markdown table, figures right-aligned.
    pub fn markdown(&self) -> String {
        let mut o = String::from("|");
        for c in &self.columns {
            let _ = write!(o, " {} |", c.header);
        }
        o.push_str("\n|");
        for c in &self.columns {
            o.push_str(match c.align {
                Align::Left => "---|",
                Align::Right => "---:|",
            });
        }
        o.push('\n');
        for r in &self.rows {
            o.push('|');
            for i in 0..self.columns.len() {
                // A bar in a cell (C++'s operator|) would end the cell.
                let _ = write!(o, " {} |", Self::cell(r, i).replace('|', "\\|"));
            }
            o.push('\n');
        }
        o
    }

    /// An HTML table; figures get the class `n`, which pages right-align.
    pub fn html(&self) -> String {
        let mut o = String::from("<table><tr>");
        for c in &self.columns {
            let _ = write!(o, "<th>{}</th>", esc(&c.header));
        }
        o.push_str("</tr>\n");
        for r in &self.rows {
            match &r.class {
                Some(class) => {
                    let _ = write!(o, "<tr class=\"{}\">", esc(class));
                }
                None => o.push_str("<tr>"),
            }
            for (i, c) in self.columns.iter().enumerate() {
                let class = match c.align {
                    Align::Left => "",
                    Align::Right => " class=\"n\"",
                };
                let _ = write!(o, "<td{class}>{}</td>", esc(Self::cell(r, i)));
            }
            o.push_str("</tr>\n");
        }
        o.push_str("</table>\n");
        o
    }
}

/// Text made safe for HTML, in an element or in an attribute's quotes.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            _ => o.push(c),
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Table {
        let mut t = Table::new([("point", Align::Left, 8), ("per GB", Align::Right, 7)]);
        t.row(["a <b>".to_string(), "1.5".into()]);
        t.row(["a much longer point".to_string(), "12345.0".into()]);
        t
    }

    #[test]
    fn terminal_columns_line_up_and_grow_to_their_widest_cell() {
        let t = sample().terminal("  ");
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines,
            [
                "  point                per GB",
                "  a <b>                   1.5",
                "  a much longer point 12345.0",
            ]
        );
    }

    #[test]
    fn a_gap_sets_a_column_apart_on_a_terminal_only() {
        let t = sample().gap(1, 3);
        assert_eq!(
            t.terminal("").lines().nth(1),
            Some("a <b>                     1.5")
        );
        assert_eq!(t.markdown(), sample().markdown());
    }

    #[test]
    fn markdown_right_aligns_figures() {
        assert_eq!(
            sample().markdown(),
            "| point | per GB |\n|---|---:|\n| a <b> | 1.5 |\n| a much longer point | 12345.0 |\n"
        );
    }

    #[test]
    fn a_bar_in_a_markdown_cell_is_escaped() {
        let mut t = Table::new([("function", Align::Left, 0)]);
        t.row(["operator|".to_string()]);
        assert_eq!(t.markdown().lines().last(), Some("| operator\\| |"));
    }

    #[test]
    fn html_escapes_cells_and_marks_figures() {
        let h = sample().html();
        assert!(h.starts_with("<table><tr><th>point</th><th>per GB</th></tr>\n"));
        assert!(h.contains("<tr><td>a &lt;b&gt;</td><td class=\"n\">1.5</td></tr>"));
        assert!(h.ends_with("</table>\n"));
    }

    #[test]
    fn a_row_of_a_class_is_marked_in_html_only() {
        let mut t = Table::new([("point", Align::Left, 0), ("verdict", Align::Left, 0)]);
        t.row_of_class("no change", ["a".to_string(), "no change".into()]);
        t.row(["b".to_string(), "regression".into()]);
        let h = t.html();
        assert!(h.contains("<tr class=\"no-change\"><td>a</td>"), "{h}");
        assert!(h.contains("<tr><td>b</td>"), "{h}");
        assert_eq!(t.markdown().lines().nth(2), Some("| a | no change |"));
    }

    #[test]
    fn a_short_row_leaves_its_last_cells_empty() {
        let mut t = Table::new([("a", Align::Left, 1), ("b", Align::Right, 1)]);
        t.row(["x".to_string()]);
        assert_eq!(t.markdown().lines().last(), Some("| x |  |"));
        assert_eq!(t.terminal("").lines().last(), Some("x"));
    }
}
