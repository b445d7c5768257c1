//! Authorization-code tokens on disk: one JSON file per server under the token directory
//! (`<data dir>/mcp-oauth/<server>.json`, mode 0600, written atomically), so the daemon uses
//! and refreshes what `antler mcp login` obtained, and a rotated refresh token survives a
//! restart.
//!
//! Contract: owned by the oauth-login lane.

#![allow(dead_code)] // contract: the owning lane removes this

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::mcp::oauth::OAuthError;

/// What is kept for one server.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct StoredTokens {
    pub access_token: Option<String>,
    pub refresh_token: Option<String>,
    /// Unix seconds.
    pub expires_at: Option<u64>,
    pub scope: Option<String>,
    pub token_endpoint: Option<String>,
    pub resource: Option<String>,
    /// The client as registered (dynamic registration) or configured.
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    pub token_endpoint_auth_method: Option<String>,
}

/// The token directory.
#[derive(Clone, Debug)]
pub(crate) struct TokenStore {
    dir: PathBuf,
}

impl TokenStore {
    pub(crate) fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    pub(crate) fn path(&self, server: &str) -> PathBuf {
        self.dir.join(format!("{server}.json"))
    }

    /// The server's tokens; `Ok(None)` when it was never authorized.
    pub(crate) fn load(&self, server: &str) -> Result<Option<StoredTokens>, OAuthError> {
        let _ = server;
        Ok(None)
    }

    pub(crate) fn save(&self, server: &str, tokens: &StoredTokens) -> Result<(), OAuthError> {
        let _ = (server, tokens);
        Err(OAuthError::Unsupported(
            "keeping authorization-code tokens is not built yet".into(),
        ))
    }
}
