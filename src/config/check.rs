//! `antler config check [PATH]`: validate a config and print the verdict for the operator.

use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;

use crate::config::AppConfig;
use crate::config::env::EnvSource;
use crate::config::load::{ConfigError, load_config};

/// Exit status of a valid config.
pub const EXIT_OK: i32 = 0;
/// Exit status of a config that cannot be used (`EX_USAGE` of sysexits, as the seed asks).
pub const EXIT_CONFIG_INVALID: i32 = 64;

/// Loads the config as `antler run` would (`path` plays the `--config` flag) and reports.
///
/// Prints `config OK: <path>` and any warnings (including a locked API, see
/// [`locked_api_warning`]), returning [`EXIT_OK`]; or every problem on its own line with its
/// key path, returning [`EXIT_CONFIG_INVALID`]. Everything `antler run` refuses about a config
/// is a problem here: the loader's validation is the same one `run` applies.
pub fn run_check(path: Option<&Path>, env: &dyn EnvSource, cwd: &Path, out: &mut dyn Write) -> i32 {
    // A closed stdout must not turn a verdict into a panic; the exit code still carries it.
    match load_config(path, env, cwd) {
        Ok(loaded) => {
            let _ = writeln!(out, "config OK: {}", loaded.origin);
            let locked = locked_api_warning(&loaded.config);
            for warning in loaded.warnings.iter().chain(&locked) {
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

/// The operator's warning for a listener other hosts can reach with no `gateway.api_tokens`:
/// the daemon starts, but locks its API and web chat until a token is added.
///
/// `None` for a loopback listener, with tokens, or for an unparsable address (a problem the
/// loader reports on its own).
pub fn locked_api_warning(config: &AppConfig) -> Option<String> {
    let gateway = &config.gateway;
    let addr: SocketAddr = gateway.listen.parse().ok()?;
    if addr.ip().is_loopback() || !gateway.api_tokens.is_empty() {
        return None;
    }
    Some(format!(
        "gateway.listen: {addr} is reachable from other hosts and gateway.api_tokens is empty, \
         so the HTTP API (/api/*) and the web chat are locked (401) until there is a token: set \
         ANTLER_API_TOKEN (the token of the user `local`; in Docker Compose, in .env) or add \
         tokens to gateway.api_tokens; /healthz, /readyz and channel webhooks are served. For \
         local use only, listen on 127.0.0.1:8787 instead"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ApiToken, Secret};

    #[test]
    fn only_a_reachable_listener_without_tokens_is_locked() {
        let mut config = AppConfig::default();
        for listen in ["127.0.0.1:8787", "[::1]:8787", "not an address"] {
            config.gateway.listen = listen.into();
            assert_eq!(locked_api_warning(&config), None, "{listen}");
        }
        for listen in ["0.0.0.0:8787", "[::]:8787", "192.0.2.7:80"] {
            config.gateway.listen = listen.into();
            let warning = locked_api_warning(&config).unwrap_or_default();
            assert!(
                warning.contains("gateway.api_tokens"),
                "{listen}: {warning}"
            );
            assert!(warning.contains("locked"), "{listen}: {warning}");
        }
        config.gateway.api_tokens.push(ApiToken {
            token: Secret::new("t"),
            user: "alice".into(),
        });
        assert_eq!(locked_api_warning(&config), None);
    }
}
