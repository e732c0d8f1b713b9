//! The text report's layout machinery, whatever a table shows: how a table is drawn (the
//! original's PrettyTable look), how its cells write figures, the banners and rules between
//! sections, and fitting the report to a width (`--width`, or the terminal's). A table is kept
//! as it is when it fits, has its header words wrapped when every column can still hold its
//! longest value whole, and otherwise becomes one record per block (a cell wrapped into slivers
//! is unreadable); every other line wraps at word boundaries. Without a width nothing changes,
//! so a report written to a pipe or a file keeps its layout byte for byte.

use comfy_table::{CellAlignment, ColumnConstraint, ContentArrangement, Table, Width};

/// PrettyTable's look: `+---+` borders, a `-` line under the header, no lines between rows.
const PRETTY: &str = "||--+-++|    ++++++";

/// A table with PrettyTable's look and `header` as its header row.
pub fn new_table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(PRETTY);
    t.set_header(header.iter().map(|h| h.to_string()));
    t
}

/// Python's `str(float)` for limits: 50.0, 12.5, inf, None.
pub fn py_float(v: Option<f64>) -> String {
    match v {
        None => "None".into(),
        Some(x) if x.is_infinite() => "inf".into(),
        Some(x) if x.fract() == 0.0 && x.abs() < 1e15 => format!("{x:.1}"),
        Some(x) => format!("{x}"),
    }
}

/// A figure with two decimals, `inf`, or `-` when there is none (or it is not a number).
pub fn f2(v: Option<f64>) -> String {
    match v {
        Some(x) if x.is_finite() => format!("{x:.2}"),
        Some(x) if x.is_infinite() => "inf".into(),
        _ => "-".into(),
    }
}

/// A figure with three decimals (the raw dump's and the memory columns' precision).
pub(super) fn f3(v: f64) -> String {
    format!("{v:.3}")
}

/// The line of stars that opens and closes a block.
pub(super) fn banner(width: usize) -> String {
    "*".repeat(width)
}

/// The indented dashed line between the sections of a block.
pub(super) fn rule(width: usize) -> String {
    format!("    {}", "-".repeat(width - 4))
}

/// Display columns of a line (the report's characters are all one column wide).
fn columns(line: &str) -> usize {
    line.chars().count()
}

fn widest(text: &str) -> usize {
    text.lines().map(columns).max().unwrap_or(0)
}

/// Render `t` (its cells centred when `center`) within `width` columns, if any.
pub fn fit(mut t: Table, width: Option<usize>, center: bool) -> String {
    if center {
        for col in t.column_iter_mut() {
            col.set_cell_alignment(CellAlignment::Center);
        }
    }
    let plain = t.to_string();
    let Some(width) = width else { return plain };
    if widest(&plain) <= width {
        return plain;
    }
    let least = least_columns(&t);
    // Each column: its content, a space either side and one border; one more closes the row.
    if least.iter().map(|w| w + 3).sum::<usize>() < width {
        for (col, w) in t.column_iter_mut().zip(&least) {
            // comfy-table's fixed widths count the padding.
            col.set_constraint(ColumnConstraint::LowerBoundary(Width::Fixed((*w + 2) as u16)));
        }
        t.set_content_arrangement(ContentArrangement::Dynamic);
        t.set_width(width as u16);
        let wrapped = t.to_string();
        if widest(&wrapped) <= width {
            return wrapped;
        }
    }
    records(&t, width)
}

/// The narrowest each column can be without splitting a value or a header word.
fn least_columns(t: &Table) -> Vec<usize> {
    let mut least: Vec<usize> = Vec::new();
    let mut widen = |i: usize, w: usize| {
        if least.len() <= i {
            least.resize(i + 1, 1);
        }
        least[i] = least[i].max(w);
    };
    if let Some(h) = t.header() {
        for (i, c) in h.cell_iter().enumerate() {
            widen(i, c.content().split_whitespace().map(columns).max().unwrap_or(1));
        }
    }
    for row in t.row_iter() {
        for (i, c) in row.cell_iter().enumerate() {
            widen(i, widest(&c.content()));
        }
    }
    least
}

/// One block per row: its first cell as a title, then `header: value` lines (an unnamed
/// column's value alone), values aligned when the names leave room. Long lines are left to
/// [`wrap`].
fn records(t: &Table, width: usize) -> String {
    let header: Vec<String> = t.header().map(|h| h.cell_iter().map(|c| c.content()).collect()).unwrap_or_default();
    let name = |i: usize| header.get(i).cloned().unwrap_or_default();
    let pad = header.iter().skip(1).map(|h| columns(h)).max().unwrap_or(0) + 1;
    // Aligned values only when a name and a short value still fit on one line.
    let pad = if 2 + pad + 1 + 12 <= width { pad } else { 0 };
    let mut s = String::new();
    for (n, row) in t.row_iter().enumerate() {
        if n > 0 {
            s.push('\n');
        }
        let cells: Vec<String> = row.cell_iter().map(|c| c.content()).collect();
        for (i, value) in cells.iter().enumerate() {
            let key = name(i);
            // An unnamed column's empty cell (the frontier's marker column) says nothing.
            if key.is_empty() && value.is_empty() {
                continue;
            }
            let line = match (i, key.is_empty()) {
                (0, false) => format!("{key}: {value}"),
                (0, true) | (_, true) => format!("  {value}"),
                _ => format!("  {:<pad$} {value}", format!("{key}:")),
            };
            s += line.trim_end();
            s.push('\n');
        }
    }
    wrap(s.trim_end_matches('\n'), width)
}

/// Wrap every line longer than `width` at word boundaries, continuation lines indented two
/// more than the line; a banner or rule (one repeated character) is cut to the width, and a
/// word longer than the room left is split.
pub fn wrap(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, newline) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        if columns(body) <= width {
            out += line;
            continue;
        }
        let trimmed = body.trim_start();
        let mut distinct = trimmed.chars();
        let first = distinct.next();
        if first.is_some_and(|f| distinct.all(|c| c == f)) {
            out.extend(body.chars().take(width));
        } else {
            wrap_line(body, width, &mut out);
        }
        out += newline;
    }
    out
}

fn wrap_line(body: &str, width: usize, out: &mut String) {
    let indent = (columns(body) - columns(body.trim_start())).min(width / 2);
    let next_indent = (indent + 2).min(width / 2);
    let mut line = " ".repeat(indent);
    let mut at_start = true;
    for word in body.split_whitespace() {
        let room = width - columns(&line);
        let need = columns(word) + usize::from(!at_start);
        if need > room && !at_start {
            out.push_str(&line);
            out.push('\n');
            line = " ".repeat(next_indent);
            at_start = true;
        }
        if !at_start {
            line.push(' ');
        }
        // A word wider than a whole line is split where the line ends.
        let mut rest: Vec<char> = word.chars().collect();
        loop {
            let room = width - columns(&line);
            if rest.len() <= room {
                line.extend(rest);
                break;
            }
            line.extend(rest.drain(..room));
            out.push_str(&line);
            out.push('\n');
            line = " ".repeat(next_indent);
        }
        at_start = false;
    }
    out.push_str(&line);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_wrap_at_words_within_the_width() {
        let text = "Serving engine: vllm (a rather long description of the policy in words)\n****************\nshort\n";
        let w = wrap(text, 20);
        assert!(w.lines().all(|l| columns(l) <= 20), "{w}");
        assert!(w.contains("Serving engine: vllm\n  (a rather long"), "{w}");
        assert!(w.contains("\n********************\n") || w.contains("\n****************\n"), "{w}");
        assert!(w.ends_with("short\n"));
        // Mutation: a split word that ignores the room left (`drain(..room)` → `drain(..)`) → fails.
        assert!(wrap("x abcdefghijklmnopqrstuvwxyz0123456789", 10).lines().all(|l| columns(l) <= 10));
        assert_eq!(wrap(text, 500), text, "nothing changes when every line fits");
    }

    #[test]
    fn a_table_too_wide_becomes_records() {
        let mut t = crate::report::table::new_table(&["Top", "Throughput (token/s)", "parallel"]);
        t.add_row(vec!["1", "12345.67", "TP=8 | PP=1 | DP=1"]);
        t.add_row(vec!["2", "2345.67", "TP=4 | PP=1 | DP=2"]);
        assert_eq!(fit(t.clone(), None, true), fit(t.clone(), Some(1000), true), "a table that fits is unchanged");
        let narrow = fit(t.clone(), Some(50), true);
        assert!(narrow.lines().all(|l| columns(l) <= 50) && narrow.contains("TP=8 | PP=1 | DP=1"), "{narrow}");
        let records = fit(t, Some(34), true);
        assert!(records.starts_with("Top: 1\n  Throughput (token/s): 12345.67\n"), "{records}");
        assert!(records.lines().all(|l| columns(l) <= 34), "{records}");
    }
}
