//! The live dashboard (OpsCenter's role): a page every node serves on its
//! admin port (`GET /dashboard`), its static assets (`GET /dashboard/<asset>`,
//! embedded in the binary), and the proxy through which the page reads the
//! other nodes' admin API (`GET /dashboard/peer/<address>/v1/<endpoint>`).
//!
//! The page polls this node's `/v1/status` every 2 s for the ring and, for
//! every node of the ring, that node's compactionstats, hints, netstats,
//! repair_admin and proxyhistograms, through this node: the browser needs to
//! reach one node only (a port-forward or an API-server proxy to one pod is
//! enough), and no answer needs CORS headers.
//!
//! Invariants:
//! - The proxy is not an open relay: it answers only GETs of the read-only
//!   endpoints in `PEER_ENDPOINTS`, only for an address that is a member of
//!   this node's ring, and only on the cluster's admin port (every node of a
//!   cluster serves its admin API on the same port, as the launcher and the
//!   deploy manifests start them).
//! - A peer that is down or slow costs at most `PEER_TIMEOUT` and answers
//!   502 with the reason; its answer is passed on as it came (status and
//!   JSON body), bounded by `MAX_PEER_ANSWER` bytes.
//! - Assets are `include_bytes!` of `crates/node/dashboard/`: no file is read
//!   at run time and nothing is fetched from outside the cluster.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Read-only admin endpoints the page may read from other nodes.
pub const PEER_ENDPOINTS: &[&str] =
    &["status", "info", "compactionstats", "hints", "netstats", "repair_admin", "proxyhistograms"];

/// A peer's whole answer (connect, send, read) must come within this time.
pub const PEER_TIMEOUT: Duration = Duration::from_secs(3);

/// Largest peer answer passed on.
pub const MAX_PEER_ANSWER: usize = 4 << 20;

/// The page itself.
pub const INDEX_HTML: &[u8] = include_bytes!("../dashboard/index.html");

/// `GET /dashboard/<name>`: the asset's content type and bytes.
pub fn asset(name: &str) -> Option<(&'static str, &'static [u8])> {
    Some(match name {
        "dashboard.js" => ("text/javascript; charset=utf-8", include_bytes!("../dashboard/dashboard.js")),
        "lines.js" => ("text/javascript; charset=utf-8", include_bytes!("../dashboard/lines.js")),
        "dashboard.css" => ("text/css; charset=utf-8", include_bytes!("../dashboard/dashboard.css")),
        _ => return None,
    })
}

/// A request for the proxy, parsed from the path after `/dashboard/peer/`:
/// `<address>/v1/<endpoint>`.
#[derive(Debug, PartialEq, Eq)]
pub struct PeerRequest {
    pub address: IpAddr,
    pub endpoint: &'static str,
}

/// Parses `<address>/v1/<endpoint>`; the error says what is wrong.
pub fn parse_peer_path(rest: &str) -> Result<PeerRequest, String> {
    let (address, endpoint) =
        rest.split_once('/').ok_or_else(|| "expected /dashboard/peer/<address>/v1/<endpoint>".to_string())?;
    let address: IpAddr = address.parse().map_err(|_| format!("'{address}' is not an IP address"))?;
    let name =
        endpoint.strip_prefix("v1/").ok_or_else(|| "expected /dashboard/peer/<address>/v1/<endpoint>".to_string())?;
    let endpoint = PEER_ENDPOINTS
        .iter()
        .find(|e| **e == name)
        .ok_or_else(|| format!("the dashboard reads only /v1/{{{}}} from peers", PEER_ENDPOINTS.join(",")))?;
    Ok(PeerRequest { address, endpoint })
}

/// A peer's answer: its HTTP status and body.
#[derive(Debug)]
pub struct PeerAnswer {
    pub status: u16,
    pub body: Vec<u8>,
}

/// `GET /v1/<endpoint>` on the peer's admin API, within `PEER_TIMEOUT`.
pub async fn get(peer: SocketAddr, endpoint: &str) -> Result<PeerAnswer, String> {
    match tokio::time::timeout(PEER_TIMEOUT, fetch(peer, endpoint)).await {
        Ok(r) => r,
        Err(_) => Err(format!("no answer from {peer} within {} s", PEER_TIMEOUT.as_secs())),
    }
}

async fn fetch(peer: SocketAddr, endpoint: &str) -> Result<PeerAnswer, String> {
    let mut stream = TcpStream::connect(peer).await.map_err(|e| format!("cannot connect to {peer}: {e}"))?;
    let head = format!("GET /v1/{endpoint} HTTP/1.1\r\nHost: {peer}\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).await.map_err(|e| format!("{peer}: {e}"))?;
    let mut answer = Vec::new();
    let limit = (MAX_PEER_ANSWER + 64 * 1024) as u64;
    (&mut stream).take(limit).read_to_end(&mut answer).await.map_err(|e| format!("{peer}: {e}"))?;
    parse_answer(&answer).map_err(|e| format!("{peer}: {e}"))
}

/// Splits an HTTP/1.1 answer (the admin API's: `Connection: close`, a body
/// that runs to the end) into its status and body.
pub fn parse_answer(answer: &[u8]) -> Result<PeerAnswer, String> {
    let end = answer.windows(4).position(|w| w == b"\r\n\r\n").ok_or("incomplete answer")?;
    let head = std::str::from_utf8(answer.get(..end).unwrap_or_default()).map_err(|_| "answer head is not UTF-8")?;
    let status_line = head.split("\r\n").next().unwrap_or_default();
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("malformed status line '{status_line}'"))?;
    let body = answer.get(end + 4..).unwrap_or_default();
    if body.len() > MAX_PEER_ANSWER {
        return Err(format!("answer larger than {MAX_PEER_ANSWER} bytes"));
    }
    Ok(PeerAnswer { status, body: body.to_vec() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assets_are_embedded_and_named() {
        assert!(std::str::from_utf8(INDEX_HTML).unwrap().contains("dashboard/dashboard.js"));
        for name in ["dashboard.js", "lines.js", "dashboard.css"] {
            let (_, bytes) = asset(name).unwrap();
            assert!(!bytes.is_empty(), "{name}");
        }
        assert!(asset("../admin.rs").is_none());
        assert!(asset("").is_none());
    }

    #[test]
    fn peer_paths_are_checked() {
        assert_eq!(
            parse_peer_path("127.0.0.2/v1/hints").unwrap(),
            PeerRequest { address: "127.0.0.2".parse().unwrap(), endpoint: "hints" }
        );
        assert_eq!(parse_peer_path("::1/v1/status").unwrap().endpoint, "status");
        for bad in
            ["127.0.0.2", "127.0.0.2/v1/repair", "127.0.0.2/v1/flush", "example.com/v1/status", "127.0.0.2/x/status"]
        {
            assert!(parse_peer_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn answers_are_split() {
        let a = parse_answer(b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n{}").unwrap();
        assert_eq!((a.status, a.body.as_slice()), (404, &b"{}"[..]));
        assert!(parse_answer(b"HTTP/1.1 200 OK\r\n").is_err());
        assert!(parse_answer(b"garbage\r\n\r\n").is_err());
    }
}
