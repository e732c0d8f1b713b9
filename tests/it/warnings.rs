//! Warnings a finished search adds, on stderr and in the JSON `warnings`: a best row that never
//! settled, a best row beyond what the engine's calibration was fitted on, kernels priced by the
//! roofline on a device that has measured tables.

use crate::util::{args, cmd, run_json};

fn warnings(a: &[&str]) -> Vec<String> {
    let v = run_json(a);
    v["warnings"].as_array().unwrap().iter().map(|w| w.as_str().unwrap().to_string()).collect()
}

/// An open loop of 10 requests never reaches a steady window: said in JSON and on stderr.
/// Fails if the non-converged best row is marked in the table only.
#[test]
fn a_best_row_that_never_settled_is_a_warning() {
    let a = [
        "Qwen/Qwen3-8B",
        "--device",
        "TEST_DEVICE",
        "--num-devices",
        "1",
        "--input-length",
        "100",
        "--output-length",
        "500",
        "--arrival",
        "poisson",
        "--request-rate",
        "100",
        "--num-requests",
        "10",
    ];
    let w = warnings(&a);
    assert!(w.iter().any(|w| w.contains("did not reach a steady state")), "{w:?}");
    let out = cmd().args(a).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("warning: TEST_DEVICE: the best aggregated row"));
}

/// gpt-oss-120b on 8 × H200 runs far more sequences per replica than the vLLM calibration's
/// runs (4 to 128); a model family none of its runs had is extrapolated too. Fails if the fit's
/// ranges are not compared with the best row.
#[test]
fn a_best_row_beyond_the_calibration_is_a_warning() {
    let gpt =
        ["openai/gpt-oss-120b", "--device", "H200_SXM", "--num-devices", "8", "--input-length", "1000", "--output-length", "1000", "-q"];
    let w = warnings(&gpt);
    assert!(w.iter().any(|w| w.contains("sequences per replica") && w.contains("4 to 128")), "{w:?}");
    let qwen = ["Qwen/Qwen3-8B", "--device", "H200_SXM", "--num-devices", "1", "--input-length", "1000", "--output-length", "100", "-q"];
    let w = warnings(&qwen);
    assert!(w.iter().any(|w| w.contains("Qwen/Qwen3-8B is of another family")), "{w:?}");
}

/// msmodeling's kernels have no measured tables on H100: every kernel on the roofline, said.
/// Fails if a device with tables is priced by the roofline silently.
#[test]
fn roofline_on_a_device_with_tables_is_a_warning() {
    let a = ["Qwen/Qwen3-8B", "--device", "H100_SXM", "--num-devices", "1", "--input-length", "1000", "--output-length", "100", "-q"];
    let w = warnings(&args(&a, &["--serving-engine", "msmodeling"]));
    assert!(w.iter().any(|w| w.contains("priced by the roofline")), "{w:?}");
    assert!(!warnings(&a).iter().any(|w| w.contains("roofline")));
}
