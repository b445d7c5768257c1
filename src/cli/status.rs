//! `antler status`: asks the running daemon whether it is ready and prints readiness, the
//! default model's reachability, the sandbox, each channel, and which config file and data dir
//! it runs on. The daemon is found as every command finds it ([`crate::cli::locate`]), with only
//! the locating parts of the config read, so a shell without the service's secrets, or a config
//! edit the daemon rejected, does not make a working daemon look broken (it is Docker's health
//! check). Without a local socket it asks `gateway.listen` over TCP.

use std::io::Write;
use std::time::Duration;

use serde_json::Value;

use crate::cli::daemon_client::DaemonClient;
use crate::cli::locate::{Located, locate};
use crate::config::{EnvSource, Locator};

/// Longer than the daemon's model probe (3 s), which `/readyz` may wait for.
const TCP_TIMEOUT: Duration = Duration::from_secs(8);

/// Prints the daemon's state to `out`; `Ok(true)` when it is ready.
pub async fn run(
    locator: &Locator,
    env: &dyn EnvSource,
    out: &mut dyn Write,
) -> std::io::Result<bool> {
    let socket_problem = match locate(locator, env).await {
        Ok(Located::Daemon(found)) => match found.client.get_any_status("/readyz").await {
            Ok((_, answer)) => {
                print_readiness(&answer, out)?;
                print_whereabouts(&answer, &found.client, out)?;
                return Ok(answer["status"] == "ready");
            }
            Err(e) => format!("{} ({e})", found.client.socket().display()),
        },
        Ok(Located::DataDir {
            data_dir,
            no_daemon,
        }) => format!(
            "{} ({no_daemon})",
            crate::daemon::local_socket::socket_path(&data_dir).display()
        ),
        Err(error) => error.to_string(),
    };
    let Some(listen) = &locator.listen else {
        writeln!(
            out,
            "antler is not answering on {socket_problem}, and the config gives no usable \
             gateway.listen to try"
        )?;
        return Ok(false);
    };
    let url = format!("http://{listen}/readyz");
    let tcp_problem = match ask_tcp(&url).await {
        Ok(answer) => {
            print_readiness(&answer, out)?;
            writeln!(out, "via       {url}")?;
            return Ok(answer["status"] == "ready");
        }
        Err(e) => e,
    };
    writeln!(
        out,
        "antler is not answering on {socket_problem} nor at {url} ({tcp_problem})"
    )?;
    Ok(false)
}

/// The config file and data dir the daemon says it runs on (it tells the operator on its
/// socket only), and the socket asked.
fn print_whereabouts(
    answer: &Value,
    client: &DaemonClient,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    if let Some(config) = answer["config"].as_str() {
        writeln!(out, "config    {config}")?;
    }
    if let Some(data_dir) = answer["data_dir"].as_str() {
        writeln!(out, "data dir  {data_dir}")?;
    }
    writeln!(out, "via       {}", client.socket().display())
}

async fn ask_tcp(url: &str) -> Result<Value, String> {
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(TCP_TIMEOUT)
        .build()
        .map_err(|e| e.to_string())?;
    let response = client
        .get(url)
        .send()
        .await
        .map_err(|e| crate::model::http::causes(&e.without_url()))?;
    response
        .json::<Value>()
        .await
        .map_err(|e| format!("not a readiness answer: {e}"))
}

/// One line per part: the daemon, its default model, the sandbox, then each channel.
pub fn print_readiness(answer: &Value, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "daemon    {}",
        answer["status"].as_str().unwrap_or("unknown")
    )?;
    if let Some(problem) = answer["problem"].as_str() {
        writeln!(out, "          {problem}")?;
    }
    if let Some(model) = answer.get("model").filter(|m| m.is_object()) {
        writeln!(out, "model     {}", model_line(model))?;
    }
    if let Some(sandbox) = answer.get("sandbox").and_then(Value::as_object) {
        let provider = sandbox
            .get("provider")
            .and_then(Value::as_str)
            .unwrap_or("unknown");
        let details: Vec<String> = sandbox
            .iter()
            .filter(|(key, _)| key.as_str() != "provider")
            .map(|(key, value)| match value.as_str() {
                Some(text) => format!("{key}: {text}"),
                None => format!("{key}: {value}"),
            })
            .collect();
        if details.is_empty() {
            writeln!(out, "sandbox   {provider}")?;
        } else {
            writeln!(out, "sandbox   {provider} ({})", details.join(", "))?;
        }
    }
    if let Some(backend) = answer["store"]["backend"].as_str() {
        writeln!(out, "store     {backend}")?;
    }
    if let Some(cluster) = answer.get("cluster").filter(|c| c.is_object()) {
        print_cluster(cluster, out)?;
    }
    if let Some(reload) = answer.get("reload").filter(|r| r.is_object()) {
        writeln!(out, "reload    {}", reload_line(reload))?;
    }
    if let Some(channels) = answer["channels"].as_object() {
        for (name, health) in channels {
            let state = health["state"].as_str().unwrap_or("unknown");
            match health["reason"].as_str() {
                Some(reason) => writeln!(out, "{name:<9} {state}: {reason}")?,
                None => writeln!(out, "{name:<9} {state}")?,
            }
            for warning in health["warnings"].as_array().into_iter().flatten() {
                if let Some(warning) = warning.as_str() {
                    writeln!(out, "{:<9} warning: {warning}", "")?;
                }
            }
        }
    }
    Ok(())
}

/// This instance with the leases it holds besides its own, then every instance sharing the
/// store (from their `instance:` leases) with the time it joined.
fn print_cluster(cluster: &Value, out: &mut dyn Write) -> std::io::Result<()> {
    let me = cluster["instance"].as_str().unwrap_or("?");
    let own = format!("{}{me}", crate::cluster::INSTANCE_PREFIX);
    let work: Vec<&str> = cluster["leases"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|name| *name != own)
        .collect();
    if work.is_empty() {
        writeln!(out, "instance  {me}")?;
    } else {
        writeln!(out, "instance  {me} (holds {})", work.join(", "))?;
    }
    if let Some(problem) = cluster["problem"].as_str() {
        return writeln!(out, "cluster   unknown: {problem}");
    }
    let instances: Vec<String> = cluster["instances"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|instance| {
            let id = instance["id"].as_str().unwrap_or("?");
            let joined = instance["since_ms"]
                .as_i64()
                .and_then(chrono::DateTime::from_timestamp_millis)
                .map(|at| at.format("%Y-%m-%d %H:%M:%S UTC").to_string())
                .unwrap_or_else(|| "?".into());
            let this = if id == me { "this one, " } else { "" };
            format!("{id} ({this}joined {joined})")
        })
        .collect();
    let count = match instances.len() {
        1 => "1 instance".to_string(),
        n => format!("{n} instances"),
    };
    writeln!(out, "cluster   {count}: {}", instances.join(", "))
}

/// `rolled_back 2026-12-01 02:41:07 UTC: restored the previous config: telegram: …`.
fn reload_line(reload: &Value) -> String {
    let outcome = reload["outcome"].as_str().unwrap_or("unknown");
    let at = reload["at"]
        .as_i64()
        .and_then(|secs| chrono::DateTime::from_timestamp(secs, 0))
        .map(|at| at.format(" %Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_default();
    match reload["detail"].as_str() {
        Some(detail) => format!("{outcome}{at}: {detail}"),
        None => format!("{outcome}{at}"),
    }
}

fn model_line(model: &Value) -> String {
    let text = |key: &str| model[key].as_str().unwrap_or("?");
    let reachability = match (model["reachable"].as_bool(), model["problem"].as_str()) {
        (Some(true), None) => "reachable".to_string(),
        (Some(true), Some(problem)) => format!("reachable, but {problem}"),
        (_, Some(problem)) => format!("unreachable: {problem}"),
        (_, None) => "unreachable".to_string(),
    };
    format!(
        "{} ({} {}) at {}: {reachability}",
        text("name"),
        text("provider"),
        text("model"),
        text("endpoint")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn printed(answer: Value) -> String {
        let mut out = Vec::new();
        print_readiness(&answer, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn prints_the_model_sandbox_and_channels() {
        let text = printed(json!({
            "status": "ready",
            "model": {"name": "default", "provider": "openai", "model": "qwen2.5:7b",
                      "endpoint": "http://127.0.0.1:9/v1", "reachable": false,
                      "problem": "cannot connect: Connection refused"},
            "sandbox": {"provider": "bwrap", "state": "ok"},
            "channels": {"slack": {"state": "running", "warnings": ["no context: grant channels:history"]},
                         "telegram": {"state": "unhealthy", "reason": "bad token"}},
        }));
        assert_eq!(
            text,
            "daemon    ready\n\
             model     default (openai qwen2.5:7b) at http://127.0.0.1:9/v1: unreachable: cannot connect: Connection refused\n\
             sandbox   bwrap (state: ok)\n\
             slack     running\n          warning: no context: grant channels:history\n\
             telegram  unhealthy: bad token\n"
        );
    }

    #[test]
    fn prints_the_store_and_the_cluster_from_its_lease_records() {
        let text = printed(json!({
            "status": "ready",
            "store": {"backend": "postgres"},
            "cluster": {
                "instance": "web-1",
                "leases": ["instance:web-1", "telegram:transport:0a1b2c3d4e5f6071"],
                "instances": [
                    {"id": "web-1", "since_ms": 1_796_000_000_000_i64, "expires_ms": 1},
                    {"id": "web-2", "since_ms": 1_796_000_060_000_i64, "expires_ms": 1},
                ],
            },
            "channels": {"telegram": {"state": "running"}},
        }));
        assert_eq!(
            text,
            "daemon    ready\n\
             store     postgres\n\
             instance  web-1 (holds telegram:transport:0a1b2c3d4e5f6071)\n\
             cluster   2 instances: web-1 (this one, joined 2026-11-30 00:53:20 UTC), web-2 (joined 2026-11-30 00:54:20 UTC)\n\
             telegram  running\n"
        );
    }

    #[test]
    fn a_reachable_model_and_an_older_daemon_without_the_new_parts() {
        let text = printed(json!({
            "status": "ready",
            "model": {"name": "m", "provider": "anthropic", "model": "claude",
                      "endpoint": "https://api.anthropic.com", "reachable": true},
            "sandbox": {"provider": "local"},
        }));
        assert!(
            text.contains(
                "model     m (anthropic claude) at https://api.anthropic.com: reachable\n"
            )
        );
        assert!(text.contains("sandbox   local\n"));
        assert_eq!(
            printed(json!({"status": "not_ready", "problem": "store down", "channels": {}})),
            "daemon    not_ready\n          store down\n"
        );
    }
}
