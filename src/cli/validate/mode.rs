//! Serving mode (aggregation, disaggregation, P/D ratio planning) and the device count.

use super::Warnings;
use crate::cli::args::RawArgs;
use crate::error::Error;
use crate::hardware::DeviceProfile;
use crate::plan::Mode;

/// The serving mode and `--num-devices` (1 when not given).
pub(crate) fn validate_mode(raw: &RawArgs, warnings: &mut Warnings) -> Result<(Mode, u32), Error> {
    let ratio = raw.enable_optimize_prefill_decode_ratio;
    if ratio && raw.disagg {
        return Err(Error::conflict(
            "--enable-optimize-prefill-decode-ratio",
            "--disagg",
            "--enable-optimize-prefill-decode-ratio cannot be combined with --disagg: P/D ratio planning runs both phases itself; drop --disagg",
        ));
    }
    if !ratio && (raw.prefill_devices_per_instance.is_some() || raw.decode_devices_per_instance.is_some()) {
        return Err(Error::requires(
            "--prefill-devices-per-instance",
            "--enable-optimize-prefill-decode-ratio",
            "--prefill-devices-per-instance / --decode-devices-per-instance require --enable-optimize-prefill-decode-ratio",
        ));
    }
    validate_compare_disagg(raw)?;
    let num_devices_given = raw.num_devices;
    let num_devices = raw.num_devices.unwrap_or(1);
    let mode = if ratio {
        let (Some(p), Some(d)) = (raw.prefill_devices_per_instance, raw.decode_devices_per_instance) else {
            return Err(Error::requires(
                "--enable-optimize-prefill-decode-ratio",
                "--prefill-devices-per-instance",
                "--enable-optimize-prefill-decode-ratio needs both --prefill-devices-per-instance and --decode-devices-per-instance",
            ));
        };
        if let Some(n) = num_devices_given {
            if n < p + d {
                return Err(Error::rejected(
                    "--num-devices",
                    n,
                    format!(
                    "--num-devices {n} cannot hold one prefill instance ({p} devices) and one decode instance ({d} devices); use at least {} or smaller instances",
                    p + d
                ),
                ));
            }
        }
        Mode::PdRatio { prefill_devices: p, decode_devices: d, total_devices: num_devices_given }
    } else if raw.disagg {
        let (p, d) = (raw.ttft_limits.is_some(), raw.tpot_limits.is_some());
        if !p && !d {
            return Err(Error::requires(
                "--disagg",
                "--ttft-limits",
                "--disagg needs --ttft-limits (prefill search) and/or --tpot-limits (decode search); neither was given",
            ));
        }
        Mode::Disaggregation { prefill: p, decode: d }
    } else {
        Mode::Aggregation
    };
    if ratio && raw.ttft_limits.is_none() {
        warnings.push("P/D ratio mode without --ttft-limits: prefill instances are searched without a TTFT limit");
    }
    Ok((mode, num_devices))
}

/// `--compare-disagg` compares deployments of aggregation's device count under a closed loop:
/// it needs room for one prefill and one decode device, and an open loop's fixed offered load
/// would make every deployment deliver the same tokens/s (unless it is a sizing run's target,
/// which sizes both kinds of deployment for that load).
fn validate_compare_disagg(raw: &RawArgs) -> Result<(), Error> {
    if !raw.compare_disagg {
        return Ok(());
    }
    for (given, flag) in [(raw.disagg, "--disagg"), (raw.enable_optimize_prefill_decode_ratio, "--enable-optimize-prefill-decode-ratio")] {
        if given {
            return Err(Error::conflict(
                "--compare-disagg",
                flag,
                format!("--compare-disagg compares aggregated serving with P/D on the same devices; it cannot be combined with {flag}"),
            ));
        }
    }
    let n = raw.num_devices.unwrap_or(1);
    if n < 2 {
        return Err(Error::rejected(
            "--num-devices",
            n,
            format!("--compare-disagg needs --num-devices of at least 2 (one prefill and one decode device); got {n}"),
        ));
    }
    // A sizing run's target rate is its arrivals: it sizes both kinds at that load.
    let sizing = raw.target_request_rate.is_some();
    if let Some(kind) = raw.arrival.as_deref().and_then(|a| a.first()).filter(|k| !k.eq_ignore_ascii_case("closed") && !sizing) {
        return Err(Error::conflict(
            "--compare-disagg",
            "--arrival",
            format!(
                "--compare-disagg compares deployments under a closed loop (each at its best concurrency); --arrival {kind} fixes the offered load. Drop one of them"
            ),
        ));
    }
    Ok(())
}

/// Every device profile's communication grid must hold the largest instance of `mode`.
pub(crate) fn validate_device_grids(devices: &[DeviceProfile], mode: &Mode, num_devices: u32) -> Result<(), Error> {
    let needed = match mode {
        Mode::PdRatio { prefill_devices, decode_devices, total_devices } => {
            (*prefill_devices).max(*decode_devices).max(total_devices.unwrap_or(0))
        }
        _ => num_devices,
    };
    for d in devices {
        if d.grid_size() < needed as u64 {
            return Err(Error::rejected(
                "--device",
                &d.name,
                format!(
                "device profile {} cannot model {needed} devices (its communication grid {} holds {}); use at most {} devices or another profile",
                d.name,
                d.grid_shape(),
                d.grid_size(),
                d.grid_size()
            ),
            ));
        }
    }
    Ok(())
}
