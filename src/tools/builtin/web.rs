//! What `web_search` and `web_fetch` share: the HTTP client, the private-network guard, capped
//! body reads and small queries over a parsed HTML tree.
//!
//! The guard checks a URL's host before the request (IP literals directly, names by resolving
//! them) and the client's own resolver refuses private answers again at connect time, so a name
//! that re-resolves to an internal address between the two checks is still refused.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use markup5ever_rcdom::{Node, NodeData};
use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Sent with every request; some sites refuse clients without one.
pub(crate) const USER_AGENT: &str = concat!(
    "Mozilla/5.0 (compatible; antler/",
    env!("CARGO_PKG_VERSION"),
    "; +https://github.com/antler)"
);

/// Default per-request timeout of the web tools.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);

/// Redirect hops `web_fetch` follows, each checked like the first URL.
pub(crate) const MAX_REDIRECTS: usize = 5;

/// Why a web request failed; the text is what the model reads after `Error: `.
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    #[error(
        "{url} is not a valid http(s) URL; give a full address such as https://example.com/page"
    )]
    InvalidUrl { url: String },
    #[error(
        "{url} points to a private, loopback or link-local address ({ip}); only public web pages can be fetched"
    )]
    PrivateAddress { url: String, ip: IpAddr },
    #[error("could not resolve {host}: {detail}")]
    Resolve { host: String, detail: String },
    #[error("request to {url} failed: {detail}")]
    Request { url: String, detail: String },
    #[error("{url} answered HTTP {status}")]
    Status { url: String, status: u16 },
    #[error("{url} redirected more than {MAX_REDIRECTS} times; try the final address directly")]
    TooManyRedirects { url: String },
    #[error("the page at {url} could not be converted: {error}")]
    Unconvertible {
        url: String,
        error: antler_convert::ConvertError,
    },
}

/// Whether `ip` is on the public internet: not loopback, private, link-local, CGNAT,
/// unspecified, multicast, documentation or an IPv6 form of one of those.
pub fn is_public_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_public_v4(v4),
            None => is_public_v6(v6),
        },
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        // Carrier-grade NAT 100.64.0.0/10 and benchmarking 198.18.0.0/15.
        || (a == 100 && (64..128).contains(&b))
        || (a == 198 && (b == 18 || b == 19))
        || a >= 240)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        // Unique local fc00::/7 and link-local fe80::/10.
        || (first & 0xfe00) == 0xfc00
        || (first & 0xffc0) == 0xfe80
        // Documentation 2001:db8::/32.
        || (first == 0x2001 && ip.segments()[1] == 0x0db8)
        // NAT64 64:ff9b::/96 reaches the IPv4 address in its last 32 bits.
        || (ip.segments()[..6] == [0x64, 0xff9b, 0, 0, 0, 0] && !is_public_v4(nat64_v4(ip)))
        // IPv4-compatible / NAT64 forms could smuggle an internal IPv4 address.
        || ip.to_ipv4().is_some_and(|v4| !is_public_v4(v4)))
}

fn nat64_v4(ip: Ipv6Addr) -> Ipv4Addr {
    let [.., a, b, c, d] = ip.octets();
    Ipv4Addr::new(a, b, c, d)
}

/// Parses an http(s) URL.
pub(crate) fn parse_url(raw: &str) -> Result<Url, WebError> {
    let invalid = || WebError::InvalidUrl {
        url: raw.to_string(),
    };
    let url = Url::parse(raw.trim()).map_err(|_| invalid())?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(invalid());
    }
    Ok(url)
}

/// Refuses a URL whose host is, or resolves to, a non-public address.
pub(crate) async fn check_public(url: &Url) -> Result<(), WebError> {
    let blocked = |ip: IpAddr| WebError::PrivateAddress {
        url: url.to_string(),
        ip,
    };
    match url.host() {
        Some(url::Host::Ipv4(ip)) if !is_public_v4(ip) => Err(blocked(IpAddr::V4(ip))),
        Some(url::Host::Ipv6(ip)) if !is_public_ip(IpAddr::V6(ip)) => Err(blocked(IpAddr::V6(ip))),
        Some(url::Host::Domain(host)) => {
            let addrs = resolve(host).await?;
            match addrs.iter().find(|a| !is_public_ip(a.ip())) {
                Some(addr) => Err(blocked(addr.ip())),
                None => Ok(()),
            }
        }
        _ => Ok(()),
    }
}

async fn resolve(host: &str) -> Result<Vec<SocketAddr>, WebError> {
    let error = |detail: String| WebError::Resolve {
        host: host.to_string(),
        detail,
    };
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, 0))
        .await
        .map_err(|e| error(e.to_string()))?
        .collect();
    if addrs.is_empty() {
        return Err(error("no addresses".into()));
    }
    Ok(addrs)
}

/// The client's resolver when private networks are refused: it fails rather than hand back a
/// non-public address, whatever the name resolved to a moment earlier.
struct PublicOnlyResolver;

impl Resolve for PublicOnlyResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs = resolve(&host).await?;
            if let Some(addr) = addrs.iter().find(|a| !is_public_ip(a.ip())) {
                return Err(
                    format!("{host} resolves to the non-public address {}", addr.ip()).into(),
                );
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

/// A client that follows no redirects itself (callers check every hop).
pub(crate) fn client(timeout: Duration, allow_private: bool) -> Result<reqwest::Client, String> {
    let mut builder = reqwest::Client::builder()
        .user_agent(USER_AGENT)
        .timeout(timeout)
        .redirect(reqwest::redirect::Policy::none());
    if !allow_private {
        // A proxy would resolve the target itself, past the guard.
        builder = builder
            .no_proxy()
            .dns_resolver(Arc::new(PublicOnlyResolver));
    }
    builder
        .build()
        .map_err(|e| format!("could not set up the HTTP client: {e}"))
}

/// Reads at most `max_bytes` of a body; the flag says whether more was left unread.
pub(crate) async fn read_capped(
    mut response: reqwest::Response,
    max_bytes: usize,
) -> Result<(Vec<u8>, bool), WebError> {
    let url = response.url().to_string();
    let mut body = Vec::new();
    loop {
        let chunk = response.chunk().await.map_err(|e| WebError::Request {
            url: url.clone(),
            detail: e.to_string(),
        })?;
        let Some(chunk) = chunk else {
            return Ok((body, false));
        };
        let room = max_bytes - body.len();
        if chunk.len() >= room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
}

/// A request error as the model should read it (the URL, not reqwest's internals).
pub(crate) fn request_error(url: &Url, error: &reqwest::Error) -> WebError {
    let detail = if error.is_timeout() {
        "timed out".to_string()
    } else if error.is_connect() {
        format!("could not connect ({})", root_cause(error))
    } else {
        root_cause(error)
    };
    WebError::Request {
        url: url.to_string(),
        detail,
    }
}

fn root_cause(error: &dyn std::error::Error) -> String {
    let mut cause = error;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}

/// Elements of the tree under `node` (document order) for which `keep` holds.
pub(crate) fn find_all(node: &Rc<Node>, keep: &dyn Fn(&Rc<Node>) -> bool) -> Vec<Rc<Node>> {
    let mut found = Vec::new();
    let mut stack = vec![node.clone()];
    while let Some(current) = stack.pop() {
        if keep(&current) {
            found.push(current.clone());
        }
        let children = current.children.borrow();
        stack.extend(children.iter().rev().cloned());
    }
    found
}

/// The element's tag name, if it is an element.
pub(crate) fn tag(node: &Node) -> Option<String> {
    match &node.data {
        NodeData::Element { name, .. } => Some(name.local.to_string()),
        _ => None,
    }
}

pub(crate) fn attr(node: &Node, attr_name: &str) -> Option<String> {
    match &node.data {
        NodeData::Element { attrs, .. } => attrs
            .borrow()
            .iter()
            .find(|a| &*a.name.local == attr_name)
            .map(|a| a.value.to_string()),
        _ => None,
    }
}

pub(crate) fn has_class(node: &Node, class: &str) -> bool {
    attr(node, "class").is_some_and(|classes| classes.split_whitespace().any(|c| c == class))
}

/// The text content of a node, whitespace collapsed.
pub(crate) fn text(node: &Rc<Node>) -> String {
    let mut out = String::new();
    for leaf in find_all(node, &|n| matches!(n.data, NodeData::Text { .. })) {
        if let NodeData::Text { contents } = &leaf.data {
            out.push_str(&contents.borrow());
            out.push(' ');
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_loopback_and_link_local_addresses_are_not_public() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::7f00:1",
        ] {
            assert!(!is_public_ip(ip.parse().unwrap()), "{ip} counted as public");
        }
        for ip in ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111"] {
            assert!(is_public_ip(ip.parse().unwrap()), "{ip} counted as private");
        }
    }

    #[test]
    fn only_http_urls_with_a_host_parse() {
        assert!(parse_url("https://example.com/a").is_ok());
        for bad in [
            "file:///etc/passwd",
            "ftp://x.org/",
            "example.com",
            "http://",
        ] {
            assert!(
                matches!(parse_url(bad), Err(WebError::InvalidUrl { .. })),
                "{bad}"
            );
        }
    }

    #[tokio::test]
    async fn literal_and_resolved_private_hosts_are_refused() {
        for url in [
            "http://127.0.0.1:8080/",
            "http://10.0.0.5/",
            "http://169.254.169.254/latest/meta-data/",
            "http://[::1]/",
            "http://localhost/",
        ] {
            let parsed = parse_url(url).unwrap();
            assert!(
                matches!(
                    check_public(&parsed).await,
                    Err(WebError::PrivateAddress { .. })
                ),
                "{url} was not refused"
            );
        }
    }

    #[test]
    fn tree_queries_find_classes_attributes_and_text() {
        let tree = htmd::HtmlToMarkdown::new()
            .html_to_tree(r#"<div class="a b"><a href="/x">Hello <b>world</b></a></div>"#)
            .unwrap();
        let divs = find_all(&tree, &|n| has_class(n, "b"));
        assert_eq!(divs.len(), 1);
        let links = find_all(&divs[0], &|n| tag(n).as_deref() == Some("a"));
        assert_eq!(attr(&links[0], "href").as_deref(), Some("/x"));
        assert_eq!(text(&links[0]), "Hello world");
    }
}
