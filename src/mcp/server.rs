//! One configured MCP server: its settings, token source, status and (lazily) its session.

use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::mcp::config::{OAuthConfig, ServerConfig, Transport};
use crate::mcp::connect::{ConnectError, ConnectOptions, Connection, connect};
use crate::mcp::oauth::{TokenContext, TokenSource};

/// How one server stands, for `antler mcp list` and `GET /api/mcp/servers`.
#[derive(Clone, Debug, Serialize, serde::Deserialize, PartialEq, Eq)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ServerStatus {
    Disabled,
    /// Not connected yet (tools are discovered on the first run that needs them).
    Pending,
    Connected,
    Failed {
        error: String,
    },
}

/// One server in a listing.
#[derive(Clone, Debug, Serialize)]
pub struct ServerReport {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub enabled: bool,
    pub description: Option<String>,
    pub status: ServerStatus,
    /// The names the model sees.
    pub tools: Vec<String>,
}

/// One configured server: its settings, token source and (lazily) its session.
pub(crate) struct ServerSlot {
    pub(crate) config: ServerConfig,
    http: reqwest::Client,
    oauth: Option<Arc<TokenSource>>,
    connection: tokio::sync::Mutex<Option<Connection>>,
    status: Mutex<ServerStatus>,
    pub(crate) tools: Mutex<Vec<String>>,
}

impl ServerSlot {
    /// `token_dir`: where authorization-code tokens are kept (`None`: in memory only).
    pub(crate) fn new(
        config: ServerConfig,
        http: reqwest::Client,
        token_dir: Option<std::path::PathBuf>,
    ) -> Self {
        let oauth = match &config.transport {
            // A remote server without an `oauth` block may still have been authorized with
            // `antler mcp login` (its tokens are in `token_dir`); if not, its 401 says to run
            // that instead of a bare "authorization required".
            Transport::Remote { oauth, url, .. } if oauth.is_some() || token_dir.is_some() => {
                Some(Arc::new(TokenSource::new(
                    oauth
                        .as_deref()
                        .cloned()
                        .unwrap_or_else(OAuthConfig::discovered_authorization_code),
                    http.clone(),
                    TokenContext {
                        server_name: config.name.clone(),
                        server_url: url.clone(),
                        token_dir,
                        interactive: false,
                    },
                )))
            }
            _ => None,
        };
        let status = if config.enabled {
            ServerStatus::Pending
        } else {
            ServerStatus::Disabled
        };
        Self {
            config,
            http,
            oauth,
            connection: tokio::sync::Mutex::new(None),
            status: Mutex::new(status),
            tools: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn set_status(&self, status: ServerStatus) {
        if let Ok(mut slot) = self.status.lock() {
            *slot = status;
        }
    }

    /// The session's peer, connecting first when there is none or it died.
    pub(crate) async fn peer(&self) -> Result<rmcp::service::Peer<rmcp::RoleClient>, ConnectError> {
        let mut connection = self.connection.lock().await;
        if let Some(open) = connection.as_ref()
            && !open.session.is_closed()
        {
            return Ok(open.session.peer().clone());
        }
        if connection.take().is_some() {
            tracing::warn!(server = %self.config.name, "The MCP server's session ended; reconnecting");
        }
        match connect(
            &self.config,
            &self.http,
            self.oauth.clone(),
            &ConnectOptions::default(),
        )
        .await
        {
            Ok(open) => {
                let peer = open.session.peer().clone();
                *connection = Some(open);
                self.set_status(ServerStatus::Connected);
                Ok(peer)
            }
            Err(error) => {
                self.set_status(ServerStatus::Failed {
                    error: error.to_string(),
                });
                Err(error)
            }
        }
    }

    /// Forgets a session a call found broken, so the next call reconnects.
    pub(crate) async fn drop_session(&self) {
        if let Some(open) = self.connection.lock().await.take() {
            let _ = open.session.cancel().await;
        }
    }

    pub(crate) fn report(&self) -> ServerReport {
        ServerReport {
            name: self.config.name.clone(),
            kind: self.config.transport.kind().as_str(),
            enabled: self.config.enabled,
            description: self.config.description.clone(),
            status: self
                .status
                .lock()
                .map(|s| s.clone())
                .unwrap_or(ServerStatus::Pending),
            tools: self.tools.lock().map(|t| t.clone()).unwrap_or_default(),
        }
    }
}
