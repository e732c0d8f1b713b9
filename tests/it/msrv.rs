//! The declared minimum Rust version (`rust-version` in Cargo.toml) against the dependencies
//! actually resolved in Cargo.lock: a crate that needs a newer compiler than the package
//! declares makes the declaration false, and users on the declared version get a build error
//! instead of cargo's clear "requires rustc X" message. Runs `cargo metadata --locked` (no
//! network: `cargo test` has fetched every dependency before this runs, and no extra toolchain).

use serde_json::Value;
use std::process::Command;

/// `1.88`, `1.85.0` → (1, 88, 0).
fn version(s: &str) -> (u64, u64, u64) {
    let mut parts = s.split('.').map(|p| p.parse::<u64>().unwrap_or_else(|_| panic!("`{s}` is not a Rust version")));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

fn metadata() -> Value {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--locked", "--manifest-path", concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")])
        .output()
        .expect("cargo runs");
    assert!(out.status.success(), "cargo metadata failed:\n{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON")
}

/// Fails when `rust-version` in Cargo.toml is lowered below a resolved dependency's (the
/// mutation: `rust-version = "1.85"` while hdrhistogram 7.6 and proptest 1.12 declare 1.88).
#[test]
fn rust_version_is_at_least_every_resolved_dependency_s() {
    let meta = metadata();
    let resolved: std::collections::HashSet<&str> =
        meta["resolve"]["nodes"].as_array().expect("a resolve graph").iter().filter_map(|n| n["id"].as_str()).collect();
    let packages = meta["packages"].as_array().expect("packages");
    let ours = packages.iter().find(|p| p["name"] == "throughput-optimizer").expect("this package");
    let declared = ours["rust_version"].as_str().expect("Cargo.toml declares rust-version");
    let (needed, by) = packages
        .iter()
        .filter(|p| p["id"].as_str().is_some_and(|id| resolved.contains(id)) && p["name"] != "throughput-optimizer")
        .filter_map(|p| Some((version(p["rust_version"].as_str()?), format!("{} {}", p["name"].as_str()?, p["version"].as_str()?))))
        .max()
        .expect("dependencies declare rust-version");
    assert!(
        version(declared) >= needed,
        "Cargo.toml declares rust-version {declared}, but {by} needs {}.{}.{}: raise rust-version (and the README)",
        needed.0,
        needed.1,
        needed.2
    );
}
