//! Finding and loading `config.yaml`: path resolution, YAML → env resolution → typed tree →
//! validation, with every problem collected and reported by key path.

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::config::env::{self, EnvSource};
use crate::config::problem::{ConfigProblem, KeyPath, is_within};
use crate::config::{AppConfig, decode, validate};

/// The repository's `config.yaml`, used when no file is found so `antler run` works anywhere.
pub const DEFAULT_CONFIG_YAML: &str = include_str!("../../config.yaml");

/// File name looked up in the working directory and in `$ANTLER_HOME`.
pub const CONFIG_FILE_NAME: &str = "config.yaml";

/// Where a loaded config came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigOrigin {
    File(PathBuf),
    /// The built-in copy of the repository's `config.yaml`.
    Embedded,
}

impl fmt::Display for ConfigOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File(path) => write!(f, "{}", path.display()),
            Self::Embedded => f.write_str("<embedded default config>"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {}: {source}; check the path and its permissions", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The message never includes the source snippet: the offending line may hold a secret.
    #[error("config {origin} is not valid yaml: {message}; fix the syntax there and retry")]
    Parse {
        origin: ConfigOrigin,
        message: String,
    },
    #[error("{}", render_problems(origin, problems))]
    Invalid {
        origin: ConfigOrigin,
        problems: Vec<ConfigProblem>,
    },
}

impl ConfigError {
    /// The key-path problems of an invalid config (empty for read and parse errors).
    pub fn problems(&self) -> &[ConfigProblem] {
        match self {
            Self::Invalid { problems, .. } => problems,
            Self::Read { .. } | Self::Parse { .. } => &[],
        }
    }
}

fn render_problems(origin: &ConfigOrigin, problems: &[ConfigProblem]) -> String {
    let noun = if problems.len() == 1 {
        "problem"
    } else {
        "problems"
    };
    let mut text = format!(
        "config {origin} has {} {noun}; fix them and retry:",
        problems.len()
    );
    for problem in problems {
        text.push_str("\n  ");
        text.push_str(&problem.to_string());
    }
    text
}

/// A successfully loaded, validated config.
#[derive(Clone, Debug)]
pub struct LoadedConfig {
    pub config: AppConfig,
    pub origin: ConfigOrigin,
    /// Non-fatal notes for the operator (e.g. an old `config_version`); log or print them.
    pub warnings: Vec<String>,
}

/// Which file to load: `--config` flag → `ANTLER_CONFIG` → `./config.yaml` →
/// `$ANTLER_HOME/config.yaml`. `None` means "use the embedded default".
///
/// An explicitly named file (flag or `ANTLER_CONFIG`) is returned even when it does not exist, so
/// the loader reports it instead of silently falling back to the defaults.
pub fn resolve_config_path(
    flag: Option<&Path>,
    env: &dyn EnvSource,
    cwd: &Path,
) -> Option<PathBuf> {
    if let Some(flag) = flag {
        return Some(cwd.join(flag));
    }
    if let Some(named) = non_empty(env.get("ANTLER_CONFIG")) {
        return Some(cwd.join(named));
    }
    let local = cwd.join(CONFIG_FILE_NAME);
    if local.is_file() {
        return Some(local);
    }
    let home = cwd
        .join(non_empty(env.get("ANTLER_HOME"))?)
        .join(CONFIG_FILE_NAME);
    home.is_file().then_some(home)
}

/// Resolves the path (see [`resolve_config_path`]) and loads it, or the embedded default.
pub fn load_config(
    flag: Option<&Path>,
    env: &dyn EnvSource,
    cwd: &Path,
) -> Result<LoadedConfig, ConfigError> {
    match resolve_config_path(flag, env, cwd) {
        Some(path) => load_from_file(&path, env, cwd),
        None => load_embedded_default(env, cwd),
    }
}

/// Remembers which variable each model's `model`, `base_url` and `api_key` came from, so
/// messages about the model name the variable to change.
fn note_model_sources(config: &mut AppConfig, variables: &[(KeyPath, String)]) {
    let variable = |path: String| {
        variables
            .iter()
            .find(|(at, _)| at.to_string() == path)
            .map(|(_, name)| name.clone())
    };
    for (index, model) in config.models.iter_mut().enumerate() {
        model.sources = crate::config::ModelSources {
            index: Some(index),
            model: variable(format!("models[{index}].model")),
            base_url: variable(format!("models[{index}].base_url")),
            api_key: variable(format!("models[{index}].api_key")),
        };
    }
}

/// Loads one file.
pub fn load_from_file(
    path: &Path,
    env: &dyn EnvSource,
    cwd: &Path,
) -> Result<LoadedConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    load_from_str(&text, ConfigOrigin::File(path.to_path_buf()), env, cwd)
}

/// Loads the built-in copy of the repository's `config.yaml`.
pub fn load_embedded_default(env: &dyn EnvSource, cwd: &Path) -> Result<LoadedConfig, ConfigError> {
    load_from_str(DEFAULT_CONFIG_YAML, ConfigOrigin::Embedded, env, cwd)
}

/// Parses, resolves `$ENV` references, decodes and validates YAML text.
///
/// `cwd` anchors relative paths (`data_dir`, `$ANTLER_HOME`).
pub fn load_from_str(
    text: &str,
    origin: ConfigOrigin,
    env: &dyn EnvSource,
    cwd: &Path,
) -> Result<LoadedConfig, ConfigError> {
    let mut tree: Value = serde_saphyr::from_str(text).map_err(|error| ConfigError::Parse {
        origin: origin.clone(),
        message: error.without_snippet().to_string(),
    })?;
    if tree.is_null() {
        // An empty file (or one with only comments) means "all defaults".
        tree = Value::Object(serde_json::Map::new());
    }
    if !tree.is_object() {
        return Err(ConfigError::Invalid {
            origin,
            problems: vec![ConfigProblem::new(
                KeyPath::root().to_string(),
                "the config must be a mapping of keys such as `models:` and `gateway:`",
            )],
        });
    }
    let declared_version = tree.get("config_version").is_some();
    let mut resolution = env::resolve_tree(&mut tree, env);
    let variables = std::mem::take(&mut resolution.variables);
    let decoded = decode::decode(tree, resolution);
    let mut problems = decoded.problems;
    let Some(mut config) = decoded.config else {
        return Err(ConfigError::Invalid { origin, problems });
    };
    normalize(&mut config, env, cwd);
    note_model_sources(&mut config, &variables);
    if config.sandbox.skills_path.is_none() {
        config.sandbox.skills_path = default_skills_dir(&origin, cwd);
    }
    problems.extend(
        validate::validate(&config)
            .into_iter()
            .filter(|problem| !decoded.patched.iter().any(|p| is_within(&problem.path, p))),
    );
    if !problems.is_empty() {
        return Err(ConfigError::Invalid { origin, problems });
    }
    let warnings = validate::version_warnings(declared_version.then_some(config.config_version));
    Ok(LoadedConfig {
        config,
        origin,
        warnings,
    })
}

/// Fills defaults that depend on the environment and cleans values with a documented meaning.
fn normalize(config: &mut AppConfig, env: &dyn EnvSource, cwd: &Path) {
    let data_dir = match config.data_dir.take() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => non_empty(env.get("ANTLER_HOME"))
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(".antler")),
    };
    config.data_dir = Some(cwd.join(data_dir));
    for model in &mut config.models {
        // `api_key: ${ANTLER_MODEL_API_KEY:-}` resolves to "" on a machine without a key: that
        // means "send no key", which local servers such as Ollama expect.
        if model.api_key.as_ref().is_some_and(|key| key.is_empty()) {
            model.api_key = None;
        }
    }
}

/// `skills/public` beside the config file, else in the working directory, if it exists.
fn default_skills_dir(origin: &ConfigOrigin, cwd: &Path) -> Option<PathBuf> {
    let beside_config = match origin {
        ConfigOrigin::File(path) => path.parent().map(|dir| cwd.join(dir).join("skills/public")),
        ConfigOrigin::Embedded => None,
    };
    beside_config
        .into_iter()
        .chain([cwd.join("skills/public")])
        .find(|dir| dir.is_dir())
}

fn non_empty(value: Option<String>) -> Option<String> {
    value.filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::env::MapEnv;

    #[test]
    fn path_resolution_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cwd = dir.path().join("cwd");
        let home = dir.path().join("home");
        std::fs::create_dir_all(&cwd).expect("mkdir");
        std::fs::create_dir_all(&home).expect("mkdir");
        let env = MapEnv::new().with("ANTLER_HOME", home.to_string_lossy());

        assert_eq!(resolve_config_path(None, &env, &cwd), None);
        std::fs::write(home.join("config.yaml"), "").expect("write");
        assert_eq!(
            resolve_config_path(None, &env, &cwd),
            Some(home.join("config.yaml"))
        );
        std::fs::write(cwd.join("config.yaml"), "").expect("write");
        assert_eq!(
            resolve_config_path(None, &env, &cwd),
            Some(cwd.join("config.yaml"))
        );
        let env = env.with("ANTLER_CONFIG", "named.yaml");
        assert_eq!(
            resolve_config_path(None, &env, &cwd),
            Some(cwd.join("named.yaml"))
        );
        assert_eq!(
            resolve_config_path(Some(Path::new("/etc/flag.yaml")), &env, &cwd),
            Some(PathBuf::from("/etc/flag.yaml"))
        );
    }

    #[test]
    fn data_dir_defaults() {
        let cwd = Path::new("/srv/work");
        let minimal = "models: [{name: m, model: x, base_url: 'http://h/v1'}]";
        let load = |env: &MapEnv, text: &str| {
            load_from_str(text, ConfigOrigin::Embedded, env, cwd)
                .expect("valid config")
                .config
                .data_dir
        };
        assert_eq!(
            load(&MapEnv::new(), minimal),
            Some(PathBuf::from("/srv/work/.antler"))
        );
        let env = MapEnv::new().with("ANTLER_HOME", "/var/lib/antler");
        assert_eq!(load(&env, minimal), Some(PathBuf::from("/var/lib/antler")));
        let relative = format!("{minimal}\ndata_dir: state");
        assert_eq!(
            load(&env, &relative),
            Some(PathBuf::from("/srv/work/state"))
        );
    }

    #[test]
    fn empty_api_key_means_none() {
        let text = "models: [{name: m, model: x, base_url: 'http://h/v1', api_key: '${K:-}'}]";
        let loaded = load_from_str(text, ConfigOrigin::Embedded, &MapEnv::new(), Path::new("/"))
            .expect("valid config");
        assert!(loaded.config.models[0].api_key.is_none());
    }

    #[test]
    fn non_mapping_root_is_a_problem() {
        let error = load_from_str(
            "- a\n- b\n",
            ConfigOrigin::Embedded,
            &MapEnv::new(),
            Path::new("/"),
        )
        .expect_err("a list is not a config");
        assert_eq!(error.problems()[0].path, "(root)");
    }
}
