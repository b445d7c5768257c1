//! How the token source gets a token for each grant: one token request for
//! `client_credentials` and `refresh_token` (to the configured or discovered endpoint), and
//! for `authorization_code` the saved tokens (refreshed when stale, the rotation saved), else a
//! person's authorization in a browser when one is at hand.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::config::Secret;
use crate::mcp::config::{GrantType, TokenAuthMethod};
use crate::mcp::oauth::challenge::Challenge;
use crate::mcp::oauth::login::{self, LoginRequest};
use crate::mcp::oauth::token::{self, ClientCredentials, Grant, TokenRequest};
use crate::mcp::oauth::token_store::{StoredTokens, TokenStore};
use crate::mcp::oauth::{OAuthError, State, TokenSource, lifetime_of};

/// With a configured `token_url` (no metadata to say what the server supports), the methods
/// Antler used before discovery existed: a secret goes in the form.
const CONFIGURED_ENDPOINT_METHODS: [&str; 3] = ["client_secret_post", "private_key_jwt", "none"];

impl TokenSource {
    /// `client_credentials` or `refresh_token`: one request; the token becomes the one in force.
    pub(super) async fn fetch_into(
        &self,
        state: &mut State,
        scope: Option<String>,
    ) -> Result<(), OAuthError> {
        let request = self.token_request(state, scope.clone())?;
        let response = token::request_token(&self.http, &request).await?;
        if let Some(rotated) = response.refresh_token.filter(|t| !t.is_empty()) {
            state.refresh_token = Some(Secret::new(rotated));
        }
        state.scope = response.scope.filter(|s| !s.trim().is_empty()).or(scope);
        let lifetime = lifetime_of(response.expires_in);
        self.cache(state, response.token_type, &response.access_token, lifetime);
        tracing::debug!(
            server = %self.context.server_name,
            token_endpoint = %request.token_endpoint,
            expires_in = lifetime.as_secs(),
            "Fetched an OAuth token for an MCP server"
        );
        Ok(())
    }

    fn token_request(
        &self,
        state: &State,
        scope: Option<String>,
    ) -> Result<TokenRequest, OAuthError> {
        let configured: Vec<String> = CONFIGURED_ENDPOINT_METHODS
            .iter()
            .map(|m| m.to_string())
            .collect();
        let (token_endpoint, supported, issuer, resource) =
            match (&self.config.token_url, state.discovered.as_deref()) {
                (Some(url), _) => (url.clone(), Some(configured), None, None),
                (None, Some(found)) => (
                    found.auth_server.token_endpoint.clone(),
                    found
                        .auth_server
                        .token_endpoint_auth_methods_supported
                        .clone(),
                    Some(found.issuer()),
                    Some(found.resource.clone()),
                ),
                (None, None) => {
                    return Err(OAuthError::Unsupported(format!(
                        "{} has no oauth.token_url and has not said where its authorization \
                         server is; set oauth.token_url",
                        self.context.server_url
                    )));
                }
            };
        let grant = match self.config.grant_type {
            GrantType::RefreshToken | GrantType::AuthorizationCode => {
                Grant::RefreshToken(state.refresh_token.clone().ok_or_else(|| {
                    OAuthError::Unsupported(
                        "oauth.refresh_token is empty; set it (is its $VAR set?)".into(),
                    )
                })?)
            }
            GrantType::ClientCredentials => Grant::ClientCredentials,
        };
        let method = token::choose_method(
            self.config.token_endpoint_auth_method,
            self.config.private_key.is_some(),
            self.config.client_secret.is_some(),
            supported.as_deref(),
        );
        Ok(TokenRequest {
            token_endpoint,
            client: ClientCredentials {
                client_id: self.config.client_id.clone().unwrap_or_default(),
                client_secret: self.config.client_secret.clone(),
                private_key: self.config.private_key.clone(),
                signing_algorithm: self.config.signing_algorithm.clone(),
                method,
            },
            grant,
            scope,
            resource,
            audience: self.config.audience.clone(),
            issuer,
        })
    }

    /// `authorization_code`, before a request: the saved access token while fresh, else one
    /// refreshed with the saved refresh token. `false`: nothing usable is saved.
    pub(super) async fn use_stored(&self, state: &mut State) -> Result<bool, OAuthError> {
        self.load_stored(state)?;
        let Some(stored) = &state.stored else {
            return Ok(false);
        };
        if let (Some(access), Some(expires_at)) = (&stored.access_token, stored.expires_at) {
            let left = Duration::from_secs(expires_at.saturating_sub(unix_now()));
            if left > self.config.refresh_skew {
                let (access, scope) = (access.clone(), stored.scope.clone());
                state.scope = scope;
                self.cache(state, None, &access, left);
                return Ok(true);
            }
        }
        self.refresh_stored(state).await
    }

    /// The server challenged an authorization-code token (or its lack): refresh once, else
    /// authorize in a browser when a person is at hand, else say to run `antler mcp login`.
    pub(super) async fn authorize_code(
        &self,
        state: &mut State,
        challenge: &Challenge,
        step_up: bool,
        scope: Option<String>,
    ) -> Result<(), OAuthError> {
        // Read the file again: a person may have run `antler mcp login` since it was read.
        state.stored_loaded = false;
        self.load_stored(state)?;
        if !step_up && self.refresh_stored(state).await? {
            return Ok(());
        }
        if !self.context.interactive {
            return Err(OAuthError::LoginRequired {
                server: self.context.server_name.clone(),
                scope: if step_up { scope } else { None },
            });
        }
        let server_name = self.context.server_name.clone();
        let prompt = move |url: &str| {
            eprintln!("To authorize Antler with the MCP server {server_name}, open:\n  {url}");
        };
        let extra_scope = if step_up { scope.clone() } else { None };
        let request = LoginRequest {
            server_name: &self.context.server_name,
            server_url: &self.context.server_url,
            config: &self.config,
            challenge: Some(challenge),
            extra_scope: extra_scope.as_deref(),
            prompt: &prompt,
        };
        let tokens = login::authorize(&self.http, &request).await?;
        let Some(access) = tokens.access_token.clone().filter(|t| !t.is_empty()) else {
            return Err(OAuthError::NoToken {
                url: tokens.token_endpoint.clone().unwrap_or_default(),
            });
        };
        let lifetime = tokens
            .expires_at
            .map(|at| Duration::from_secs(at.saturating_sub(unix_now())))
            .unwrap_or(super::DEFAULT_LIFETIME);
        state.scope = tokens.scope.clone().or(scope);
        self.cache(state, None, &access, lifetime);
        self.save_stored(&tokens);
        state.stored = Some(tokens);
        Ok(())
    }

    fn load_stored(&self, state: &mut State) -> Result<(), OAuthError> {
        if !state.stored_loaded {
            if let Some(dir) = &self.context.token_dir {
                state.stored = TokenStore::new(dir.clone()).load(&self.context.server_name)?;
            }
            state.stored_loaded = true;
        }
        Ok(())
    }

    /// Kept on disk when the context has a token directory; a failure to write is logged (the
    /// tokens still work until the process ends).
    fn save_stored(&self, tokens: &StoredTokens) {
        if let Some(dir) = &self.context.token_dir
            && let Err(error) = TokenStore::new(dir.clone()).save(&self.context.server_name, tokens)
        {
            tracing::warn!(
                server = %self.context.server_name,
                %error,
                "Could not save the MCP server's OAuth tokens; it will need authorizing again after a restart"
            );
        }
    }

    /// The saved refresh token exchanged for a new access token; `false` when there is none
    /// or the server refused it (the saved access token is then dropped).
    async fn refresh_stored(&self, state: &mut State) -> Result<bool, OAuthError> {
        let Some(stored) = state.stored.clone() else {
            return Ok(false);
        };
        let (Some(refresh), Some(endpoint)) =
            (stored.refresh_token.clone(), stored.token_endpoint.clone())
        else {
            return Ok(false);
        };
        let Some(client_id) = stored
            .client_id
            .clone()
            .or_else(|| self.config.client_id.clone())
        else {
            return Ok(false);
        };
        let client_secret = stored
            .client_secret
            .clone()
            .map(Secret::new)
            .or_else(|| self.config.client_secret.clone());
        let method = stored
            .token_endpoint_auth_method
            .as_deref()
            .and_then(|m| serde_json::from_value::<TokenAuthMethod>(m.into()).ok())
            .unwrap_or_else(|| {
                token::choose_method(
                    self.config.token_endpoint_auth_method,
                    self.config.private_key.is_some(),
                    client_secret.is_some(),
                    None,
                )
            });
        let request = TokenRequest {
            token_endpoint: endpoint,
            client: ClientCredentials {
                client_id,
                client_secret,
                private_key: self.config.private_key.clone(),
                signing_algorithm: self.config.signing_algorithm.clone(),
                method,
            },
            grant: Grant::RefreshToken(Secret::new(refresh)),
            scope: None,
            resource: stored.resource.clone(),
            audience: self.config.audience.clone(),
            issuer: None,
        };
        let response = match token::request_token(&self.http, &request).await {
            Ok(response) => response,
            Err(error @ (OAuthError::TokenRefused { .. } | OAuthError::Refused { .. })) => {
                tracing::warn!(
                    server = %self.context.server_name,
                    %error,
                    "The saved OAuth refresh token was refused; the server needs authorizing again"
                );
                if let Some(stored) = &mut state.stored {
                    stored.access_token = None;
                    stored.refresh_token = None;
                }
                return Ok(false);
            }
            Err(error) => return Err(error),
        };
        let lifetime = lifetime_of(response.expires_in);
        let mut updated = stored;
        updated.access_token = Some(response.access_token.clone());
        updated.expires_at = Some(unix_now() + lifetime.as_secs());
        if let Some(rotated) = response.refresh_token.filter(|t| !t.is_empty()) {
            updated.refresh_token = Some(rotated);
        }
        if let Some(scope) = response.scope.filter(|s| !s.trim().is_empty()) {
            updated.scope = Some(scope);
        }
        state.scope = updated.scope.clone();
        self.cache(state, response.token_type, &response.access_token, lifetime);
        self.save_stored(&updated);
        state.stored = Some(updated);
        tracing::debug!(
            server = %self.context.server_name,
            expires_in = lifetime.as_secs(),
            "Refreshed the MCP server's saved OAuth token"
        );
        Ok(true)
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}
