//! Checks of the gateway keys that face clients: the connection caps and the extra names the
//! `Host` header may carry.

use crate::config::GatewayConfig;
use crate::config::problem::ConfigProblem;

/// Every problem of `gateway.max_connections`, `max_connections_per_ip` and `allowed_hosts`.
pub(crate) fn problems(gateway: &GatewayConfig) -> Vec<ConfigProblem> {
    let mut problems = Vec::new();
    if gateway.max_connections == 0 {
        problems.push(ConfigProblem::new(
            "gateway.max_connections",
            "must be at least 1",
        ));
    }
    if gateway.max_connections_per_ip == 0 {
        problems.push(ConfigProblem::new(
            "gateway.max_connections_per_ip",
            "must be at least 1",
        ));
    }
    for (index, host) in gateway.allowed_hosts.iter().enumerate() {
        if !is_host(host) {
            problems.push(ConfigProblem::new(
                format!("gateway.allowed_hosts[{index}]"),
                format!(
                    "{host:?} is not a host name; give a name or ip address without scheme, port \
                     or path, e.g. `antler.example.com`, `192.168.1.20` or `[fd00::20]`"
                ),
            ));
        }
    }
    problems
}

/// A host as the `Host` header and URLs carry it: a domain name, an IPv4 address or a bracketed
/// IPv6 address (parsed the way browsers parse it). Wildcards are not matched, so refused.
fn is_host(host: &str) -> bool {
    !host.contains('*') && url::Host::parse(host).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_names_or_addresses_without_port_or_scheme() {
        for good in [
            "antler.example.com",
            "192.168.1.20",
            "[fd00::20]",
            "Antler.LAN",
        ] {
            assert!(is_host(good), "{good}");
        }
        for bad in [
            "",
            "antler.example.com:8787",
            "http://antler.example.com",
            "antler.example.com/",
            "fd00::20",
            "*.example.com",
            "two words",
        ] {
            assert!(!is_host(bad), "{bad}");
        }
    }

    #[test]
    fn a_zero_per_ip_cap_and_a_bad_host_are_named_by_key() {
        let gateway = GatewayConfig {
            max_connections: 0,
            max_connections_per_ip: 0,
            allowed_hosts: vec!["ok.example".into(), "bad:1".into()],
            ..GatewayConfig::default()
        };
        let paths: Vec<String> = problems(&gateway).iter().map(|p| p.path.clone()).collect();
        assert_eq!(
            paths,
            [
                "gateway.max_connections",
                "gateway.max_connections_per_ip",
                "gateway.allowed_hosts[1]"
            ]
        );
    }
}
