//! `extensions_config.json`: the `mcpServers` map (the shape Claude Desktop and DeerFlow use),
//! parsed, validated with every problem named by key, and resolved against the environment.
//!
//! The file may hold other top-level keys (skills state, DeerFlow's interceptors); they are kept
//! untouched when the MCP part is rewritten. A `$VAR` string resolves to the variable's value,
//! and a missing variable to the empty string (as in the seed), so a server whose secret is not
//! set fails at connect time with its own error instead of failing the whole file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::config::{EnvSource, Secret};

mod oauth;

pub use self::oauth::{GrantType, OAuthConfig, TokenAuthMethod};
use self::oauth::{RawOAuth, parse_oauth};

/// The file's name (in the data dir; beside `config.yaml` on older installs).
pub const EXTENSIONS_FILE_NAME: &str = "extensions_config.json";
/// Overrides where the file is.
pub const EXTENSIONS_ENV: &str = "ANTLER_EXTENSIONS_CONFIG";
const MCP_SERVERS: &str = "mcpServers";
/// Provider tool-name limit (OpenAI's `^[A-Za-z0-9_-]{1,64}$`).
const MAX_TOOL_NAME: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum McpConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{origin} is not valid JSON: {detail}; fix the syntax (a trailing comma?)")]
    Json { origin: String, detail: String },
    #[error("{origin} has problems:\n{}", problems.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n"))]
    Invalid {
        origin: String,
        problems: Vec<String>,
    },
}

/// Where `extensions_config.json` is read from: `$ANTLER_EXTENSIONS_CONFIG`; else the data
/// dir's (where [`extensions_write_path`] puts changes); else, for installs from before it
/// moved there, the one beside `config.yaml` while the data dir has none; else the data dir's
/// (not written yet).
pub fn extensions_path(
    env: &dyn EnvSource,
    config_file: Option<&Path>,
    data_dir: &Path,
) -> PathBuf {
    if let Some(path) = env_override(env) {
        return path;
    }
    let in_data_dir = data_dir.join(EXTENSIONS_FILE_NAME);
    if !in_data_dir.exists()
        && let Some(beside) = config_file
            .and_then(Path::parent)
            .map(|dir| dir.join(EXTENSIONS_FILE_NAME))
            .filter(|beside| beside.is_file())
    {
        return beside;
    }
    in_data_dir
}

/// Where a change (`PUT /api/mcp/config`) is written: `$ANTLER_EXTENSIONS_CONFIG`, else the data
/// dir. Never beside `config.yaml`: that directory is read-only to the service under systemd
/// (`ProtectSystem=strict`) and root's in the container image.
pub fn extensions_write_path(env: &dyn EnvSource, data_dir: &Path) -> PathBuf {
    env_override(env).unwrap_or_else(|| data_dir.join(EXTENSIONS_FILE_NAME))
}

fn env_override(env: &dyn EnvSource) -> Option<PathBuf> {
    env.get(EXTENSIONS_ENV)
        .filter(|p| !p.trim().is_empty())
        .map(PathBuf::from)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TransportKind {
    Stdio,
    /// The legacy HTTP+SSE transport (protocol 2024-11-05).
    Sse,
    /// Streamable HTTP.
    Http,
}

impl TransportKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TransportKind::Stdio => "stdio",
            TransportKind::Sse => "sse",
            TransportKind::Http => "http",
        }
    }
}

/// One server as written in the file (strings not yet resolved).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default, rename = "type", alias = "transport")]
    kind: Option<String>,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    oauth: Option<RawOAuth>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default = "yes")]
    tool_name_prefix: bool,
    #[serde(default)]
    trusted: bool,
    /// Seconds.
    #[serde(default)]
    tool_call_timeout: Option<f64>,
}

fn yes() -> bool {
    true
}

/// Default time a tool call may take.
pub const DEFAULT_TOOL_CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// A validated, resolved server.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub name: String,
    pub enabled: bool,
    pub transport: Transport,
    pub description: Option<String>,
    pub tool_name_prefix: bool,
    pub tool_call_timeout: Duration,
    /// Its tools' output is the operator's own (an internal database, a trusted service):
    /// not marked untrusted. Default false: anyone who can write to what the server reads
    /// (issues, tickets, pages) could steer the agent through it.
    pub trusted: bool,
}

#[derive(Clone, Debug)]
pub enum Transport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, Secret>,
    },
    Remote {
        kind: TransportKind,
        url: String,
        headers: BTreeMap<String, Secret>,
        oauth: Option<Box<OAuthConfig>>,
    },
}

impl Transport {
    pub fn kind(&self) -> TransportKind {
        match self {
            Transport::Stdio { .. } => TransportKind::Stdio,
            Transport::Remote { kind, .. } => *kind,
        }
    }
}

/// The parsed file: servers in name order.
#[derive(Clone, Debug, Default)]
pub struct ExtensionsConfig {
    pub servers: Vec<ServerConfig>,
}

impl ExtensionsConfig {
    /// Reads the file; a missing file is an empty config (MCP is optional).
    pub fn load(path: &Path, env: &dyn EnvSource) -> Result<(Self, Vec<u8>), McpConfigError> {
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok((Self::default(), Vec::new()));
            }
            Err(source) => {
                return Err(McpConfigError::Read {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        let config = Self::parse(&bytes, &path.display().to_string(), env)?;
        Ok((config, bytes))
    }

    /// Parses and validates the JSON text of the whole file.
    pub fn parse(bytes: &[u8], origin: &str, env: &dyn EnvSource) -> Result<Self, McpConfigError> {
        let root: Value = serde_json::from_slice(bytes).map_err(|e| McpConfigError::Json {
            origin: origin.to_string(),
            detail: e.to_string(),
        })?;
        let invalid = |problems: Vec<String>| McpConfigError::Invalid {
            origin: origin.to_string(),
            problems,
        };
        let Value::Object(root) = root else {
            return Err(invalid(vec![
                "the file must hold a JSON object like {\"mcpServers\": {...}}".into(),
            ]));
        };
        let servers = match root.get(MCP_SERVERS) {
            None | Some(Value::Null) => return Ok(Self::default()),
            Some(Value::Object(servers)) => servers,
            Some(_) => {
                return Err(invalid(vec![format!(
                    "{MCP_SERVERS}: must be an object of server name → settings"
                )]));
            }
        };
        let mut problems = Vec::new();
        let mut parsed = Vec::new();
        // JSON objects keep the file's order (serde_json's `preserve_order`); servers and
        // their problems are reported in name order, whatever order the file has.
        let mut servers: Vec<(&String, &Value)> = servers.iter().collect();
        servers.sort_by_key(|(name, _)| *name);
        for (name, value) in servers {
            match parse_server(name, value, env) {
                Ok(server) => parsed.push(server),
                Err(mut found) => problems.append(&mut found),
            }
        }
        check_name_clashes(&parsed, &mut problems);
        if problems.is_empty() {
            Ok(Self { servers: parsed })
        } else {
            Err(invalid(problems))
        }
    }
}

/// Replaces the `mcpServers` of `existing` (the file's current JSON, or empty) with
/// `servers`, keeping every other key.
pub fn merge_servers(existing: &[u8], servers: Value) -> Result<Vec<u8>, McpConfigError> {
    let mut root: Map<String, Value> = if existing.iter().all(u8::is_ascii_whitespace) {
        Map::new()
    } else {
        serde_json::from_slice(existing).unwrap_or_default()
    };
    root.insert(MCP_SERVERS.into(), servers);
    let mut text =
        serde_json::to_vec_pretty(&Value::Object(root)).map_err(|e| McpConfigError::Json {
            origin: "the new config".into(),
            detail: e.to_string(),
        })?;
    text.push(b'\n');
    Ok(text)
}

/// One entry of `mcpServers`: every problem is collected (name, shape, transport, timeout,
/// command or URL) and reported with its key, so one pass over the file lists them all.
fn parse_server(
    name: &str,
    value: &Value,
    env: &dyn EnvSource,
) -> Result<ServerConfig, Vec<String>> {
    let key = format!("{MCP_SERVERS}.{name}");
    let mut problems = Vec::new();
    check_server_name(name, &key, &mut problems);
    let raw: RawServer = match serde_path_to_error::deserialize(value) {
        Ok(raw) => raw,
        Err(error) => {
            let path = error.path().to_string();
            let at = if path == "." || path.is_empty() {
                key
            } else {
                format!("{key}.{path}")
            };
            problems.push(format!("{at}: {}", error.into_inner()));
            return Err(problems);
        }
    };
    let resolve = |text: &str| resolve_env(text, env);
    let kind = transport_kind(&raw, &key, &mut problems);
    let timeout = tool_call_timeout(raw.tool_call_timeout, &key, &mut problems);
    let transport = match kind {
        TransportKind::Stdio => stdio_transport(&raw, &key, &resolve, &mut problems),
        TransportKind::Sse | TransportKind::Http => {
            remote_transport(kind, &raw, &key, &resolve, &mut problems)
        }
    };
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(ServerConfig {
        name: name.to_string(),
        enabled: raw.enabled,
        transport,
        description: raw.description,
        tool_name_prefix: raw.tool_name_prefix,
        tool_call_timeout: timeout,
        trusted: raw.trusted,
    })
}

/// The name prefixes the server's tool names, so it must fit in one.
fn check_server_name(name: &str, key: &str, problems: &mut Vec<String>) {
    if name.is_empty()
        || name.len() > 32
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        problems.push(format!(
            "{key}: a server name must be 1-32 characters of A-Z, a-z, 0-9, '_' or '-' (it prefixes tool names)"
        ));
    }
}

/// `type` as written (the spellings other MCP clients accept too); without one, a `url` and no
/// `command` means HTTP, as in those clients' files.
fn transport_kind(raw: &RawServer, key: &str, problems: &mut Vec<String>) -> TransportKind {
    match raw.kind.as_deref().map(str::to_ascii_lowercase).as_deref() {
        Some("stdio") => TransportKind::Stdio,
        Some("sse") => TransportKind::Sse,
        Some("http" | "streamable_http" | "streamable-http" | "streamablehttp") => {
            TransportKind::Http
        }
        Some(other) => {
            problems.push(format!(
                "{key}.type: unknown transport `{other}`; use stdio, sse or http"
            ));
            TransportKind::Stdio
        }
        None if raw.url.is_some() && raw.command.is_none() => TransportKind::Http,
        None => TransportKind::Stdio,
    }
}

/// Seconds, at most a day: a tool call that may take longer is a job, not a call.
fn tool_call_timeout(seconds: Option<f64>, key: &str, problems: &mut Vec<String>) -> Duration {
    match seconds {
        None => DEFAULT_TOOL_CALL_TIMEOUT,
        Some(seconds) if seconds.is_finite() && seconds > 0.0 && seconds <= 86_400.0 => {
            Duration::from_secs_f64(seconds)
        }
        Some(_) => {
            problems.push(format!(
                "{key}.tool_call_timeout: must be a number of seconds between 0 and 86400"
            ));
            DEFAULT_TOOL_CALL_TIMEOUT
        }
    }
}

/// A child process: its command (required), arguments and environment, `$VAR`s resolved; the
/// environment values are secrets (they often carry tokens).
fn stdio_transport(
    raw: &RawServer,
    key: &str,
    resolve: &dyn Fn(&str) -> String,
    problems: &mut Vec<String>,
) -> Transport {
    let command = raw.command.as_deref().map(resolve).unwrap_or_default();
    if command.trim().is_empty() {
        problems.push(format!(
            "{key}.command: a stdio server needs the command that starts it (e.g. \"npx\")"
        ));
    }
    if raw.oauth.is_some() {
        problems.push(format!(
            "{key}.oauth: only sse and http servers take oauth; remove it or set type"
        ));
    }
    Transport::Stdio {
        command,
        args: raw.args.iter().map(|a| resolve(a)).collect(),
        env: raw
            .env
            .iter()
            .map(|(k, v)| (k.clone(), Secret::new(resolve(v))))
            .collect(),
    }
}

/// An SSE or streamable-HTTP server: an http(s) URL, valid header names (their values are
/// secrets) and OAuth when enabled.
fn remote_transport(
    kind: TransportKind,
    raw: &RawServer,
    key: &str,
    resolve: &dyn Fn(&str) -> String,
    problems: &mut Vec<String>,
) -> Transport {
    let url = raw.url.as_deref().map(resolve).unwrap_or_default();
    match url::Url::parse(&url) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => {}
        _ => problems.push(format!(
            "{key}.url: a {} server needs an http(s) URL (got {:?})",
            kind.as_str(),
            raw.url.as_deref().unwrap_or("")
        )),
    }
    let mut headers = BTreeMap::new();
    for (header, value) in &raw.headers {
        if reqwest::header::HeaderName::from_bytes(header.as_bytes()).is_err() {
            problems.push(format!("{key}.headers.{header}: not a valid header name"));
        }
        headers.insert(header.clone(), Secret::new(resolve(value)));
    }
    let oauth = raw
        .oauth
        .as_ref()
        .filter(|o| o.enabled)
        .map(|o| Box::new(parse_oauth(key, o, resolve, problems)));
    Transport::Remote {
        kind,
        url,
        headers,
        oauth,
    }
}

/// `$VAR` or `${VAR}` (the whole string) → the variable, missing ⇒ empty; anything else as is.
fn resolve_env(text: &str, env: &dyn EnvSource) -> String {
    let name = text
        .strip_prefix("${")
        .and_then(|rest| rest.strip_suffix('}'))
        .or_else(|| text.strip_prefix('$'));
    match name {
        Some(name)
            if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
        {
            env.get(name).unwrap_or_default()
        }
        _ => text.to_string(),
    }
}

/// Two servers whose names would collide once sanitised are refused here, not at run time.
fn check_name_clashes(servers: &[ServerConfig], problems: &mut Vec<String>) {
    let mut seen = BTreeMap::new();
    for server in servers {
        let lower = server.name.to_ascii_lowercase();
        if let Some(first) = seen.insert(lower, server.name.clone()) {
            problems.push(format!(
                "{MCP_SERVERS}: `{first}` and `{}` differ only in case; rename one",
                server.name
            ));
        }
    }
}

/// The name the model sees: `{server}_{tool}` (or the tool's own name), with characters
/// providers refuse replaced by `_`, cut to 64 characters.
pub fn exposed_tool_name(server: &ServerConfig, tool: &str) -> String {
    let full = if server.tool_name_prefix {
        format!("{}_{tool}", server.name)
    } else {
        tool.to_string()
    };
    full.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(MAX_TOOL_NAME)
        .collect()
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
