//! A person's authorization in a browser (OAuth 2.1 authorization code with PKCE S256): the
//! authorization server discovered from the MCP server, the client configured, named by a
//! Client ID Metadata Document or registered dynamically (RFC 7591, `registration`); a one-shot
//! listener on `127.0.0.1` receives the redirect (RFC 8252 §7.3, `loopback`); the browser is
//! `$BROWSER URL` when set, else the URL is told to the person to open. The `resource`
//! (RFC 8707) goes on both the authorization and the token request, so the tokens are bound to
//! this server.

use std::time::Duration;

use crate::config::Secret;
use crate::mcp::config::OAuthConfig;
use crate::mcp::oauth::OAuthError;
use crate::mcp::oauth::challenge::Challenge;
use crate::mcp::oauth::discovery::{self, Discovered};
pub(crate) use crate::mcp::oauth::login_error::LoginError;
use crate::mcp::oauth::loopback::Loopback;
use crate::mcp::oauth::pkce::{Pkce, random_token};
use crate::mcp::oauth::registration::choose_client;
use crate::mcp::oauth::token::method_name;
use crate::mcp::oauth::token::{self, Grant, TokenRequest};
use crate::mcp::oauth::token_store::{StoredTokens, unix_now};

/// How long the person has to finish in the browser.
pub(crate) const CALLBACK_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// The scope that asks for a refresh token where the server lists it (SEP-2207).
const OFFLINE_ACCESS: &str = "offline_access";

/// One authorization to run.
pub(crate) struct LoginRequest<'a> {
    pub server_name: &'a str,
    pub server_url: &'a str,
    pub config: &'a OAuthConfig,
    /// The challenge that asked for it (its scope and metadata URL), if any.
    pub challenge: Option<&'a Challenge>,
    /// Scope to ask for beyond the selected one (step-up after `insufficient_scope`).
    pub extra_scope: Option<&'a str>,
    /// Where the URL to open is told to the person (stderr in the CLI) when no `$BROWSER`
    /// opens it.
    pub prompt: &'a (dyn Fn(&str) + Send + Sync),
}

/// Runs the authorization and returns the tokens obtained (not yet saved).
pub(crate) async fn authorize(
    http: &reqwest::Client,
    request: &LoginRequest<'_>,
) -> Result<StoredTokens, OAuthError> {
    let challenge = request.challenge.cloned().unwrap_or_default();
    let discovered = discovery::discover(http, request.server_url, &challenge).await?;
    let metadata = &discovered.auth_server;
    let server = request.server_name.to_string();
    let endpoint = metadata.authorization_endpoint.clone().ok_or_else(|| {
        LoginError::NoAuthorizationEndpoint {
            server: server.clone(),
            detail: "none in its metadata".into(),
        }
    })?;
    if let Some(methods) = &metadata.code_challenge_methods_supported
        && !methods.iter().any(|m| m == "S256")
    {
        return Err(LoginError::NoPkce {
            server,
            methods: methods.join(", "),
        }
        .into());
    }
    let scope = login_scope(
        discovery::select_scope(request.config.scope.as_deref(), &challenge, &discovered),
        request.extra_scope,
        metadata.scopes_supported.as_deref(),
    );
    let loopback = Loopback::bind(request.config.redirect_port).await?;
    let redirect_uri = loopback.redirect_uri().to_string();
    let client = choose_client(
        http,
        request.server_name,
        request.config,
        metadata,
        &redirect_uri,
        scope.as_deref(),
    )
    .await?;
    let pkce = Pkce::generate();
    let state = random_token();
    let url = authorization_url(
        &endpoint,
        &AuthorizationParams {
            client_id: &client.client_id,
            redirect_uri: &redirect_uri,
            challenge: &pkce.challenge,
            state: &state,
            scope: scope.as_deref(),
            resource: &discovered.resource,
        },
    )
    .map_err(|detail| LoginError::NoAuthorizationEndpoint { server, detail })?;
    let code = wait_in_browser(loopback, &url, &state, request.prompt).await?;
    let token_endpoint = request
        .config
        .token_url
        .clone()
        .unwrap_or_else(|| metadata.token_endpoint.clone());
    let token_request = TokenRequest {
        token_endpoint: token_endpoint.clone(),
        client: client.clone(),
        grant: Grant::AuthorizationCode {
            code,
            code_verifier: pkce.verifier,
            redirect_uri,
        },
        scope: None,
        resource: Some(discovered.resource.clone()),
        audience: request.config.audience.clone(),
        issuer: Some(discovered.issuer()),
    };
    let response = token::request_token(http, &token_request).await?;
    tracing::info!(
        server = request.server_name,
        token_endpoint,
        "Obtained tokens by authorization in a browser"
    );
    Ok(stored_tokens(
        response,
        scope,
        token_endpoint,
        &discovered,
        client,
        request.config.client_id.is_some(),
    ))
}

/// The scope of a login: the selected one, the step-up's additions, and `offline_access`
/// where the authorization server lists it, so the login yields a refresh token. It is only
/// added to a scope being asked for: alone it would replace the server's default scope.
fn login_scope(
    selected: Option<String>,
    extra: Option<&str>,
    server_scopes: Option<&[String]>,
) -> Option<String> {
    let mut scopes: Vec<String> = Vec::new();
    let words = selected
        .iter()
        .flat_map(|s| s.split_whitespace())
        .chain(extra.into_iter().flat_map(str::split_whitespace));
    for word in words {
        if !scopes.iter().any(|s| s == word) {
            scopes.push(word.to_string());
        }
    }
    if scopes.is_empty() {
        return None;
    }
    let offered = server_scopes.is_some_and(|list| list.iter().any(|s| s == OFFLINE_ACCESS));
    if offered && !scopes.iter().any(|s| s == OFFLINE_ACCESS) {
        scopes.push(OFFLINE_ACCESS.to_string());
    }
    Some(scopes.join(" "))
}

struct AuthorizationParams<'a> {
    client_id: &'a str,
    redirect_uri: &'a str,
    challenge: &'a str,
    state: &'a str,
    scope: Option<&'a str>,
    resource: &'a str,
}

/// The authorization endpoint with the request's parameters added to any it already has.
fn authorization_url(endpoint: &str, params: &AuthorizationParams<'_>) -> Result<String, String> {
    let mut url = url::Url::parse(endpoint).map_err(|e| format!("{endpoint}: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("{endpoint} is not an http(s) URL"));
    }
    {
        let mut query = url.query_pairs_mut();
        query
            .append_pair("response_type", "code")
            .append_pair("client_id", params.client_id)
            .append_pair("redirect_uri", params.redirect_uri)
            .append_pair("code_challenge", params.challenge)
            .append_pair("code_challenge_method", "S256")
            .append_pair("state", params.state);
        if let Some(scope) = params.scope {
            query.append_pair("scope", scope);
        }
        query.append_pair("resource", params.resource);
    }
    Ok(url.into())
}

/// Opens `url` with `$BROWSER` (a command and its arguments; the URL appended) or tells the
/// person to, then waits for the redirect. A browser command that fails hands the URL to the
/// person as well. The browser is not killed afterwards: it may be the person's own, running on.
async fn wait_in_browser(
    loopback: Loopback,
    url: &str,
    state: &str,
    prompt: &(dyn Fn(&str) + Send + Sync),
) -> Result<Secret, LoginError> {
    // Read here rather than through an env source: only a person's `antler mcp login` or
    // `probe` ever gets this far, and `$BROWSER` is how their environment names a browser.
    let browser = std::env::var("BROWSER").ok();
    let mut child = browser
        .as_deref()
        .and_then(|command| spawn_browser(command, url));
    if child.is_none() {
        prompt(url);
    }
    let waiting = loopback.wait(state, CALLBACK_TIMEOUT);
    tokio::pin!(waiting);
    loop {
        match &mut child {
            Some(running) => tokio::select! {
                code = &mut waiting => return code,
                exit = running.wait() => {
                    if !exit.is_ok_and(|status| status.success()) {
                        tracing::warn!("The $BROWSER command failed; the URL is printed instead");
                        prompt(url);
                    }
                    child = None;
                }
            },
            None => return waiting.await,
        }
    }
}

fn spawn_browser(command: &str, url: &str) -> Option<tokio::process::Child> {
    let mut words = command.split_whitespace();
    let program = words.next()?;
    let spawned = tokio::process::Command::new(program)
        .args(words)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn();
    match spawned {
        Ok(child) => Some(child),
        Err(error) => {
            tracing::warn!(%error, program, "Cannot start $BROWSER; the URL is printed instead");
            None
        }
    }
}

/// What the token file keeps: a registered client's secret (nothing else knows it), never a
/// configured one (it stays in `extensions_config.json`, read from there).
fn stored_tokens(
    response: token::TokenResponse,
    requested_scope: Option<String>,
    token_endpoint: String,
    discovered: &Discovered,
    client: token::ClientCredentials,
    configured_client: bool,
) -> StoredTokens {
    let expires_at = response
        .expires_in
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(|s| unix_now().saturating_add(s.min(365.0 * 86_400.0) as u64));
    StoredTokens {
        access_token: Some(response.access_token),
        refresh_token: response.refresh_token.filter(|t| !t.is_empty()),
        expires_at,
        scope: response.scope.or(requested_scope),
        token_endpoint: Some(token_endpoint),
        resource: Some(discovered.resource.clone()),
        client_id: Some(client.client_id),
        client_secret: client
            .client_secret
            .filter(|_| !configured_client)
            .map(|s| s.expose().to_string()),
        token_endpoint_auth_method: Some(method_name(client.method).to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scopes(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn offline_access_joins_a_requested_scope_only_where_the_server_lists_it() {
        let listed = scopes(&["mcp:basic", "offline_access"]);
        let unlisted = scopes(&["mcp:basic", "mcp:read"]);
        assert_eq!(
            login_scope(Some("mcp:basic".into()), None, Some(&listed)).as_deref(),
            Some("mcp:basic offline_access")
        );
        assert_eq!(
            login_scope(Some("mcp:basic mcp:read".into()), None, Some(&unlisted)).as_deref(),
            Some("mcp:basic mcp:read")
        );
        assert_eq!(login_scope(None, None, Some(&listed)), None);
        assert_eq!(
            login_scope(Some("a b".into()), Some("b c"), None).as_deref(),
            Some("a b c")
        );
    }

    #[test]
    fn the_authorization_url_carries_pkce_state_resource_and_keeps_the_endpoints_query() {
        let url = authorization_url(
            "https://as.example/authorize?tenant=x",
            &AuthorizationParams {
                client_id: "client-1",
                redirect_uri: "http://127.0.0.1:5000/callback",
                challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
                state: "st",
                scope: Some("mcp:read offline_access"),
                resource: "https://mcp.example/mcp",
            },
        )
        .unwrap_or_default();
        let parsed = url::Url::parse(&url).ok();
        let pairs: Vec<(String, String)> = parsed
            .map(|u| u.query_pairs().into_owned().collect())
            .unwrap_or_default();
        let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("tenant"), Some("x"));
        assert_eq!(get("response_type"), Some("code"));
        assert_eq!(get("code_challenge_method"), Some("S256"));
        assert_eq!(get("redirect_uri"), Some("http://127.0.0.1:5000/callback"));
        assert_eq!(get("scope"), Some("mcp:read offline_access"));
        assert_eq!(get("resource"), Some("https://mcp.example/mcp"));
        assert_eq!(get("state"), Some("st"));
        assert!(
            authorization_url(
                "urn:x",
                &AuthorizationParams {
                    client_id: "c",
                    redirect_uri: "r",
                    challenge: "c",
                    state: "s",
                    scope: None,
                    resource: "r",
                }
            )
            .is_err()
        );
    }
}
