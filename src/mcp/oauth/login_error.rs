//! Why a person's authorization in a browser did not happen: shared by the login and its
//! parts (the loopback listener, the client registration), so they depend on it, not on each
//! other.

/// Why an authorization in the browser did not happen; each says what to do.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LoginError {
    #[error(
        "the authorization server refused the authorization: {error}{}; approve the request in the browser, or check the client and scope settings, then run `antler mcp login` again",
        .description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default()
    )]
    Denied {
        error: String,
        description: Option<String>,
    },
    #[error(
        "no authorization came back from the browser within {minutes} minutes; run `antler mcp login` again and finish it in the browser"
    )]
    Timeout { minutes: u64 },
    #[error(
        "cannot listen on 127.0.0.1:{port} for the browser's redirect: {detail}; free the port or change oauth.redirect_port"
    )]
    Listen { port: u16, detail: String },
    #[error("the authorization stopped before the browser came back; run `antler mcp login` again")]
    Interrupted,
    #[error(
        "the authorization server of {server} offers no dynamic client registration{}; register a client with it and set oauth.client_id (and oauth.client_secret) in {server}'s entry of extensions_config.json",
        if *.metadata_hint { ", and no oauth.client_metadata_url is set although it accepts Client ID Metadata Documents" } else { "" }
    )]
    NoClient { server: String, metadata_hint: bool },
    #[error(
        "registering Antler at {url} failed: {detail}; register a client with the authorization server and set oauth.client_id in the server's entry of extensions_config.json"
    )]
    Registration { url: String, detail: String },
    #[error(
        "the authorization server of {server} publishes no usable authorization_endpoint ({detail}), so nobody can authorize in a browser there; use oauth.grant_type client_credentials or refresh_token"
    )]
    NoAuthorizationEndpoint { server: String, detail: String },
    #[error(
        "the authorization server of {server} does not support PKCE with S256 (it lists {methods}); Antler does not authorize without it, ask its operator to enable S256"
    )]
    NoPkce { server: String, methods: String },
}
