//! `--width`: the text report fits the given number of columns; without it (stdout a pipe)
//! the layout is unchanged, which the snapshot tests hold byte for byte.

use crate::util::{args, cmd, README_HEADLINE};

/// The README's headline without its terminal charts.
fn headline() -> Vec<&'static str> {
    args(README_HEADLINE, &["--no-plot"])
}

#[test]
fn no_line_of_the_headline_report_exceeds_the_width() {
    // Mutation: ignore the width (`table::render` returning the report before wrapping, or
    // `layout::fit` returning the plain table) → lines of 239+ characters: fails.
    let unlimited = cmd().args(headline()).assert().success();
    let unlimited = String::from_utf8(unlimited.get_output().stdout.clone()).unwrap();
    assert!(unlimited.lines().any(|l| l.chars().count() > 200), "the report needs fitting at all");
    for width in [100, 200] {
        let out = cmd().args(headline()).args(["--width", &width.to_string()]).assert().success();
        let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
        let longest = text.lines().map(|l| l.chars().count()).max().unwrap();
        assert!(longest <= width, "--width {width}: a line of {longest} columns\n{text}");
        // Nothing is lost: the best row and the prose survive the layout.
        for needle in ["3260.27", "TP=8 | PP=1 | DP=1", "Execution profile:", "Bottleneck (", "planning reference"] {
            assert!(text.contains(needle), "--width {width}: {needle} missing\n{text}");
        }
    }
}

#[test]
fn a_width_out_of_range_is_a_usage_error() {
    for bad in ["0", "39", "1001", "wide", "-5"] {
        let out = cmd().args(headline()).args(["--width", bad]).assert().code(2);
        let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
        assert!(err.contains("--width"), "{bad}: {err}");
    }
}
