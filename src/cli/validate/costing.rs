//! The capacity-planning flags this module owns: `--device-hour-cost` (one price, or a YAML
//! file of prices per device profile) and `--plan-replicas WINDOW` (a duration with its unit,
//! with `--arrival trace`, in aggregation, with a simulator engine).

use crate::cli::args::RawArgs;
use crate::error::Error;
use crate::hardware::{DeviceProfile, DeviceRegistry};
use crate::plan::{DeviceHourCost, EngineKind, Mode};
use crate::workload::arrival::ArrivalProcess;
use std::collections::BTreeMap;

/// Most windows a replica plan may have: each is searched with a few simulations of its own
/// requests, so the count bounds the plan's time whatever the trace (a day in 15-minute windows
/// is 96; a 116-day trace needs windows of an hour or more).
pub const MAX_REPLICA_WINDOWS: u64 = 4096;

/// A price: a finite number of USD, at least 0.
fn price(flag: &str, text: &str) -> Result<f64, Error> {
    let v: f64 = text.trim().parse().map_err(|_| Error::invalid(flag, text, "a price in USD per device-hour (≥ 0), or a .yaml file"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(Error::invalid(flag, text, "a finite price in USD per device-hour, at least 0"));
    }
    Ok(v)
}

/// `--device-hour-cost USD|FILE`: a number is the price of every device; a path ending in
/// `.yaml` or `.yml` is a mapping of device profile names (as `--list-devices` names them, or
/// any name `--device` accepts) to prices. A name no profile has, a price that is not a finite
/// number ≥ 0, and a device of the run without a price are usage errors naming them.
pub(crate) fn validate_device_hour_cost(
    raw: &RawArgs,
    registry: &DeviceRegistry,
    devices: &[DeviceProfile],
) -> Result<Option<DeviceHourCost>, Error> {
    const FLAG: &str = "--device-hour-cost";
    let Some(given) = raw.device_hour_cost.as_deref() else { return Ok(None) };
    let lower = given.trim().to_lowercase();
    if !(lower.ends_with(".yaml") || lower.ends_with(".yml")) {
        return Ok(Some(DeviceHourCost::All(price(FLAG, given)?)));
    }
    let path = std::path::Path::new(given.trim());
    let text = crate::util::read_bounded(path, crate::util::MAX_CONFIG_BYTES).map_err(|e| Error::invalid(FLAG, given, e.to_string()))?;
    let map: BTreeMap<String, serde_yaml::Value> = crate::yaml::from_str(&text)
        .map_err(|e| Error::invalid(FLAG, given, format!("a mapping of device profile names to USD per device-hour: {e}")))?;
    let mut prices = BTreeMap::new();
    for (name, value) in &map {
        let profile = registry
            .get(name)
            .map_err(|_| Error::invalid(FLAG, given, format!("`{name}` is not a device profile (see --list-devices)")))?;
        let text = match value {
            serde_yaml::Value::Number(n) => n.to_string(),
            other => format!("{other:?}"),
        };
        let p = price(FLAG, &text).map_err(|_| Error::invalid(FLAG, given, format!("{name}: `{text}` is not a price ≥ 0 in USD")))?;
        prices.insert(profile.name.clone(), p);
    }
    if let Some(d) = devices.iter().find(|d| !prices.contains_key(&d.name)) {
        return Err(Error::invalid(FLAG, given, format!("no price for device profile {}, which the run uses", d.name)));
    }
    Ok(Some(DeviceHourCost::PerProfile { file: given.to_string(), prices }))
}

/// A duration with its unit, in seconds: `900s`, `15m` (or `min`), `1h`, `1.5h`.
pub fn parse_duration_s(text: &str) -> Result<f64, String> {
    let t = text.trim().to_lowercase();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let scale = match unit.trim() {
        "s" | "sec" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "" => return Err(format!("`{text}` has no unit: give a duration such as 900s, 15m or 1h")),
        u => return Err(format!("`{u}` is not a unit: give a duration such as 900s, 15m or 1h (units s, m, h)")),
    };
    let v: f64 = number.parse().map_err(|_| format!("`{text}` is not a duration such as 900s, 15m or 1h"))?;
    let seconds = v * scale;
    if !(seconds.is_finite() && seconds >= 1.0) {
        return Err(format!("`{text}` is shorter than a second"));
    }
    Ok(seconds)
}

/// `--plan-replicas WINDOW`: the window in seconds, when the run can plan replicas: a trace to
/// cut into windows, aggregation (one kind of instance to count) and a simulator engine.
pub(crate) fn validate_plan_replicas(
    raw: &RawArgs,
    mode: &Mode,
    engine: EngineKind,
    arrival: &ArrivalProcess,
) -> Result<Option<f64>, Error> {
    const FLAG: &str = "--plan-replicas";
    let Some(given) = raw.plan_replicas.as_deref() else { return Ok(None) };
    let window = parse_duration_s(given).map_err(|m| Error::invalid(FLAG, given, m))?;
    let ArrivalProcess::Trace(trace) = arrival else {
        return Err(Error::requires(FLAG, "--arrival trace", "--plan-replicas cuts a trace into windows: give --arrival trace FILE"));
    };
    if engine == EngineKind::Analytic {
        return Err(Error::conflict(FLAG, "--engine analytic", "--plan-replicas simulates the trace: use --engine sim"));
    }
    if !matches!(mode, Mode::Aggregation) {
        return Err(Error::conflict(
            FLAG,
            "--disagg",
            "--plan-replicas counts aggregated instances: drop --disagg and the P/D ratio flags",
        ));
    }
    let span = trace.requests.last().map_or(0.0, |r| r.arrival_s);
    let windows = (span / window).floor() as u64 + 1;
    if windows > MAX_REPLICA_WINDOWS {
        return Err(Error::invalid(
            FLAG,
            given,
            format!("the trace spans {span:.0} s: {windows} windows, more than {MAX_REPLICA_WINDOWS}; give a longer window"),
        ));
    }
    Ok(Some(window))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_need_a_unit() {
        assert_eq!(parse_duration_s("900s"), Ok(900.0));
        assert_eq!(parse_duration_s("15m"), Ok(900.0));
        assert_eq!(parse_duration_s("15min"), Ok(900.0));
        assert_eq!(parse_duration_s("1.5h"), Ok(5400.0));
        assert_eq!(parse_duration_s(" 2H "), Ok(7200.0));
        assert!(parse_duration_s("900").unwrap_err().contains("no unit"));
        assert!(parse_duration_s("15d").unwrap_err().contains("not a unit"));
        assert!(parse_duration_s("0.5s").unwrap_err().contains("shorter than a second"));
        assert!(parse_duration_s("m").is_err());
        assert!(parse_duration_s("1.2.3m").is_err());
    }
}
