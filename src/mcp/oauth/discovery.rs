//! Finding a server's authorization server and endpoints: protected-resource metadata (RFC
//! 9728, from the challenge's `resource_metadata` or the well-known paths), authorization
//! server metadata (RFC 8414 and OpenID Connect discovery, path-inserted and appended forms),
//! and the 2025-03-26 fallbacks (metadata at the server's origin, then `/authorize`, `/token`,
//! `/register` there). Also the scope a client asks for (challenge, else the resource's
//! `scopes_supported`, else none).
//!
//! The order of the well-known URLs is the MCP 2025-11-25 "Authorization" section's: the
//! path-specific protected-resource URL before the root one (a server hosting several MCP
//! endpoints publishes one document per path), and for an issuer with a path the
//! path-inserted forms before the appended one. A 404 (or any non-JSON answer) moves on to the
//! next URL; an unreachable host stops discovery at once.

use std::time::Duration;

use serde::Deserialize;
use url::Url;

use crate::mcp::oauth::OAuthError;
use crate::mcp::oauth::challenge::Challenge;

/// One metadata request slower than this fails discovery.
const METADATA_TIMEOUT: Duration = Duration::from_secs(20);
/// A metadata document larger than this is not metadata.
const MAX_METADATA_BYTES: usize = 1024 * 1024;
const PRM_WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";
const AS_WELL_KNOWN: &str = "/.well-known/oauth-authorization-server";
const OIDC_WELL_KNOWN: &str = "/.well-known/openid-configuration";

/// Authorization-server metadata, as far as a client needs it.
#[derive(Clone, Debug, Default, serde::Deserialize, serde::Serialize)]
pub(crate) struct AuthServerMetadata {
    #[serde(default)]
    pub issuer: Option<String>,
    #[serde(default)]
    pub authorization_endpoint: Option<String>,
    pub token_endpoint: String,
    #[serde(default)]
    pub registration_endpoint: Option<String>,
    #[serde(default)]
    pub scopes_supported: Option<Vec<String>>,
    #[serde(default)]
    pub grant_types_supported: Option<Vec<String>>,
    #[serde(default)]
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    #[serde(default)]
    pub code_challenge_methods_supported: Option<Vec<String>>,
    #[serde(default)]
    pub client_id_metadata_document_supported: Option<bool>,
}

/// What discovery found for one MCP server.
#[derive(Clone, Debug)]
pub(crate) struct Discovered {
    /// The resource the tokens are for (`resource` parameter, RFC 8707): the protected-resource
    /// metadata's `resource`, checked against the server URL; the server URL without PRM.
    pub resource: String,
    /// The protected resource's `scopes_supported`, when it publishes metadata.
    pub resource_scopes: Option<Vec<String>>,
    pub auth_server: AuthServerMetadata,
}

impl Discovered {
    /// The authorization server's issuer (the `aud` of a `private_key_jwt` assertion): its
    /// metadata's `issuer`, else the token endpoint's origin.
    pub(crate) fn issuer(&self) -> String {
        self.auth_server.issuer.clone().unwrap_or_else(|| {
            Url::parse(&self.auth_server.token_endpoint)
                .map(|u| u.origin().ascii_serialization())
                .unwrap_or_default()
        })
    }
}

/// RFC 9728 §2, as far as a client needs it.
#[derive(Deserialize)]
struct ResourceMetadata {
    resource: String,
    #[serde(default)]
    authorization_servers: Vec<String>,
    #[serde(default)]
    scopes_supported: Option<Vec<String>>,
}

/// Discovers the authorization server of the MCP endpoint `server_url` given its challenge.
pub(crate) async fn discover(
    http: &reqwest::Client,
    server_url: &str,
    challenge: &Challenge,
) -> Result<Discovered, OAuthError> {
    let server = Url::parse(server_url).map_err(|e| OAuthError::Discovery {
        url: server_url.to_string(),
        detail: format!("not a URL ({e}); check the server's url"),
    })?;
    let Some(prm) = protected_resource(http, &server, challenge).await? else {
        // A 2025-03-26 server: it is its own authorization server, at its origin.
        let origin = origin_of(&server);
        let auth_server = match auth_server_metadata(http, &origin).await? {
            Some(metadata) => metadata,
            None => AuthServerMetadata {
                issuer: Some(origin.to_string()),
                authorization_endpoint: Some(join(&origin, "/authorize")),
                token_endpoint: join(&origin, "/token"),
                registration_endpoint: Some(join(&origin, "/register")),
                ..AuthServerMetadata::default()
            },
        };
        return Ok(Discovered {
            resource: server_url.to_string(),
            resource_scopes: None,
            auth_server,
        });
    };
    if !resource_covers(&prm.resource, &server) {
        return Err(OAuthError::ResourceMismatch {
            server_url: server_url.to_string(),
            resource: prm.resource,
        });
    }
    let Some(issuer) = prm.authorization_servers.first() else {
        return Err(OAuthError::Discovery {
            url: server_url.to_string(),
            detail: "its protected-resource metadata names no authorization_servers; \
                     ask its operator, or set oauth.token_url"
                .into(),
        });
    };
    let issuer_url = Url::parse(issuer).map_err(|e| OAuthError::Discovery {
        url: server_url.to_string(),
        detail: format!("its authorization server {issuer:?} is not a URL ({e})"),
    })?;
    let Some(auth_server) = auth_server_metadata(http, &issuer_url).await? else {
        return Err(OAuthError::Discovery {
            url: issuer.clone(),
            detail: format!(
                "no authorization-server metadata at {}; set oauth.token_url to its token endpoint",
                auth_server_urls(&issuer_url).join(", ")
            ),
        });
    };
    Ok(Discovered {
        resource: prm.resource,
        resource_scopes: prm.scopes_supported,
        auth_server,
    })
}

/// The scope to ask for: the configured one, else the challenge's, else the resource's
/// `scopes_supported`, else none (the parameter is then omitted).
pub(crate) fn select_scope(
    configured: Option<&str>,
    challenge: &Challenge,
    discovered: &Discovered,
) -> Option<String> {
    let nonempty = |s: &str| !s.trim().is_empty();
    configured
        .filter(|s| nonempty(s))
        .map(str::to_string)
        .or_else(|| challenge.scope.clone().filter(|s| nonempty(s)))
        .or_else(|| {
            discovered
                .resource_scopes
                .as_ref()
                .filter(|scopes| !scopes.is_empty())
                .map(|scopes| scopes.join(" "))
        })
}

/// The protected-resource metadata: the challenge's URL, else the path-specific well-known
/// URL, else the root one; `None` when none answers with a document.
async fn protected_resource(
    http: &reqwest::Client,
    server: &Url,
    challenge: &Challenge,
) -> Result<Option<ResourceMetadata>, OAuthError> {
    let mut candidates = Vec::new();
    if let Some(url) = &challenge.resource_metadata {
        match server.join(url) {
            Ok(url) => candidates.push(url.to_string()),
            Err(e) => tracing::debug!(%e, "The challenge's resource_metadata is not a URL"),
        }
    }
    let origin = origin_of(server);
    let path = server.path().trim_end_matches('/');
    if !path.is_empty() {
        candidates.push(join(&origin, &format!("{PRM_WELL_KNOWN}{path}")));
    }
    candidates.push(join(&origin, PRM_WELL_KNOWN));
    for url in candidates {
        if let Some(metadata) = fetch_json::<ResourceMetadata>(http, &url).await? {
            return Ok(Some(metadata));
        }
    }
    Ok(None)
}

/// RFC 8414 §3 and OpenID Connect discovery, in the order MCP prescribes.
fn auth_server_urls(issuer: &Url) -> Vec<String> {
    let origin = origin_of(issuer);
    let path = issuer.path().trim_end_matches('/');
    if path.is_empty() {
        vec![join(&origin, AS_WELL_KNOWN), join(&origin, OIDC_WELL_KNOWN)]
    } else {
        vec![
            join(&origin, &format!("{AS_WELL_KNOWN}{path}")),
            join(&origin, &format!("{OIDC_WELL_KNOWN}{path}")),
            join(&origin, &format!("{path}{OIDC_WELL_KNOWN}")),
        ]
    }
}

async fn auth_server_metadata(
    http: &reqwest::Client,
    issuer: &Url,
) -> Result<Option<AuthServerMetadata>, OAuthError> {
    for url in auth_server_urls(issuer) {
        if let Some(metadata) = fetch_json::<AuthServerMetadata>(http, &url).await? {
            return Ok(Some(metadata));
        }
    }
    Ok(None)
}

/// A JSON document at `url`; `None` for any answer that is not a successful one of type `T`
/// (404 is the common case), an error only when the host cannot be reached.
async fn fetch_json<T: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    url: &str,
) -> Result<Option<T>, OAuthError> {
    let response = http
        .get(url)
        .header(reqwest::header::ACCEPT, "application/json")
        .timeout(METADATA_TIMEOUT)
        .send()
        .await
        .map_err(|e| OAuthError::Discovery {
            url: url.to_string(),
            detail: format!("{}; is the server up?", crate::mcp::oauth::with_causes(&e)),
        })?;
    if !response.status().is_success() {
        tracing::debug!(
            url,
            status = response.status().as_u16(),
            "No OAuth metadata here"
        );
        return Ok(None);
    }
    let body = match response.bytes().await {
        Ok(body) if body.len() <= MAX_METADATA_BYTES => body,
        _ => return Ok(None),
    };
    match serde_json::from_slice::<T>(&body) {
        Ok(parsed) => Ok(Some(parsed)),
        Err(error) => {
            tracing::debug!(url, %error, "OAuth metadata that does not parse; trying the next");
            Ok(None)
        }
    }
}

/// Whether tokens for `resource` may be used at `server` (RFC 9728 §3.3, RFC 8707): the same
/// origin, and the server's path at or below the resource's.
fn resource_covers(resource: &str, server: &Url) -> bool {
    let Ok(resource) = Url::parse(resource) else {
        return false;
    };
    if resource.origin() != server.origin() {
        return false;
    }
    let resource_path = resource.path().trim_end_matches('/');
    let server_path = server.path().trim_end_matches('/');
    server_path == resource_path
        || server_path
            .strip_prefix(resource_path)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// `scheme://host[:port]` of `url`, as a URL (path `/`).
fn origin_of(url: &Url) -> Url {
    let mut origin = url.clone();
    origin.set_path("/");
    origin.set_query(None);
    origin.set_fragment(None);
    origin
}

/// `origin` with `path` (absolute) as its path.
fn join(origin: &Url, path: &str) -> String {
    let mut url = origin.clone();
    url.set_path(path);
    url.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorization_server_urls_follow_the_mcp_order() {
        let root = Url::parse("https://as.example/").unwrap();
        assert_eq!(
            auth_server_urls(&root),
            [
                "https://as.example/.well-known/oauth-authorization-server",
                "https://as.example/.well-known/openid-configuration",
            ]
        );
        let tenant = Url::parse("https://as.example/tenant1/").unwrap();
        assert_eq!(
            auth_server_urls(&tenant),
            [
                "https://as.example/.well-known/oauth-authorization-server/tenant1",
                "https://as.example/.well-known/openid-configuration/tenant1",
                "https://as.example/tenant1/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn a_resource_covers_its_own_path_and_below_on_the_same_origin() {
        let server = Url::parse("http://localhost:3000/mcp").unwrap();
        for (resource, covers) in [
            ("http://localhost:3000/mcp", true),
            ("http://localhost:3000/mcp/", true),
            ("http://localhost:3000", true),
            ("http://localhost:3000/", true),
            ("http://localhost:3000/mc", false),
            ("http://localhost:3000/mcp/deeper", false),
            ("http://localhost:3001/mcp", false),
            ("https://evil.example.com/mcp", false),
            ("not a url", false),
        ] {
            assert_eq!(resource_covers(resource, &server), covers, "{resource}");
        }
    }

    #[test]
    fn scope_is_configured_then_challenged_then_supported_then_omitted() {
        let discovered = |scopes: Option<Vec<&str>>| Discovered {
            resource: "r".into(),
            resource_scopes: scopes.map(|s| s.into_iter().map(str::to_string).collect()),
            auth_server: AuthServerMetadata::default(),
        };
        let challenged = Challenge {
            scope: Some("mcp:basic".into()),
            ..Challenge::default()
        };
        let none = Challenge::default();
        let supported = discovered(Some(vec!["a", "b"]));
        assert_eq!(
            select_scope(Some("mine"), &challenged, &supported).as_deref(),
            Some("mine")
        );
        assert_eq!(
            select_scope(None, &challenged, &supported).as_deref(),
            Some("mcp:basic")
        );
        assert_eq!(
            select_scope(None, &none, &supported).as_deref(),
            Some("a b")
        );
        assert_eq!(select_scope(None, &none, &discovered(None)), None);
        assert_eq!(
            select_scope(Some(" "), &none, &discovered(Some(vec![]))),
            None
        );
    }
}
