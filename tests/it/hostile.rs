//! The adversarial suite: hostile inputs (endless files, huge counts, non-physical devices,
//! values that look like flags, unwritable outputs) each end in exit 2 (input) or 1 (runtime)
//! with a message naming the field, within 10 s of wall time and 1 GB of address space (the
//! binary runs under `prlimit --as`). No case may panic (101) or abort (134).
//!
//! Each case names, in a comment, the guard whose removal makes it fail.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Wall time allowed to one case.
const WALL: Duration = Duration::from_secs(10);
/// Address space allowed to the binary, in bytes.
const MEMORY: u64 = 1_000_000_000;
const Q: &[&str] = &["Qwen/Qwen3-8B", "--num-devices", "2"];
const SHORT: &[&str] = &["--input-length", "100", "--output-length", "10"];

struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Run the binary with `args` (stdin from `stdin`, or empty) under the memory bound, killing it
/// after [`WALL`]; the case fails if it ran longer.
fn run(dir: &Path, args: &[&str], stdin: Option<&Path>, stdout: Option<&Path>) -> Outcome {
    run_within(dir, args, stdin, stdout, WALL)
}

/// [`run`] with its own wall bound.
fn run_within(dir: &Path, args: &[&str], stdin: Option<&Path>, stdout: Option<&Path>, wall: Duration) -> Outcome {
    let bin = assert_cmd::cargo::cargo_bin("throughput-optimizer");
    let mut cmd = Command::new("prlimit");
    cmd.arg(format!("--as={MEMORY}")).arg("--").arg(bin).args(args).current_dir(dir);
    cmd.stdin(match stdin {
        Some(p) => Stdio::from(std::fs::File::open(p).unwrap()),
        None => Stdio::null(),
    });
    let out_path = dir.join(format!(".stdout.{}", std::process::id() as u128 * 1000 + rand_suffix()));
    cmd.stdout(match stdout {
        Some(p) => Stdio::from(std::fs::OpenOptions::new().write(true).open(p).unwrap()),
        None => Stdio::from(std::fs::File::create(&out_path).unwrap()),
    });
    let err_path = out_path.with_extension("stderr");
    cmd.stderr(Stdio::from(std::fs::File::create(&err_path).unwrap()));
    let started = Instant::now();
    let mut child = cmd.spawn().expect("prlimit (util-linux) runs the binary");
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > wall {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?} ran longer than {wall:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let read = |p: &Path| String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned();
    let o = Outcome { code: status.code(), stdout: read(&out_path), stderr: read(&err_path) };
    let _ = std::fs::remove_file(&out_path);
    let _ = std::fs::remove_file(&err_path);
    o
}

fn rand_suffix() -> u128 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed) as u128
}

/// Assert exit `code` and that stderr names every one of `parts`.
fn expect(o: &Outcome, args: &[&str], code: i32, parts: &[&str]) {
    assert!(!o.stderr.contains("panicked"), "{args:?} panicked:\n{}", o.stderr);
    assert_eq!(o.code, Some(code), "{args:?}: exit {:?}, stderr:\n{}", o.code, o.stderr);
    for p in parts {
        assert!(o.stderr.contains(p), "stderr of {args:?} does not contain {p:?}:\n{}", o.stderr);
    }
}

/// A scratch directory with the hostile fixtures.
fn fixtures() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let w = |name: &str, text: &str| std::fs::write(d.join(name), text).unwrap();
    let device = crate::util::builtin_profile("TEST_DEVICE");
    let dev = |name: &str, from: &str, to: &str| {
        assert!(device.contains(from), "{from}");
        w(name, &device.replace("name: TEST_DEVICE", "name: ODD").replace(from, to));
    };
    dev("bw.yaml", "memory_bandwidth: 1.6 TiB/s", "memory_bandwidth: 0.000000001 MB/s");
    dev("flops.yaml", "bf16: 353.9", "bf16: 1e-300");
    dev("host.yaml", "host_overhead_us: 0", "host_overhead_us: 1e300");
    dev("host14.yaml", "host_overhead_us: 0", "host_overhead_us: 1e14");
    dev("mem1.yaml", "memory: 64 GiB", "memory: 1 MB");
    dev("memhuge.yaml", "memory: 64 GiB", "memory: 1e12 TiB");
    dev(
        "grid.yaml",
        "  - {size: 256,",
        "  - {size: 27905, bandwidth: 50 GB/s, latency_us: 10, efficiency: 0.7, topology: clos}\n  - {size: 429509837, bandwidth: 50 GB/s, latency_us: 10, efficiency: 0.7, topology: clos}\n  - {size: 384773,",
    );
    w("empty.yaml", "[]\n");
    w(
        "weights.yaml",
        "bins:\n  - {min_tokens: 1, max_tokens: 100, weight: 1e308}\n  - {min_tokens: 100, max_tokens: 200, weight: 1e308}\n",
    );
    let many: String =
        (0..20_000).map(|i| format!("  - {{min_tokens: {}, max_tokens: {}, weight: 1}}\n", i * 10 + 1, i * 10 + 11)).collect();
    w("bins20k.yaml", &format!("bins:\n{many}"));
    w("late.csv", "arrival_s,input_tokens,output_tokens\n0,100,10\n1e300,100,10\n");
    w("empty.csv", "");
    w("bom.csv", "\u{feff}\"arrival_s\",input_tokens,output_tokens\n0,100,10\n0.5,120,12\n");
    w("dup.csv", "arrival_s,input_tokens,output_tokens,input_tokens\n0,100,10,100\n");
    let rows: String = (0..100_001).map(|i| format!("{},100,10\n", i as f64 * 0.001)).collect();
    w("long.csv", &format!("arrival_s,input_tokens,output_tokens\n{rows}"));
    w("deep.yaml", &format!("model: {}\n", "[".repeat(100_000)));
    let scenario = |extra: &str| format!("model: Qwen/Qwen3-8B\nnum_devices: 2\ninput_length: 100\noutput_length: 10\n{extra}");
    w("s_list.yaml", &scenario("tp_sizes: ['--list-devices']\n"));
    w("s_out.yaml", &scenario("tp_sizes: ['--output-file=out.txt']\n"));
    w("s_model.yaml", "model: '--list-models'\nnum_devices: 2\ninput_length: 100\noutput_length: 10\n");
    w("s_ok.yaml", &scenario(""));
    w("answer.txt", &format!("{}\n", "x".repeat(2_000_000)));
    let config = std::fs::read_to_string(crate::util::fixture("qwen3-8b-config.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&config).unwrap();
    let variant = |name: &str, edit: &dyn Fn(&mut serde_json::Map<String, serde_json::Value>)| {
        let mut v = json.clone();
        edit(v.as_object_mut().unwrap());
        w(name, &v.to_string());
    };
    variant("layers.json", &|m| {
        m.insert("model_type".into(), "qwen3_5".into());
        m.insert("num_hidden_layers".into(), 1_000_000_000u64.into());
        for k in ["linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim"] {
            m.insert(k.into(), 16.into());
        }
    });
    variant("wide.json", &|m| {
        m.insert("hidden_size".into(), (1u64 << 54).into());
    });
    variant("vision.json", &|m| {
        m.insert("model_type".into(), "qwen3_vl".into());
        m.insert(
            "vision_config".into(),
            serde_json::json!({"depth": 4294967297u64, "hidden_size": 1152, "intermediate_size": 4304, "num_heads": 16, "patch_size": 16}),
        );
    });
    dir
}

fn case(dir: &Path, args: &[&str], code: i32, parts: &[&str]) -> Outcome {
    let o = run(dir, args, None, None);
    expect(&o, args, code, parts);
    o
}

fn with<'a>(base: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
    base.iter().chain(extra).copied().collect()
}

#[test]
fn endless_and_special_input_files_are_refused() {
    let dir = fixtures();
    let d = dir.path();
    // Each fails if util::read_bounded (or Trace::load's own check) stops refusing non-regular files:
    // /dev/zero would be read until memory runs out.
    case(d, &["--scenario", "/dev/zero"], 2, &["--scenario /dev/zero", "not a regular file"]);
    case(d, &with(&with(Q, SHORT), &["--device-file", "/dev/zero"]), 2, &["--device-file /dev/zero", "not a regular file"]);
    case(d, &with(Q, &["--length-distribution", "/dev/zero", "--output-length", "10"]), 2, &["--length-distribution /dev/zero"]);
    case(d, &with(Q, &["--arrival", "trace", "/dev/zero"]), 2, &["--arrival trace /dev/zero", "not a regular file"]);
    // Fails if Prompter::read_line reads an unbounded line.
    let o = run(d, &["--interactive"], Some(Path::new("/dev/zero")), None);
    expect(&o, &["--interactive"], 2, &["--interactive", "longer than 4096 bytes"]);
    let o = run(d, &["--interactive"], Some(&d.join("answer.txt")), None);
    expect(&o, &["--interactive < 2 MB"], 2, &["--interactive", "longer than 4096 bytes"]);
    // Fails if yaml::check_nesting is not called before the parser (36 s before).
    case(d, &["--scenario", "deep.yaml"], 2, &["--scenario deep.yaml", "nested more than 64 levels"]);
}

#[test]
fn counts_that_size_memory_are_bounded() {
    let dir = fixtures();
    let d = dir.path();
    // Fails if validate_sim drops the MAX_REQUESTS check (6.5 GB, then an abort).
    let nreq = ["--arrival", "poisson", "--request-rate", "1000000", "--num-requests", "4294967295"];
    case(d, &with(&with(Q, SHORT), &nreq), 2, &["--num-requests 4294967295", "at most 1000000"]);
    // Ten million requests are refused before anything runs, naming the flag and the limit.
    let ten_m = ["--arrival", "poisson", "--request-rate", "200", "--num-requests", "10000000"];
    case(d, &with(&with(Q, SHORT), &ten_m), 2, &["--num-requests 10000000", "at most 1000000"]);
    // Fails if hf::limit stops bounding layers (one 24 GB allocation).
    case(d, &["./layers.json", "--num-devices", "2", "--input-length", "100", "--output-length", "10"], 2, &["`num_hidden_layers`"]);
    // Fails if dimensions are unbounded (2^54 shows 0.0B parameters).
    case(d, &["./wide.json", "--num-devices", "2", "--input-length", "100", "--output-length", "10"], 2, &["`hidden_size`"]);
    // Fails if the vision depth is truncated with `as u32`.
    case(d, &["./vision.json", "--num-devices", "2", "--input-length", "100", "--output-length", "10"], 2, &["`vision_config.depth`"]);
    // Fails if validate_bins drops MAX_BINS (20 k bins took 5.5 s and gigabytes of histograms).
    case(d, &with(Q, &["--length-distribution", "bins20k.yaml", "--output-length", "10"]), 2, &["`bins` has 20000 bins"]);
    // Fails if validate_bins drops MAX_WEIGHT (the sum overflows to infinity).
    case(d, &with(Q, &["--length-distribution", "weights.yaml", "--output-length", "10"]), 2, &["`weight` is 1e308"]);
    // Fails if validate_images drops MAX_IMAGES_PER_REQUEST.
    let vl = ["Qwen/Qwen3-VL-8B-Instruct", "--num-devices", "2", "--image-height", "512", "--image-width", "512"];
    case(d, &with(&with(&vl, SHORT), &["--image-batch-size", "4294967295"]), 2, &["--image-batch-size 4294967295"]);
    // Fails if parse_csv stops counting requests against MAX_TRACE_REQUESTS.
    case(d, &with(Q, &["--arrival", "trace", "long.csv"]), 2, &["--arrival trace long.csv", "more than 100000 requests"]);
}

#[test]
fn traces_are_read_as_csv_with_clear_errors() {
    let dir = fixtures();
    let d = dir.path();
    // Fails if check_request drops MAX_ARRIVAL_S (1e300 clamped silently).
    case(d, &with(Q, &["--arrival", "trace", "late.csv"]), 2, &["line 3: field `arrival_s`: 1e300 is later than"]);
    // Fails if csv_columns accepts a repeated column.
    case(d, &with(Q, &["--arrival", "trace", "dup.csv"]), 2, &["column `input_tokens` appears twice"]);
    // Fails if an empty file reaches the header parser ("unknown column ``").
    case(d, &with(Q, &["--arrival", "trace", "empty.csv"]), 2, &["the file is empty"]);
    // Fails if the byte-order mark is kept in the first column name, or quoted headers are not
    // read as CSV.
    let o = case(d, &with(Q, &["--arrival", "trace", "bom.csv", "--quiet"]), 0, &[]);
    assert!(o.stdout.contains("trace"), "{}", o.stdout);
}

#[test]
fn non_physical_devices_are_refused_by_field() {
    let dir = fixtures();
    let d = dir.path();
    let slo = ["--device", "ODD", "--ttft-limits", "100", "--tpot-limits", "20"];
    // Each fails if its `physical` range check in DeviceProfile::validate is removed.
    for (file, field) in [
        ("bw.yaml", "`memory_bandwidth`"),
        ("flops.yaml", "`matrix_tflops.bf16`"),
        ("host.yaml", "`host_overhead_us`"),
        ("host14.yaml", "`host_overhead_us`"),
        ("mem1.yaml", "`memory`"),
        ("memhuge.yaml", "`memory`"),
    ] {
        case(d, &with(&with(&with(Q, SHORT), &["--device-file", file]), &slo), 2, &[&format!("--device-file {file}"), field]);
    }
    // Fails if grid_size wraps instead of saturating (the product wraps to 8 devices).
    case(d, &with(&with(Q, SHORT), &["--device-file", "grid.yaml"]), 2, &["`comm_grid`", "at most 1048576"]);
    // Fails if add_text accepts an empty list.
    case(d, &with(&with(Q, SHORT), &["--device-file", "empty.yaml"]), 2, &["--device-file empty.yaml", "no device profile"]);
}

#[test]
fn slow_simulations_are_refused_or_stopped() {
    let dir = fixtures();
    let d = dir.path();
    // Fails if check_budget_work drops MAX_CHUNKS (more than 600 s before).
    let tiny = ["--input-length", "100000", "--output-length", "10", "--max-batched-tokens", "1"];
    case(d, &with(Q, &tiny), 2, &["--max-batched-tokens 1", "prefill steps"]);
    // Fails if check_budget_work drops MAX_BUDGET_VALUES (39 s before).
    let values: Vec<String> = (1..=1000).map(|v| v.to_string()).collect();
    let mut args = with(&with(Q, SHORT), &["--max-batched-tokens"]);
    args.extend(values.iter().map(String::as_str));
    case(d, &args, 2, &["--max-batched-tokens", "at most 32 values"]);
    // Fails if SimEngine stops metering WORK_BUDGET (179 s before: a 4-token budget caps decode
    // at 4 sequences while the batch search keeps growing).
    // The budget is ten million engine steps: 4.2 s with the release binary on the 2-core
    // machine, about 7 s with the test profile alone and more while the other tests share the
    // cores, so this one case gets a wider bound than WALL.
    let args = with(Q, &["--input-length", "1", "--output-length", "200"]);
    let o = run_within(d, &args, None, None, Duration::from_secs(60));
    expect(&o, &args, 1, &["work budget", "--max-batched-tokens"]);
}

#[test]
fn outputs_are_checked_first_and_written_whole() {
    let dir = fixtures();
    let d = dir.path();
    let fast = with(&with(Q, SHORT), &["--engine", "analytic"]);
    // Fails if write_stdout ignores errors other than EPIPE (exit 0 with nothing written).
    let full = Path::new("/dev/full");
    let o = run(d, &fast, None, Some(full));
    expect(&o, &fast, 1, &["stdout", "No space left"]);
    // A closed pipe is not an error. Fails if write_stdout reports EPIPE.
    let bin = assert_cmd::cargo::cargo_bin("throughput-optimizer");
    let mut child = Command::new(bin).args(&fast).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    // Fails if check_output_path stops comparing outputs with inputs (the trace was overwritten).
    std::fs::copy(d.join("bom.csv"), d.join("keep.csv")).unwrap();
    case(d, &with(Q, &["--arrival", "trace", "keep.csv", "--output-file", "keep.csv"]), 2, &["--output-file keep.csv", "input file"]);
    assert!(std::fs::read_to_string(d.join("keep.csv")).unwrap().contains("arrival_s"));
    // Each fails if its path is checked only after the search.
    for flag in ["--output-file", "--plot-file", "--chrome-trace-file", "--requests-file", "--operator-trace-file"] {
        case(d, &with(&fast, &[flag, "missing/dir/out.svg"]), 2, &[flag, "does not exist"]);
    }
    // The report replaces an existing file whole (report::tests::a_failed_write_leaves_the_previous_file
    // covers a failed write; a full disk cannot be staged here), and no temporary file is left.
    let target = d.join("report.txt");
    std::fs::write(&target, "previous").unwrap();
    case(d, &with(&fast, &["--output-file", "report.txt", "--quiet"]), 0, &[]);
    assert!(std::fs::read_to_string(&target).unwrap().contains("Top"), "the report did not replace the old file");
    assert!(std::fs::read_dir(d).unwrap().flatten().all(|e| !e.file_name().to_string_lossy().ends_with(".tmp")));
}

#[test]
fn scenario_values_are_data_never_flags() {
    let dir = fixtures();
    let d = dir.path();
    // Each fails if scenario::to_argv_in passes values as separate arguments again.
    case(d, &["--scenario", "s_list.yaml"], 2, &["line 5: field `tp_sizes`", "'--list-devices'"]);
    case(d, &["--scenario", "s_model.yaml"], 2, &["`--list-models`"]);
    case(d, &["--scenario", "s_out.yaml"], 2, &["field `tp_sizes`"]);
    assert!(!d.join("out.txt").exists(), "a scenario value wrote a file");
    // Fails if run_session accepts --scenario (the answers were dropped silently).
    let mut answers = std::fs::File::create(d.join("answers.txt")).unwrap();
    writeln!(answers, "8\n50\ny").unwrap();
    let o = run(d, &["--interactive", "--scenario", "s_ok.yaml"], Some(&d.join("answers.txt")), None);
    expect(&o, &["--interactive", "--scenario"], 2, &["--interactive cannot be combined with --scenario"]);
}

#[test]
fn unclear_values_get_clear_messages() {
    let dir = fixtures();
    let d = dir.path();
    // Fails if --ttft-limits loses allow_hyphen_values ("unexpected argument '-i'").
    case(d, &with(&with(Q, SHORT), &["--ttft-limits", "-inf"]), 2, &["'--ttft-limits <MS>'", "-inf"]);
    // Fails if --seed loses its value parser ("invalid digit").
    case(d, &with(&with(Q, SHORT), &["--seed", "-1"]), 2, &["'--seed <SEED>'", "whole number from 0"]);
    // Fails if the memory range check is removed: --reserved-memory-gb was blamed.
    let o = case(d, &with(&with(Q, SHORT), &["--device-file", "mem1.yaml", "--device", "ODD"]), 2, &["field `memory`"]);
    assert!(!o.stderr.contains("--reserved-memory-gb"), "{}", o.stderr);
}

/// Inputs the `price` and `calibrate` commands used to read and then ignore or mis-name.
#[test]
fn price_and_calibrate_refuse_what_they_would_ignore() {
    let dir = fixtures();
    let d = dir.path();
    let vllm = std::fs::read_to_string(format!("{}/profiles/engines/vllm.yaml", env!("CARGO_MANIFEST_DIR"))).unwrap();
    std::fs::write(d.join("lower.yaml"), vllm.replace("device: H200_SXM", "device: h200_sxm")).unwrap();
    // The mark before the first key (before a comment line it went unnoticed).
    let keys: String = vllm.lines().skip_while(|l| l.starts_with('#')).map(|l| format!("{l}\n")).collect();
    std::fs::write(d.join("bom.yaml"), format!("\u{feff}{keys}")).unwrap();
    let dev = crate::util::builtin_profile("H200_SXM").replace("name: H200_SXM", "name: MY_H200");
    assert!(dev.contains("kernel_system: h200_sxm"), "the H200 profile names its tables");
    std::fs::write(d.join("ks.yaml"), dev.replace("kernel_system: h200_sxm", "kernel_system: nonexistent_sys")).unwrap();
    let price = ["price", "meta-llama/Llama-3.1-8B-Instruct", "--device", "H200_SXM", "--decode", "32x2048"];
    // Fails without `check_calibration_engines` in price: the SGLang profile was read and unused.
    let sglang = format!("{}/profiles/engines/sglang.yaml", env!("CARGO_MANIFEST_DIR"));
    case(d, &with(&price, &["--calibration", &sglang]), 2, &["--calibration", "calibrates sglang, but the run simulates vllm"]);
    // Fails without `check_calibrated_devices`: the lower-case entry matched no device.
    case(d, &with(&price, &["--calibration", "lower.yaml"]), 2, &["--calibration lower.yaml", "`h200_sxm`", "write `H200_SXM`"]);
    // Fails if the byte-order mark is not stripped ("missing field `engine`").
    case(d, &with(&price, &["--calibration", "bom.yaml"]), 0, &[]);
    // Fails if the read error drops the flag and the path.
    case(d, &with(&price, &["--calibration", "absent.yaml"]), 2, &["--calibration absent.yaml: cannot read the file"]);
    // Fails without `builtin_kernel_systems`: the device fell back to the roofline unsaid.
    let custom = ["price", "meta-llama/Llama-3.1-8B-Instruct", "--device-file", "ks.yaml", "--device", "MY_H200", "--decode", "1x1"];
    case(d, &custom, 2, &["MY_H200", "field `kernel_system` is `nonexistent_sys`"]);
    // Fails if a shape is trimmed or signed before it is read, or the `@C` part is not echoed.
    case(d, &with(&price[..4], &["--decode", " 1x2048"]), 2, &["--decode  1x2048: not of the form NxM"]);
    case(d, &with(&price[..4], &["--decode", "+1x+2"]), 2, &["--decode +1x+2"]);
    case(d, &with(&price[..4], &["--prefill", "1x0@10"]), 2, &["--prefill 1x0@10"]);
    // Fails if --tp is parsed as u32 (clap's "not in 0..=4294967295") or EP is blamed on --tp.
    case(d, &with(&price, &["--tp", "99999999999"]), 2, &["--tp 99999999999: a number of ranks from 1 to 4096"]);
    let oss = ["price", "openai/gpt-oss-120b", "--device", "H200_SXM", "--ep", "7", "--dp", "7", "--decode", "32x2048"];
    case(d, &oss, 2, &["--ep 7: must divide the model's 128 experts"]);
    // Fails without the range check of the group size (7 was priced).
    let g = with(&price, &["--quantize-linear-action", "MXFP4", "--mxfp4-group-size", "7"]);
    case(d, &g, 2, &["--mxfp4-group-size 7", "power of two from 8 to 256"]);
    // The planner's note on its default EP search range is not printed for a priced layout.
    let ds = ["price", "deepseek-ai/DeepSeek-V3", "--device", "H200_SXM", "--dp", "1024", "--ep", "256", "--decode", "1x1"];
    let o = case(d, &ds, 0, &[]);
    assert!(!o.stderr.contains("default EP range"), "{}", o.stderr);
    // calibrate: a profile of an engine no run names is refused, not read and ignored.
    let sample = format!("{}/tests/fixtures/calibration/measured_sample.csv", env!("CARGO_MANIFEST_DIR"));
    let ms = format!("{}/profiles/engines/msmodeling.yaml", env!("CARGO_MANIFEST_DIR"));
    case(d, &["calibrate", "--measured", &sample, "--calibration", &ms, "-q"], 2, &["calibrates msmodeling, but no measured run"]);
    // calibrate reads only regular files: /dev/zero is refused at once, never read.
    case(d, &["calibrate", "--measured", "/dev/zero"], 2, &["/dev/zero: not a regular file"]);
}
