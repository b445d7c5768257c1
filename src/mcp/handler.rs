//! The client side of an MCP session: what Antler tells a server it can do (its
//! `ClientInfo`: the protocol version it offers, its capabilities) and how it answers the
//! server's own requests (elicitation, in `elicitation`).

use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationCapability,
    ErrorData, FormElicitationCapability, Implementation, ProtocolVersion,
};
use rmcp::service::{RequestContext, RoleClient};

use crate::mcp::elicitation;
pub use crate::mcp::elicitation::ElicitationPolicy;

/// The protocol version Antler offers in `initialize`.
///
/// Not rmcp's `LATEST` (2026-07-28): that revision replaced the `initialize` handshake with
/// per-request metadata, so no server can answer it from `initialize`; the newest version that
/// has the handshake is what a client using the handshake asks for.
pub const OFFERED_VERSION: ProtocolVersion = ProtocolVersion::LATEST_WITH_INITIALIZE;

/// Every version a server may answer with: the ones rmcp implements (2024-11-05 through
/// 2026-07-28; rmcp adapts the session to each).
pub fn supported_versions() -> &'static [ProtocolVersion] {
    ProtocolVersion::KNOWN_VERSIONS
}

/// Antler's `ClientHandler`.
#[derive(Clone, Debug, Default)]
pub struct McpClient {
    pub(crate) elicitation: ElicitationPolicy,
}

impl McpClient {
    pub fn new(elicitation: ElicitationPolicy) -> Self {
        Self { elicitation }
    }
}

impl rmcp::ClientHandler for McpClient {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        if self.elicitation != ElicitationPolicy::Unsupported {
            // Form mode only: URL mode needs a person at a browser.
            capabilities.elicitation =
                Some(ElicitationCapability::new().with_form(FormElicitationCapability::new()));
        }
        ClientConfig::new(
            capabilities,
            Implementation::new("antler", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(OFFERED_VERSION)
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Ok(elicitation::answer(self.elicitation, &request))
    }
}
