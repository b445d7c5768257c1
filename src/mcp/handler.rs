//! The client side of an MCP session: what Antler tells a server it can do (its
//! `ClientInfo`) and how it answers the server's own requests (elicitation).
//!
//! Contract: owned by the transport lane.

/// How a server's `elicitation/create` is answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ElicitationPolicy {
    /// The capability is not declared (the daemon: no person to ask mid-turn).
    #[default]
    Unsupported,
    /// Declared, and every request declined.
    Decline,
    /// Declared, and a request accepted with the form's defaults when every required field
    /// has one (declined otherwise).
    AcceptDefaults,
}

/// Antler's `ClientHandler`.
#[derive(Clone, Debug, Default)]
pub(crate) struct McpClient {
    #[allow(dead_code)] // contract: used by the transport lane
    pub(crate) elicitation: ElicitationPolicy,
}

impl rmcp::ClientHandler for McpClient {}
