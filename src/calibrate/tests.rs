//! Unit tests of the calibration harness.
