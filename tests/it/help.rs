//! `-h` fits a screen; `--help` stays complete.

use crate::util::run_ok;

/// Fails if an option loses `hide_short_help` in `RawArgs::parser` (every option back in `-h`:
/// 270 lines) or if a short text wraps over several lines.
#[test]
fn short_help_fits_sixty_lines() {
    let short = run_ok(&["-h"]);
    assert!(short.lines().count() <= 60, "-h has {} lines:\n{short}", short.lines().count());
    for flag in ["--device", "--input-length", "--tpot-limits", "--emit", "--output"] {
        assert!(short.contains(flag), "-h shows {flag}:\n{short}");
    }
}

/// Fails if a hidden option disappears from `--help` too (`hide` instead of `hide_short_help`)
/// or if the long text is replaced by the short one.
#[test]
fn long_help_is_complete() {
    let long = run_ok(&["--help"]);
    for flag in ["--token-budget-slack", "--prefix-groups", "--emit-row", "--chrome-trace-file", "--calibration", "--model-id"] {
        assert!(long.contains(flag), "--help shows {flag}");
    }
    assert!(long.contains("vLLM's defaults: 8192"), "--serving-engine keeps its long text");
    assert!(long.contains("Examples:"), "--help ends with the examples");
}

/// The screen's threshold is a constant of the library; `calibrate --help` states it in prose.
/// Fails if one changes without the other (e.g. TPOT_DROP_LIMIT set to 0.25 with the help
/// still saying 30 %).
#[test]
fn calibrate_help_states_the_screens_threshold() {
    let help = run_ok(&["calibrate", "--help"]);
    let limit = format!("{} %", (throughput_optimizer::calibrate::calibrator::TPOT_DROP_LIMIT * 100.0).round());
    assert!(help.split_whitespace().collect::<Vec<_>>().join(" ").contains(&format!("more than {limit} from one")), "{help}");
}
