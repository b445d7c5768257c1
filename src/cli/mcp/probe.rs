//! `antler mcp probe URL`: connects to a server by URL as Antler would (initialize, list its
//! tools, call the one named), with a configured entry's headers and OAuth settings when
//! `--server` names one; for a person debugging a server and for the MCP conformance suite.
//!
//! The steps are told on stderr in plain words; stdout holds only JSON (the call's result, or
//! without `--tool` the handshake and the tools), so a script can read it. Exit codes as for
//! `antler mcp call`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use serde_json::json;

use crate::cli::mcp::{McpCliError, configured_server, not_called, print_result};
use crate::config::AppConfig;
use crate::mcp::config::{DEFAULT_TOOL_CALL_TIMEOUT, ServerConfig, Transport, TransportKind};
use crate::mcp::probe::{Handshake, ProbeOptions, ProbeSession, parse_arguments};
use crate::mcp::{ElicitationPolicy, TOKEN_DIR_NAME};

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum ProbeTransport {
    Http,
    Sse,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum ProbeElicitation {
    Decline,
    AcceptDefaults,
}

#[derive(Debug, clap::Args)]
pub struct ProbeArgs {
    /// The server's MCP endpoint.
    pub url: String,
    /// Streamable HTTP or the legacy HTTP+SSE transport (default: the `--server` entry's, else
    /// http).
    #[arg(long, value_enum)]
    pub transport: Option<ProbeTransport>,
    /// Take headers and OAuth settings from this entry of extensions_config.json (its tokens
    /// are then kept in the data dir, as `antler mcp login` keeps them).
    #[arg(long)]
    pub server: Option<String>,
    /// Call this tool after listing.
    #[arg(long)]
    pub tool: Option<String>,
    /// The tool's arguments, a JSON object.
    #[arg(long)]
    pub args: Option<String>,
    /// How the server's elicitation requests are answered.
    #[arg(long, value_enum, default_value = "decline")]
    pub elicitation: ProbeElicitation,
}

pub async fn run(
    config: &AppConfig,
    config_file: Option<&Path>,
    args: ProbeArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, McpCliError> {
    let arguments = match parse_arguments(args.args.as_deref()) {
        Ok(arguments) => arguments,
        Err(message) => return Ok(not_called(&message)),
    };
    if !url::Url::parse(&args.url).is_ok_and(|u| matches!(u.scheme(), "http" | "https")) {
        return Ok(not_called(&format!(
            "{} is not an http(s) URL; give the server's MCP endpoint, e.g. http://localhost:3000/mcp",
            args.url
        )));
    }
    let (server, token_dir) = match &args.server {
        Some(name) => match configured_server(config, config_file, name) {
            Ok(entry) => match with_url(entry, &args.url, args.transport) {
                Ok(server) => (server, Some(config.data_dir().join(TOKEN_DIR_NAME))),
                Err(message) => return Ok(not_called(&message)),
            },
            Err(message) => return Ok(not_called(&message)),
        },
        None => (ad_hoc(&args.url, args.transport), None),
    };
    let options = ProbeOptions {
        elicitation: match args.elicitation {
            ProbeElicitation::Decline => ElicitationPolicy::Decline,
            ProbeElicitation::AcceptDefaults => ElicitationPolicy::AcceptDefaults,
        },
        token_dir,
        discover_oauth: true,
    };
    let kind = server.transport.kind();
    eprintln!("Connecting to {} over {}", args.url, transport_words(kind));
    let session = match ProbeSession::open(&server, &options).await {
        Ok(session) => session,
        Err(error) => return Ok(not_called(&error.to_string())),
    };
    let handshake = session.handshake();
    if let Some(handshake) = &handshake {
        eprintln!("{}", handshake_words(handshake));
    }
    let outcome = list_and_call(&session, &args, arguments, handshake.as_ref(), out).await;
    session.close().await;
    outcome
}

async fn list_and_call(
    session: &ProbeSession,
    args: &ProbeArgs,
    arguments: Option<serde_json::Map<String, serde_json::Value>>,
    handshake: Option<&Handshake>,
    out: &mut dyn Write,
) -> Result<ExitCode, McpCliError> {
    let tools = match session.tools().await {
        Ok(tools) => tools,
        Err(error) => return Ok(not_called(&error.to_string())),
    };
    let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    match names.len() {
        0 => eprintln!("Tools: none listed"),
        n => eprintln!("Tools ({n}): {}", names.join(", ")),
    }
    let Some(tool) = &args.tool else {
        let summary = json!({
            "protocolVersion": handshake.map(|h| h.protocol_version.clone()),
            "serverInfo": handshake.map(|h| json!({"name": h.server_name, "version": h.server_version})),
            "capabilities": handshake.map(|h| h.capabilities.clone()),
            "tools": tools,
        });
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&summary).unwrap_or_default()
        )?;
        return Ok(ExitCode::SUCCESS);
    };
    if !names.contains(tool) {
        eprintln!("note: `{tool}` is not among the tools listed; calling it anyway");
    }
    let shown = arguments
        .as_ref()
        .map(|a| serde_json::Value::Object(a.clone()).to_string())
        .unwrap_or_else(|| "no arguments".into());
    eprintln!("Calling {tool} with {shown}");
    match session.call(tool, arguments).await {
        Ok(result) => {
            let outcome = if result.is_error == Some(true) {
                "the tool reported an error"
            } else {
                "the tool answered"
            };
            eprintln!("Result: {outcome}");
            print_result(out, &result)
        }
        Err(error) => Ok(not_called(&error.to_string())),
    }
}

/// A configured entry pointed at `url` (its headers and OAuth kept); a stdio entry has none
/// to lend.
fn with_url(
    mut server: ServerConfig,
    url: &str,
    transport: Option<ProbeTransport>,
) -> Result<ServerConfig, String> {
    let Transport::Remote {
        kind,
        url: entry_url,
        ..
    } = &mut server.transport
    else {
        return Err(format!(
            "`{}` is a stdio server, which has no URL to probe; run `antler mcp call {} TOOL` \
             to call one of its tools",
            server.name, server.name
        ));
    };
    if let Some(transport) = transport {
        *kind = kind_of(transport);
    }
    *entry_url = url.to_string();
    Ok(server)
}

/// A server known only by its URL, named after its host.
fn ad_hoc(url: &str, transport: Option<ProbeTransport>) -> ServerConfig {
    let name = url::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_else(|| "probe".into());
    ServerConfig {
        name,
        enabled: true,
        transport: Transport::Remote {
            kind: kind_of(transport.unwrap_or(ProbeTransport::Http)),
            url: url.to_string(),
            headers: BTreeMap::new(),
            oauth: None,
        },
        description: None,
        tool_name_prefix: true,
        tool_call_timeout: DEFAULT_TOOL_CALL_TIMEOUT,
        trusted: false,
    }
}

fn kind_of(transport: ProbeTransport) -> TransportKind {
    match transport {
        ProbeTransport::Http => TransportKind::Http,
        ProbeTransport::Sse => TransportKind::Sse,
    }
}

fn transport_words(kind: TransportKind) -> &'static str {
    match kind {
        TransportKind::Sse => "the legacy HTTP+SSE transport",
        _ => "streamable HTTP",
    }
}

fn handshake_words(handshake: &Handshake) -> String {
    let server = match (&handshake.server_name, &handshake.server_version) {
        (Some(name), Some(version)) => format!("{name} {version}"),
        (Some(name), None) => name.clone(),
        _ => "a server that did not name itself".into(),
    };
    let capabilities = if handshake.capabilities.is_empty() {
        "none".to_string()
    } else {
        handshake.capabilities.join(", ")
    };
    let mut text = format!(
        "Handshake done: protocol version {}, server {server}, capabilities: {capabilities}",
        handshake.protocol_version
    );
    // Instructions are for the model and may run to pages; their first line says what they are.
    if let Some(instructions) = &handshake.instructions {
        let lines = instructions
            .lines()
            .filter(|l| !l.trim().is_empty())
            .count();
        let first = instructions
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        let first: String = first.chars().take(120).collect();
        text.push_str(&format!(
            "\nThe server gives instructions ({lines} lines), starting: {first}"
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_handshake_is_told_in_words() {
        let handshake = Handshake {
            protocol_version: "2025-11-25".into(),
            server_name: Some("test-server".into()),
            server_version: Some("1.0.0".into()),
            capabilities: vec!["tools".into(), "logging".into()],
            instructions: None,
        };
        assert_eq!(
            handshake_words(&handshake),
            "Handshake done: protocol version 2025-11-25, server test-server 1.0.0, \
             capabilities: tools, logging"
        );
    }

    #[test]
    fn an_entry_lends_its_settings_to_the_url() {
        let entry = ad_hoc("http://old.example/mcp", Some(ProbeTransport::Sse));
        let server = with_url(entry, "http://localhost:1/mcp", None).unwrap();
        let Transport::Remote { kind, url, .. } = &server.transport else {
            panic!("remote")
        };
        assert_eq!(
            (*kind, url.as_str()),
            (TransportKind::Sse, "http://localhost:1/mcp")
        );
        assert_eq!(server.name, "old.example");
    }
}
