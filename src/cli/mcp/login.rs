//! `antler mcp login SERVER`: a person authorizes Antler with a configured server in a
//! browser (OAuth authorization code with PKCE); the tokens are kept in the data dir, where
//! the daemon finds and refreshes them. Runs here, never through the daemon: the browser, the
//! redirect listener and the person are on this machine.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use crate::cli::mcp::McpCliError;
use crate::config::{AppConfig, ProcessEnv};
use crate::mcp::config::{GrantType, OAuthConfig, Transport, TransportKind};
use crate::mcp::oauth::challenge::Challenge;
use crate::mcp::oauth::login::{LoginRequest, authorize};
use crate::mcp::oauth::token_store::TokenStore;
use crate::mcp::{ExtensionsConfig, TOKEN_DIR_NAME, extensions_path};

/// How long the first, unauthenticated request to the server may take.
const CHALLENGE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

#[derive(Debug, clap::Args)]
pub struct LoginArgs {
    /// The server's name in extensions_config.json.
    pub server: String,
    /// Ask for this scope instead of the one discovered.
    #[arg(long)]
    pub scope: Option<String>,
}

pub async fn run(
    config: &AppConfig,
    config_file: Option<&Path>,
    args: LoginArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, McpCliError> {
    let path = extensions_path(&ProcessEnv, config_file, &config.data_dir());
    let (extensions, _) = ExtensionsConfig::load(&path, &ProcessEnv)
        .map_err(|e| McpCliError::Config(e.to_string()))?;
    let Some(server) = extensions.servers.iter().find(|s| s.name == args.server) else {
        let names: Vec<&str> = extensions.servers.iter().map(|s| s.name.as_str()).collect();
        return Err(McpCliError::Config(format!(
            "no MCP server named {} in {} (configured: {}); add it to mcpServers first",
            args.server,
            path.display(),
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        )));
    };
    let Transport::Remote {
        kind, url, oauth, ..
    } = &server.transport
    else {
        return Err(McpCliError::Config(format!(
            "{} is a stdio server; only http and sse servers authorize with OAuth, a stdio server takes its credentials from its env",
            server.name
        )));
    };
    let mut oauth_config = login_settings(&server.name, oauth.as_deref())?;
    if let Some(scope) = args.scope {
        oauth_config.scope = Some(scope);
    }
    let http = reqwest::Client::new();
    let challenge = first_challenge(&http, *kind, url).await;
    eprintln!(
        "Authorizing Antler with {} ({url}); finish in the browser within 5 minutes.",
        server.name
    );
    let name = server.name.clone();
    let prompt = move |link: &str| {
        eprintln!("Open this URL in a browser to authorize Antler with {name}:\n\n  {link}\n");
    };
    let request = LoginRequest {
        server_name: &server.name,
        server_url: url,
        config: &oauth_config,
        challenge: challenge.as_ref(),
        extra_scope: None,
        prompt: &prompt,
    };
    let tokens = authorize(&http, &request)
        .await
        .map_err(|e| McpCliError::Config(format!("logging in to {} failed: {e}", server.name)))?;
    let store = TokenStore::new(config.data_dir().join(TOKEN_DIR_NAME));
    store.save(&server.name, &tokens).map_err(|e| {
        McpCliError::Config(format!(
            "{} authorized Antler, but the tokens could not be kept: {e}",
            server.name
        ))
    })?;
    writeln!(
        out,
        "Authorized Antler with {}; the tokens are in {}. The daemon uses them from its next connection to {} (and refreshes them itself).",
        server.name,
        store.path(&server.name).display(),
        server.name
    )?;
    Ok(ExitCode::SUCCESS)
}

/// The server's settings for a login: its `oauth` block when it is for the authorization-code
/// grant, all discovered when there is none; any other grant is refused by key.
fn login_settings(server: &str, oauth: Option<&OAuthConfig>) -> Result<OAuthConfig, McpCliError> {
    match oauth {
        None => Ok(OAuthConfig::discovered_authorization_code()),
        Some(settings) if settings.grant_type == GrantType::AuthorizationCode => {
            Ok(settings.clone())
        }
        Some(settings) => Err(McpCliError::Config(format!(
            "mcpServers.{server}.oauth.grant_type is {}, which needs no login; set it to authorization_code (or remove the oauth block) to authorize in a browser",
            match settings.grant_type {
                GrantType::ClientCredentials => "client_credentials",
                GrantType::RefreshToken => "refresh_token",
                GrantType::AuthorizationCode => "authorization_code",
            }
        ))),
    }
}

/// The server's answer to a request without a token: its `WWW-Authenticate` challenge names
/// its protected-resource metadata and the scope it wants. `None` when it asks for nothing or
/// cannot be reached (discovery then tries the well-known locations and reports what fails).
async fn first_challenge(
    http: &reqwest::Client,
    kind: TransportKind,
    url: &str,
) -> Option<Challenge> {
    let request = match kind {
        TransportKind::Sse => http
            .get(url)
            .header(reqwest::header::ACCEPT, "text/event-stream"),
        _ => http
            .post(url)
            .header(
                reqwest::header::ACCEPT,
                "application/json, text/event-stream",
            )
            .json(&serde_json::json!({
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "antler", "version": env!("CARGO_PKG_VERSION")},
                },
            })),
    };
    let response = request.timeout(CHALLENGE_TIMEOUT).send().await.ok()?;
    let header = response
        .headers()
        .get(reqwest::header::WWW_AUTHENTICATE)?
        .to_str()
        .ok()?;
    Some(Challenge::parse(header))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_authorization_code_grant_or_no_oauth_block_logs_in() {
        let none = login_settings("docs", None).map(|c| c.grant_type).ok();
        assert_eq!(none, Some(GrantType::AuthorizationCode));
        let mut credentials = OAuthConfig::discovered_authorization_code();
        credentials.grant_type = GrantType::ClientCredentials;
        let error = login_settings("docs", Some(&credentials))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            error.contains("mcpServers.docs.oauth.grant_type is client_credentials"),
            "{error}"
        );
    }
}
