//! Who is on the other end of a request, as the daemon's listeners mark it: the TCP client
//! (the key its caps and the sign-in throttle count) or the local operator on the socket.
//!
//! The HTTP layer reads these; the listeners in `daemon` set them, so the types live here and
//! the daemon depends on the HTTP layer, never the other way round.

use std::net::IpAddr;

/// One client, as the caps count them: an IPv4 address, or an IPv6 /64 (what one host is
/// usually given, so a client cannot multiply itself by changing the low bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ClientKey(IpAddr);

impl ClientKey {
    pub fn of(ip: IpAddr) -> Self {
        match ip.to_canonical() {
            IpAddr::V6(v6) if !v6.is_loopback() => {
                let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                Self(IpAddr::V6(prefix.into()))
            }
            v4 => Self(v4),
        }
    }

    pub fn is_loopback(self) -> bool {
        self.0.is_loopback()
    }
}

impl std::fmt::Display for ClientKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            IpAddr::V6(v6) if !v6.is_loopback() => write!(f, "{v6}/64"),
            ip => write!(f, "{ip}"),
        }
    }
}

/// The header naming the user a socket request acts as (absent: [`LOCAL_OPERATOR`](crate::lead_agent::access::LOCAL_OPERATOR)).
pub const USER_HEADER: &str = "x-antler-user";

/// Marks a request that arrived over the local socket (set by the daemon on that listener
/// only, so a TCP client cannot claim it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalOperator;
