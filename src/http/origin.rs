//! Whose request it is, as far as browsers tell: the host it was addressed to (a page that
//! rebinds its own name to 127.0.0.1 still sends that name) and the site that made it (`Origin`,
//! `Sec-Fetch-Site`). Pure functions over headers, so the rules are tested as a table.

use axum::http::uri::Authority;
use axum::http::{HeaderMap, HeaderValue};
use url::{Host, Url};

/// A host as browsers parse it: lowercase, IDNA, an IPv4 address in any notation normalised,
/// IPv6 in brackets; one trailing dot ignored.
fn parse_host(host: &str) -> Option<Host> {
    let host = host.strip_suffix('.').unwrap_or(host);
    Host::parse(host).ok()
}

/// `localhost` and its subdomains (which browsers resolve to loopback themselves, never through
/// DNS) and loopback addresses.
fn is_loopback(host: &Host) -> bool {
    match host {
        Host::Domain(name) => name == "localhost" || name.ends_with(".localhost"),
        Host::Ipv4(ip) => ip.is_loopback(),
        Host::Ipv6(ip) => {
            ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// Whether a request addressed to `host` (the `Host` header's host, any port) may be served
/// while there are no API tokens: a loopback name, the host of `listen` (`host:port`), or one of
/// `allowed` (`gateway.allowed_hosts`).
pub(crate) fn is_own_host(host: &str, listen: &str, allowed: &[String]) -> bool {
    let Some(host) = parse_host(host) else {
        return false;
    };
    if is_loopback(&host) {
        return true;
    }
    let listen_host = listen
        .parse::<Authority>()
        .ok()
        .and_then(|authority| parse_host(authority.host()));
    listen_host.is_some_and(|listen| listen == host)
        || allowed
            .iter()
            .filter_map(|a| parse_host(a))
            .any(|a| a == host)
}

/// Why a browser request counts as coming from another site.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum CrossSite {
    /// `Sec-Fetch-Site: cross-site` or `same-site` (another port of the same host is same-site).
    FetchSite(String),
    /// An `Origin` that is not the request's own host and port (or `null`, or unreadable).
    Origin(String),
}

impl std::fmt::Display for CrossSite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::FetchSite(site) => write!(f, "Sec-Fetch-Site: {site}"),
            Self::Origin(origin) => write!(f, "Origin: {origin}"),
        }
    }
}

/// Whether a request with `headers`, addressed to `authority` (its `Host`), comes from a page of
/// another origin. Requests without either header (curl, scripts, API clients) do not.
///
/// The page's origin is compared with the address the request was sent to, not with a list of
/// names: the daemon's own page reaches it through `127.0.0.1`, `localhost`, an SSH tunnel's
/// port or a reverse proxy's name alike, and in each case its origin is that address. A proxy
/// that rewrites `Host` is covered by naming its public host in `allowed`.
pub(crate) fn cross_site(
    headers: &HeaderMap,
    authority: Option<&Authority>,
    allowed: &[String],
) -> Option<CrossSite> {
    if let Some(site) = headers.get("sec-fetch-site") {
        let site = String::from_utf8_lossy(site.as_bytes()).to_ascii_lowercase();
        if site == "cross-site" || site == "same-site" {
            return Some(CrossSite::FetchSite(site));
        }
    }
    let mut origins = headers.get_all(axum::http::header::ORIGIN).iter();
    let origin = origins.next()?;
    if origins.next().is_none() && is_own_origin(origin, authority, allowed) {
        return None;
    }
    let shown: String = String::from_utf8_lossy(origin.as_bytes())
        .chars()
        .take(100)
        .collect();
    Some(CrossSite::Origin(shown))
}

fn is_own_origin(origin: &HeaderValue, authority: Option<&Authority>, allowed: &[String]) -> bool {
    let Some(origin) = origin.to_str().ok().and_then(|o| Url::parse(o).ok()) else {
        return false;
    };
    let scheme = origin.scheme();
    let (Some(host), Some(port)) = (origin.host(), origin.port_or_known_default()) else {
        return false;
    };
    if !matches!(scheme, "http" | "https") {
        return false;
    }
    let host = host.to_owned();
    if allowed
        .iter()
        .filter_map(|a| parse_host(a))
        .any(|a| a == host)
    {
        return true;
    }
    let Some(authority) = authority else {
        return false;
    };
    let default_port = if scheme == "https" { 443 } else { 80 };
    parse_host(authority.host()).is_some_and(|requested| requested == host)
        && authority.port_u16().unwrap_or(default_port) == port
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_hosts_are_loopback_names_the_listen_host_and_allowed_ones() {
        let allowed = ["antler.lan".to_string(), "[fd00::20]".to_string()];
        for own in [
            "127.0.0.1",
            "127.1.2.3",
            "LOCALHOST",
            "localhost.",
            "app.localhost",
            "[::1]",
            "0x7f.1",
            "antler.lan",
            "Antler.LAN",
            "[fd00:0::20]",
            "192.168.1.5",
        ] {
            assert!(is_own_host(own, "192.168.1.5:8787", &allowed), "{own}");
        }
        for foreign in [
            "evil.example",
            "localhost.evil.example",
            "127.0.0.1.nip.io",
            "192.168.1.6",
            "",
            "[::2]",
            "user@127.0.0.1",
        ] {
            assert!(
                !is_own_host(foreign, "192.168.1.5:8787", &allowed),
                "{foreign}"
            );
        }
    }

    fn verdict(pairs: &[(&str, &str)], host: &str) -> Option<CrossSite> {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(
                axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        let authority: Authority = host.parse().unwrap();
        cross_site(&headers, Some(&authority), &["antler.example.com".into()])
    }

    #[test]
    fn pages_of_other_origins_are_cross_site_and_the_own_page_and_scripts_are_not() {
        let host = "127.0.0.1:8787";
        // Scripts and API clients send neither header; the user typing the URL sends `none`.
        assert_eq!(verdict(&[], host), None);
        assert_eq!(verdict(&[("sec-fetch-site", "none")], host), None);
        // The web chat's own requests.
        let own = [
            ("origin", "http://127.0.0.1:8787"),
            ("sec-fetch-site", "same-origin"),
        ];
        assert_eq!(verdict(&own, host), None);
        assert_eq!(
            verdict(&[("origin", "http://localhost:9000")], "localhost:9000"),
            None
        );
        assert_eq!(verdict(&[("origin", "https://[::1]")], "[::1]:443"), None);
        assert_eq!(
            verdict(&[("origin", "http://antler.lan")], "antler.lan"),
            None
        );
        // A reverse proxy that rewrites Host, with its public name allowed.
        assert_eq!(
            verdict(&[("origin", "https://antler.example.com")], host),
            None
        );
        for (headers, why) in [
            (
                vec![("sec-fetch-site", "cross-site")],
                "Sec-Fetch-Site: cross-site",
            ),
            (
                vec![("sec-fetch-site", "same-site")],
                "Sec-Fetch-Site: same-site",
            ),
            (
                vec![
                    ("origin", "http://127.0.0.1:8787"),
                    ("sec-fetch-site", "same-site"),
                ],
                "Sec-Fetch-Site: same-site",
            ),
            (
                vec![("origin", "http://evil.example")],
                "Origin: http://evil.example",
            ),
            (vec![("origin", "null")], "Origin: null"),
            (
                vec![("origin", "http://127.0.0.1:9000")],
                "Origin: http://127.0.0.1:9000",
            ),
            (
                vec![("origin", "http://localhost:8787")],
                "Origin: http://localhost:8787",
            ),
            (
                vec![("origin", "chrome-extension://abcdef")],
                "Origin: chrome-extension://abcdef",
            ),
            (
                vec![
                    ("origin", "http://127.0.0.1:8787"),
                    ("origin", "http://evil.example"),
                ],
                "Origin: http://127.0.0.1:8787",
            ),
        ] {
            let got = verdict(&headers, host).map(|c| c.to_string());
            assert_eq!(got.as_deref(), Some(why), "{headers:?}");
        }
    }
}
