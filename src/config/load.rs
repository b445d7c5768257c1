//! Finding and loading `config.yaml`: path resolution, YAML → env resolution → typed tree →
//! validation, with every problem collected and reported by key path.

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::config::env::{self, EnvSource};
use crate::config::problem::{ConfigProblem, KeyPath, is_within};
use crate::config::{ApiToken, AppConfig, Secret, decode, validate};

/// The variable that, set while `gateway.api_tokens` is empty, is the API token of
/// [`TOKEN_ENV_USER`] (one variable makes a container's API usable).
pub const API_TOKEN_ENV: &str = "ANTLER_API_TOKEN";
/// The user the `ANTLER_API_TOKEN` token acts as: the one a token-less start acts as, so the
/// threads and agents made before keep their owner.
pub const TOKEN_ENV_USER: &str = "local";

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

impl ConfigOrigin {
    /// The config file, if it came from one.
    pub fn file(&self) -> Option<&Path> {
        match self {
            Self::File(path) => Some(path),
            Self::Embedded => None,
        }
    }
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
    let (noun, them) = if problems.len() == 1 {
        ("problem", "it")
    } else {
        ("problems", "them")
    };
    let mut text = format!(
        "config {origin} has {} {noun}; fix {them} and retry:",
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

/// The files the search of [`resolve_config_path`] looks at after an explicit path, in its
/// order: `./config.yaml`, then `$ANTLER_HOME/config.yaml`. A daemon started on the embedded
/// default watches them, so one created later is picked up without a restart.
pub fn config_candidates(env: &dyn EnvSource, cwd: &Path) -> Vec<PathBuf> {
    let mut candidates = vec![cwd.join(CONFIG_FILE_NAME)];
    if let Some(home) = non_empty(env.get("ANTLER_HOME")) {
        let home = cwd.join(home).join(CONFIG_FILE_NAME);
        if !candidates.contains(&home) {
            candidates.push(home);
        }
    }
    candidates
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
    let decoded = decode_text(text, &origin, env, cwd)?;
    let mut problems = decoded.problems;
    let Some(config) = decoded.config else {
        return Err(ConfigError::Invalid { origin, problems });
    };
    problems.extend(
        validate::validate(&config)
            .into_iter()
            .filter(|problem| !decoded.patched.iter().any(|p| is_within(&problem.path, p))),
    );
    if !problems.is_empty() {
        return Err(ConfigError::Invalid { origin, problems });
    }
    let warnings = validate::version_warnings(decoded.declared_version);
    Ok(LoadedConfig {
        config,
        origin,
        warnings,
    })
}

/// A config decoded without validation: what [`load_from_str`] checks next, and what the
/// commands that only talk to a running daemon read (see `config::locate`).
pub(crate) struct DecodedConfig {
    /// `None` when the tree could not be patched into something decodable.
    pub(crate) config: Option<AppConfig>,
    /// Decoding problems (unset variables, wrong types, unknown keys), validation not included.
    pub(crate) problems: Vec<ConfigProblem>,
    /// Key paths whose values were replaced by placeholders to go on decoding.
    pub(crate) patched: Vec<String>,
    pub(crate) declared_version: Option<u32>,
}

/// Parses YAML text, resolves `$ENV` references, decodes it (collecting every problem) and
/// fills the defaults that depend on the environment.
pub(crate) fn decode_text(
    text: &str,
    origin: &ConfigOrigin,
    env: &dyn EnvSource,
    cwd: &Path,
) -> Result<DecodedConfig, ConfigError> {
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
            origin: origin.clone(),
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
    let config = decoded.config.map(|mut config| {
        normalize(&mut config, env, cwd);
        note_model_sources(&mut config, &variables);
        if config.sandbox.skills_path.is_none() {
            config.sandbox.skills_path = Some(default_skills_dir(origin, cwd, &config));
        }
        config
    });
    let declared_version = match &config {
        Some(config) if declared_version => Some(config.config_version),
        _ => None,
    };
    Ok(DecodedConfig {
        config,
        problems: decoded.problems,
        patched: decoded.patched,
        declared_version,
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
    // `localhost:8787` is what people type; the listener wants an address.
    if let Some((host, port)) = config.gateway.listen.rsplit_once(':')
        && host.eq_ignore_ascii_case("localhost")
        && port.parse::<u16>().is_ok()
    {
        config.gateway.listen = format!("127.0.0.1:{port}");
    }
    // One variable makes a container usable: the token of the user `local`, who owns what a
    // token-less start created.
    if config.gateway.api_tokens.is_empty()
        && let Some(token) = non_empty(env.get(API_TOKEN_ENV))
    {
        config.gateway.api_tokens.push(ApiToken {
            token: Secret::new(token),
            user: TOKEN_ENV_USER.to_string(),
        });
    }
}

/// Where the public skills shipped in the binary are installed in `data_dir` (by
/// `skills::bundled` at start).
pub fn shipped_skills_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("skills").join("public")
}

/// Where the public skills are when `sandbox.skills_path` is unset: `skills/public` beside the
/// config file if it exists (a checkout, or an install that copied them there), else the copy
/// of the skills shipped in the binary, installed into the data dir at start. Never the working
/// directory: the daemon must behave the same wherever it is started.
fn default_skills_dir(origin: &ConfigOrigin, cwd: &Path, config: &AppConfig) -> PathBuf {
    let beside_config = match origin {
        ConfigOrigin::File(path) => path.parent().map(|dir| cwd.join(dir).join("skills/public")),
        ConfigOrigin::Embedded => None,
    };
    beside_config
        .filter(|dir| dir.is_dir())
        .unwrap_or_else(|| shipped_skills_dir(&config.data_dir()))
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
    fn localhost_listens_on_loopback_and_one_problem_is_it() {
        let load = |text: &str| {
            let text = format!("models: [{{name: m, model: x, base_url: 'http://h/v1'}}]\n{text}");
            load_from_str(
                &text,
                ConfigOrigin::Embedded,
                &MapEnv::new(),
                Path::new("/"),
            )
        };
        let loaded = load("gateway: {listen: 'LocalHost:8787'}").expect("valid config");
        assert_eq!(loaded.config.gateway.listen, "127.0.0.1:8787");
        let error = load("gateway: {listen: 'example.invalid:8787'}").unwrap_err();
        assert!(
            error
                .to_string()
                .contains("has 1 problem; fix it and retry"),
            "{error}"
        );
        let error = load("gateway: {listen: x, backlog: 0}").unwrap_err();
        assert!(
            error
                .to_string()
                .contains("has 2 problems; fix them and retry"),
            "{error}"
        );
    }

    #[test]
    fn antler_api_token_is_the_local_users_token_while_the_config_names_none() {
        let env = MapEnv::new().with(API_TOKEN_ENV, "from-the-environment");
        let load = |text: &str, env: &MapEnv| {
            let text = format!("models: [{{name: m, model: x, base_url: 'http://h/v1'}}]\n{text}");
            load_from_str(&text, ConfigOrigin::Embedded, env, Path::new("/"))
                .expect("valid config")
                .config
                .gateway
                .api_tokens
        };
        let tokens = load("gateway: {api_tokens: []}", &env);
        assert_eq!(tokens.len(), 1);
        assert_eq!(tokens[0].user, TOKEN_ENV_USER);
        assert_eq!(tokens[0].token.expose(), "from-the-environment");
        // The config's own tokens win; an empty variable is no token.
        let named = "gateway: {api_tokens: [{token: configured, user: alice}]}";
        let tokens = load(named, &env);
        assert_eq!(tokens.len(), 1);
        assert_eq!(tokens[0].user, "alice");
        assert!(load("gateway: {}", &MapEnv::new().with(API_TOKEN_ENV, "")).is_empty());
    }

    #[test]
    fn the_candidates_are_the_search_paths_files() {
        let cwd = Path::new("/srv/work");
        assert_eq!(
            config_candidates(&MapEnv::new(), cwd),
            [PathBuf::from("/srv/work/config.yaml")]
        );
        let env = MapEnv::new().with("ANTLER_HOME", "/var/lib/antler");
        assert_eq!(
            config_candidates(&env, cwd),
            [
                PathBuf::from("/srv/work/config.yaml"),
                PathBuf::from("/var/lib/antler/config.yaml")
            ]
        );
    }

    #[test]
    fn the_skills_default_is_beside_the_config_else_the_data_dirs_shipped_copy() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let config = tmp.path().join("config.yaml");
        let text = "models: [{name: m, model: x, base_url: 'http://h/v1'}]\ndata_dir: data\n";
        let load = || {
            load_from_str(
                text,
                ConfigOrigin::File(config.clone()),
                &MapEnv::new(),
                tmp.path(),
            )
            .expect("valid config")
            .config
            .sandbox
            .skills_path
        };
        // A `skills/public` in the working directory is not looked at.
        assert_eq!(load(), Some(tmp.path().join("data/skills/public")));
        std::fs::create_dir_all(tmp.path().join("skills/public")).expect("mkdir");
        assert_eq!(load(), Some(tmp.path().join("skills/public")));
        let embedded = load_from_str(text, ConfigOrigin::Embedded, &MapEnv::new(), tmp.path())
            .expect("valid config");
        assert_eq!(
            embedded.config.sandbox.skills_path,
            Some(tmp.path().join("data/skills/public"))
        );
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
