//! `antler config check [PATH]`: validate a config and print the verdict for the operator.

use std::io::Write;
use std::path::Path;

use crate::config::env::EnvSource;
use crate::config::load::{ConfigError, load_config};

/// Exit status of a valid config.
pub const EXIT_OK: i32 = 0;
/// Exit status of a config that cannot be used (`EX_USAGE` of sysexits, as the seed asks).
pub const EXIT_CONFIG_INVALID: i32 = 64;

/// Loads the config as `antler run` would (`path` plays the `--config` flag) and reports.
///
/// Prints `config OK: <path>` and any warnings, returning [`EXIT_OK`]; or every problem on its
/// own line with its key path, returning [`EXIT_CONFIG_INVALID`].
pub fn run_check(path: Option<&Path>, env: &dyn EnvSource, cwd: &Path, out: &mut dyn Write) -> i32 {
    // A closed stdout must not turn a verdict into a panic; the exit code still carries it.
    match load_config(path, env, cwd) {
        Ok(loaded) => {
            let _ = writeln!(out, "config OK: {}", loaded.origin);
            for warning in &loaded.warnings {
                let _ = writeln!(out, "warning: {warning}");
            }
            EXIT_OK
        }
        Err(ConfigError::Invalid { origin, problems }) => {
            let noun = if problems.len() == 1 {
                "problem"
            } else {
                "problems"
            };
            let _ = writeln!(out, "config {origin}: {} {noun}", problems.len());
            for problem in &problems {
                let _ = writeln!(out, "{problem}");
            }
            EXIT_CONFIG_INVALID
        }
        Err(error) => {
            let _ = writeln!(out, "{error}");
            EXIT_CONFIG_INVALID
        }
    }
}
