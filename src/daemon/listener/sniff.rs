//! Which protocol a new connection speaks, HTTP/1.1 or HTTP/2 with prior knowledge (h2c), told
//! by peeking at its first bytes and never by polling.

use std::io;
use std::os::fd::AsFd;
use std::time::Duration;

use tokio::io::Interest;
use tokio::net::TcpStream;

/// What a connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Protocol {
    Http1,
    Http2,
}

/// Why a connection was closed before its protocol was known.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SniffError {
    #[error("the client sent nothing")]
    Silent,
    #[error("the client stopped inside what could be HTTP/2's preface")]
    Stalled,
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// HTTP/2's connection preface, the first bytes an h2c client sends.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Tells the protocol from the first bytes without consuming them: waits up to `first_bytes`
/// for the client to say anything, then up to `rest` for it to finish the preface when what it
/// sent so far could be one (as short as the `P` of a `POST`; the `O` that follows settles it).
///
/// hyper's automatic detection reads the bytes and replays them in front of the stream, which
/// makes the HTTP/1 read buffer grow past its first 8 KiB on every connection: 8 KiB more per
/// request in flight. Peeking leaves the bytes where hyper reads them anyway.
pub(crate) async fn protocol(
    stream: &TcpStream,
    first_bytes: Duration,
    rest: Duration,
) -> Result<Protocol, SniffError> {
    let mut first = [0u8; H2_PREFACE.len()];
    let read = tokio::time::timeout(first_bytes, stream.peek(&mut first))
        .await
        .map_err(|_| SniffError::Silent)??;
    if let Some(protocol) = verdict(&first[..read]) {
        return Ok(protocol);
    }
    tokio::time::timeout(rest, rest_of_preface(stream, read))
        .await
        .map_err(|_| SniffError::Stalled)?
}

/// The protocol `bytes` settle, or `None` while they are a proper prefix of the preface.
fn verdict(bytes: &[u8]) -> Option<Protocol> {
    if bytes.is_empty() || bytes != &H2_PREFACE[..bytes.len()] {
        // A closed connection is left to hyper too, which ends it quietly.
        Some(Protocol::Http1)
    } else if bytes.len() == H2_PREFACE.len() {
        Some(Protocol::Http2)
    } else {
        None
    }
}

/// Waits for bytes past the `seen` ones until they settle the protocol.
///
/// Peeking again at once would return the same bytes, over and over: tokio keeps a socket
/// readable until a read finds it empty, and unread bytes never make it so. So the bytes are
/// peeked through a second handle on the socket inside `try_io`, and "nothing new" is reported
/// as `WouldBlock`: tokio then forgets the readiness and waits for the kernel's next event, which
/// comes with the next bytes or the end of the stream.
async fn rest_of_preface(stream: &TcpStream, mut seen: usize) -> Result<Protocol, SniffError> {
    let handle = std::net::TcpStream::from(stream.as_fd().try_clone_to_owned()?);
    let mut bytes = [0u8; H2_PREFACE.len()];
    loop {
        let ready = stream.ready(Interest::READABLE).await?;
        let peeked = stream.try_io(Interest::READABLE, || {
            let read = handle.peek(&mut bytes)?;
            if read > seen || ready.is_read_closed() {
                Ok(read)
            } else {
                Err(io::ErrorKind::WouldBlock.into())
            }
        });
        match peeked {
            // Closed with nothing new: hyper reads what there is and ends the connection.
            Ok(read) if read <= seen => return Ok(Protocol::Http1),
            Ok(read) => {
                seen = read;
                if let Some(protocol) = verdict(&bytes[..read]) {
                    return Ok(protocol);
                }
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
            Err(error) => return Err(error.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_bytes_settle_the_protocol_unless_they_could_still_be_the_preface() {
        assert_eq!(verdict(b"GET / HTTP/1.1\r\n"), Some(Protocol::Http1));
        assert_eq!(verdict(b"PO"), Some(Protocol::Http1));
        assert_eq!(verdict(b""), Some(Protocol::Http1));
        assert_eq!(verdict(H2_PREFACE), Some(Protocol::Http2));
        assert_eq!(verdict(b"P"), None);
        assert_eq!(verdict(b"PRI * HTTP/2.0\r\n"), None);
    }
}
