//! What the commands that talk to a running daemon read of the config: only what locates it.
//!
//! `antler status`, and `chat`, `agents`, `skills`, `mcp` and `usage` while a daemon runs, use
//! the daemon's configuration, not their own copy. Requiring every secret to be resolvable
//! (or the whole file to be valid) made them fail where the daemon works: a shell without the
//! service's environment, or a config edit the running daemon rejected (and `antler status` is
//! Docker's health check). So they decode the file with its problems set aside and take only
//! the data dir, the listen address and the API users from it, each only if its own part of
//! the file is sound.

use std::path::{Path, PathBuf};

use crate::config::AppConfig;
use crate::config::env::EnvSource;
use crate::config::load::{
    ConfigError, ConfigOrigin, DEFAULT_CONFIG_YAML, decode_text, resolve_config_path,
};
use crate::config::problem::is_within;

/// The locating parts of a config, read leniently.
#[derive(Clone, Debug)]
pub struct Locator {
    /// The file the search found (or was told), or the embedded default.
    pub origin: ConfigOrigin,
    /// The config with its problems replaced by defaults: use it only while a daemon answers
    /// (for its data dir and user names), never to run anything. `None`: unreadable.
    pub config: Option<AppConfig>,
    /// The data dir, unless the part of the file that sets it has a problem.
    pub data_dir: Option<PathBuf>,
    /// No config file was found and `ANTLER_HOME` is unset: the data dir is `./.antler` of
    /// whatever directory the command runs in, so a daemon elsewhere is likelier meant.
    pub implicit_data_dir: bool,
    /// `gateway.listen`, unless its part of the file has a problem.
    pub listen: Option<String>,
    /// Why the file could not be read at all (unreadable, not YAML).
    pub problem: Option<String>,
}

/// Reads the config `antler run` would load (same search), keeping what locates the daemon.
pub fn read_locator(flag: Option<&Path>, env: &dyn EnvSource, cwd: &Path) -> Locator {
    let path = resolve_config_path(flag, env, cwd);
    let origin = path
        .clone()
        .map_or(ConfigOrigin::Embedded, ConfigOrigin::File);
    let implicit_data_dir =
        path.is_none() && env.get("ANTLER_HOME").is_none_or(|home| home.is_empty());
    let text = match &path {
        Some(path) => std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.clone(),
            source,
        }),
        None => Ok(DEFAULT_CONFIG_YAML.to_string()),
    };
    let decoded = text.and_then(|text| decode_text(&text, &origin, env, cwd));
    let mut locator = Locator {
        origin,
        config: None,
        data_dir: None,
        implicit_data_dir,
        listen: None,
        problem: None,
    };
    match decoded {
        Ok(decoded) => {
            // A problem at the key, under it or at an enclosing key makes its value unknown.
            let touches = |key: &str, path: &str| is_within(key, path) || is_within(path, key);
            let sound = |key: &str| {
                !decoded.problems.iter().any(|p| touches(key, &p.path))
                    && !decoded.patched.iter().any(|path| touches(key, path))
            };
            if let Some(config) = &decoded.config {
                locator.data_dir = sound("data_dir").then(|| config.data_dir());
                locator.listen = sound("gateway.listen").then(|| config.gateway.listen.clone());
            }
            locator.config = decoded.config;
        }
        Err(error) => locator.problem = Some(error.to_string()),
    }
    locator
}

impl Locator {
    /// The config for a command served by a daemon of `data_dir`: this one's, leniently read,
    /// with the daemon's data dir.
    pub fn config_for_daemon(&self, data_dir: &Path) -> AppConfig {
        let mut config = self.config.clone().unwrap_or_default();
        config.data_dir = Some(data_dir.to_path_buf());
        config
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MapEnv;

    fn write(dir: &Path, text: &str) -> PathBuf {
        let path = dir.join("config.yaml");
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn unresolvable_secrets_and_invalid_parts_are_set_aside() {
        let tmp = tempfile::tempdir().unwrap();
        let path = write(
            tmp.path(),
            "data_dir: /srv/antler\n\
             models: [{name: m, model: x, base_url: 'http://h/v1', api_key: $NOPE_KEY}]\n\
             gateway:\n  listen: 127.0.0.1:9999\n  backlog: many\n  \
             api_tokens: [{token: $ANTLER_API_TOKEN, user: alice}]\n\
             no_such_key: 1\n",
        );
        let locator = read_locator(Some(&path), &MapEnv::new(), tmp.path());
        assert_eq!(locator.data_dir, Some(PathBuf::from("/srv/antler")));
        assert_eq!(locator.listen.as_deref(), Some("127.0.0.1:9999"));
        assert!(!locator.implicit_data_dir);
        let config = locator.config.unwrap();
        assert_eq!(config.gateway.api_tokens[0].user, "alice");
        // The strict loader refuses the same file.
        assert!(crate::config::load_config(Some(&path), &MapEnv::new(), tmp.path()).is_err());
    }

    #[test]
    fn a_broken_data_dir_or_listen_is_unknown_not_guessed() {
        let tmp = tempfile::tempdir().unwrap();
        let path = write(tmp.path(), "data_dir: $NO_DIR\ngateway: {listen: [1]}\n");
        let locator = read_locator(Some(&path), &MapEnv::new(), tmp.path());
        assert_eq!(locator.data_dir, None);
        assert_eq!(locator.listen, None);
        let path = write(tmp.path(), "data_dir: [unclosed\n");
        let locator = read_locator(Some(&path), &MapEnv::new(), tmp.path());
        assert!(locator.problem.unwrap().contains("not valid yaml"));
        assert_eq!(locator.origin, ConfigOrigin::File(path));
        let missing = tmp.path().join("missing.yaml");
        let locator = read_locator(Some(&missing), &MapEnv::new(), tmp.path());
        assert!(locator.problem.unwrap().contains("cannot read config file"));
    }

    #[test]
    fn only_the_embedded_default_without_antler_home_is_implicit() {
        let tmp = tempfile::tempdir().unwrap();
        let locator = read_locator(None, &MapEnv::new(), tmp.path());
        assert_eq!(locator.origin, ConfigOrigin::Embedded);
        assert!(locator.implicit_data_dir);
        assert_eq!(locator.data_dir, Some(tmp.path().join(".antler")));
        let env = MapEnv::new().with("ANTLER_HOME", "/var/lib/antler");
        let locator = read_locator(None, &env, tmp.path());
        assert!(!locator.implicit_data_dir);
        assert_eq!(locator.data_dir, Some(PathBuf::from("/var/lib/antler")));
    }
}
