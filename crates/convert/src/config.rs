//! `conversion:`: the limits of the child process that turns untrusted bytes (uploaded
//! documents, fetched web pages) into Markdown.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Least `conversion.memory_mb`: below it the converter cannot even start.
pub const MIN_CONVERSION_MEMORY_MB: u64 = 128;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ConversionConfig {
    /// Address space of one converter process, in MiB. Documents
    /// (`uploads.auto_convert_documents`) and pages `web_fetch` reads are parsed in a child
    /// process of their own, so a document that needs more (a PDF stream or a spreadsheet's
    /// shared strings that inflate to gigabytes) stops that child, not the daemon: the upload
    /// is kept without a Markdown copy and the agent is told why. At least 128.
    pub memory_mb: u64,
    /// Seconds one conversion may take (wall clock, and the same in CPU time) before the child
    /// is killed. Also how long a conversion waits for a free slot (`max_concurrent`).
    pub timeout_seconds: u64,
    /// Markdown one conversion may produce, in MiB; the child is killed past it.
    pub max_output_mb: u64,
    /// Converter processes running at once; more conversions wait for a slot. Read at start; a
    /// change takes effect after a restart.
    pub max_concurrent: usize,
}

impl Default for ConversionConfig {
    fn default() -> Self {
        Self {
            memory_mb: 512,
            timeout_seconds: 30,
            max_output_mb: 16,
            max_concurrent: 2,
        }
    }
}

impl ConversionConfig {
    /// Each bad value as (its key below `conversion.`, what it must be); the config loader
    /// names the whole key.
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        let mut problems = Vec::new();
        let mut require = |ok: bool, key: &'static str, message: String| {
            if !ok {
                problems.push((key, message));
            }
        };
        require(
            (MIN_CONVERSION_MEMORY_MB..=1024 * 1024).contains(&self.memory_mb),
            "memory_mb",
            format!("must be between {MIN_CONVERSION_MEMORY_MB} and 1048576 (MiB)"),
        );
        require(
            (1..=3600).contains(&self.timeout_seconds),
            "timeout_seconds",
            "must be between 1 and 3600".into(),
        );
        require(
            (1..=4096).contains(&self.max_output_mb),
            "max_output_mb",
            "must be between 1 and 4096 (MiB)".into(),
        );
        require(
            (1..=64).contains(&self.max_concurrent),
            "max_concurrent",
            "must be between 1 and 64".into(),
        );
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_each_bad_value_names_its_key() {
        assert!(ConversionConfig::default().problems().is_empty());
        let bad = ConversionConfig {
            memory_mb: 16,
            timeout_seconds: 0,
            max_output_mb: 0,
            max_concurrent: 0,
        };
        let keys: Vec<&str> = bad.problems().into_iter().map(|(key, _)| key).collect();
        assert_eq!(
            keys,
            [
                "memory_mb",
                "timeout_seconds",
                "max_output_mb",
                "max_concurrent"
            ]
        );
    }
}
