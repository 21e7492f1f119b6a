//! A minimal S3 client for backups (`shoal tool backup s3://BUCKET/PREFIX`,
//! `shoal tool load s3://...`): PutObject, GetObject and ListObjectsV2,
//! path-style, signed with AWS Signature Version 4, over plain HTTP to an
//! S3-compatible endpoint (`AWS_ENDPOINT_URL`, e.g. MinIO or moto; no TLS).
//!
//! Credentials and place come from the node's environment, as the AWS
//! tools take them: `AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_REGION` (default `us-east-1`).
//!
//! Invariants:
//! - Every call is bounded (connect, read and write timeouts) and blocking:
//!   callers run it on the blocking pool.
//! - Objects are whole-file PUTs (no multipart upload: at most 5 GiB each).
//! - Nothing here panics on a malformed answer; it is an error.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ring_crypto::{digest, hmac};

const TIMEOUT: Duration = Duration::from_secs(60);

/// Where and as whom to reach the store.
#[derive(Clone, Debug)]
pub struct S3 {
    /// `host:port` of the endpoint.
    pub host: String,
    pub access_key: String,
    pub secret_key: String,
    pub region: String,
}

/// `s3://bucket/prefix` as (bucket, prefix without slashes at its ends).
pub fn parse_url(url: &str) -> Option<(String, String)> {
    let rest = url.strip_prefix("s3://")?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return None;
    }
    Some((bucket.to_string(), prefix.trim_matches('/').to_string()))
}

impl S3 {
    /// The store the environment names.
    pub fn from_env() -> Result<S3, String> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let endpoint = var("AWS_ENDPOINT_URL").ok_or("AWS_ENDPOINT_URL is not set (an http:// S3 endpoint)")?;
        let host = endpoint
            .strip_prefix("http://")
            .ok_or_else(|| format!("AWS_ENDPOINT_URL must be http:// (TLS is not supported yet): {endpoint}"))?
            .trim_end_matches('/')
            .to_string();
        Ok(S3 {
            host,
            access_key: var("AWS_ACCESS_KEY_ID").ok_or("AWS_ACCESS_KEY_ID is not set")?,
            secret_key: var("AWS_SECRET_ACCESS_KEY").ok_or("AWS_SECRET_ACCESS_KEY is not set")?,
            region: var("AWS_REGION").or_else(|| var("AWS_DEFAULT_REGION")).unwrap_or_else(|| "us-east-1".into()),
        })
    }

    pub fn put(&self, bucket: &str, key: &str, body: &[u8]) -> Result<(), String> {
        let (status, answer) = self.call("PUT", &format!("/{bucket}/{}", encode(key, false)), &[], body)?;
        if status != 200 {
            return Err(format!("PUT s3://{bucket}/{key}: HTTP {status}: {}", String::from_utf8_lossy(&answer)));
        }
        Ok(())
    }

    pub fn get(&self, bucket: &str, key: &str) -> Result<Vec<u8>, String> {
        let (status, answer) = self.call("GET", &format!("/{bucket}/{}", encode(key, false)), &[], &[])?;
        if status != 200 {
            return Err(format!("GET s3://{bucket}/{key}: HTTP {status}: {}", String::from_utf8_lossy(&answer)));
        }
        Ok(answer)
    }

    /// Every key under `prefix` (ListObjectsV2, page after page).
    pub fn list(&self, bucket: &str, prefix: &str) -> Result<Vec<String>, String> {
        let mut keys = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut query =
                vec![("list-type".to_string(), "2".to_string()), ("prefix".to_string(), prefix.to_string())];
            if let Some(t) = &token {
                query.push(("continuation-token".to_string(), t.clone()));
            }
            let (status, answer) = self.call("GET", &format!("/{bucket}"), &query, &[])?;
            let text = String::from_utf8_lossy(&answer);
            if status != 200 {
                return Err(format!("LIST s3://{bucket}/{prefix}: HTTP {status}: {text}"));
            }
            keys.extend(elements(&text, "Key").into_iter().map(|k| unescape(&k)));
            token = elements(&text, "NextContinuationToken").into_iter().next().map(|t| unescape(&t));
            if elements(&text, "IsTruncated").first().map(String::as_str) != Some("true") || token.is_none() {
                return Ok(keys);
            }
        }
    }

    /// One signed request; the answer's status and body.
    fn call(
        &self,
        method: &str,
        path: &str,
        query: &[(String, String)],
        body: &[u8],
    ) -> Result<(u16, Vec<u8>), String> {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
        let (days, secs) = (now.div_euclid(86_400), now.rem_euclid(86_400));
        let (y, mo, d) = types::literal::civil_from_days(days);
        let date = format!("{y:04}{mo:02}{d:02}");
        let stamp = format!("{date}T{:02}{:02}{:02}Z", secs / 3600, secs / 60 % 60, secs % 60);
        let payload_hash = hex(digest::digest(&digest::SHA256, body).as_ref());
        let mut sorted: Vec<(String, String)> = query.iter().map(|(k, v)| (encode(k, true), encode(v, true))).collect();
        sorted.sort();
        let query_string = sorted.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&");
        let canonical = format!(
            "{method}\n{path}\n{query_string}\nhost:{}\nx-amz-content-sha256:{payload_hash}\nx-amz-date:{stamp}\n\n\
             host;x-amz-content-sha256;x-amz-date\n{payload_hash}",
            self.host
        );
        let scope = format!("{date}/{}/s3/aws4_request", self.region);
        let to_sign = format!(
            "AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{}",
            hex(digest::digest(&digest::SHA256, canonical.as_bytes()).as_ref())
        );
        let sign =
            |key: &[u8], data: &[u8]| hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data).as_ref().to_vec();
        let mut key = sign(format!("AWS4{}", self.secret_key).as_bytes(), date.as_bytes());
        for part in [self.region.as_str(), "s3", "aws4_request"] {
            key = sign(&key, part.as_bytes());
        }
        let signature = hex(&sign(&key, to_sign.as_bytes()));
        let target = if query_string.is_empty() { path.to_string() } else { format!("{path}?{query_string}") };
        let head = format!(
            "{method} {target} HTTP/1.1\r\nHost: {}\r\nx-amz-date: {stamp}\r\nx-amz-content-sha256: {payload_hash}\r\n\
             Authorization: AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders=host;x-amz-content-sha256;x-amz-date, \
             Signature={signature}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.host,
            self.access_key,
            body.len()
        );
        let broken = |e: std::io::Error| format!("S3 endpoint {}: {e}", self.host);
        let addr = self
            .host
            .to_socket_addrs()
            .map_err(broken)?
            .next()
            .ok_or_else(|| format!("S3 endpoint {}: no address", self.host))?;
        let mut stream = TcpStream::connect_timeout(&addr, TIMEOUT).map_err(broken)?;
        stream.set_read_timeout(Some(TIMEOUT)).map_err(broken)?;
        stream.set_write_timeout(Some(TIMEOUT)).map_err(broken)?;
        stream.write_all(head.as_bytes()).map_err(broken)?;
        stream.write_all(body).map_err(broken)?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).map_err(broken)?;
        parse_response(&raw).ok_or_else(|| format!("S3 endpoint {}: malformed HTTP answer", self.host))
    }
}

/// Status and body of a whole HTTP/1.1 answer (Content-Length, chunked, or to the end).
fn parse_response(raw: &[u8]) -> Option<(u16, Vec<u8>)> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(raw.get(..end)?).ok()?;
    let body = raw.get(end + 4..)?;
    let status: u16 = head.lines().next()?.split(' ').nth(1)?.parse().ok()?;
    let header = |name: &str| {
        head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    };
    if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        let mut out = Vec::new();
        let mut rest = body;
        loop {
            let line_end = rest.windows(2).position(|w| w == b"\r\n")?;
            let size_text = std::str::from_utf8(rest.get(..line_end)?).ok()?;
            let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
            rest = rest.get(line_end + 2..)?;
            if size == 0 {
                return Some((status, out));
            }
            out.extend_from_slice(rest.get(..size)?);
            rest = rest.get(size + 2..)?;
        }
    }
    match header("content-length").and_then(|v| v.parse::<usize>().ok()) {
        Some(n) => Some((status, body.get(..n)?.to_vec())),
        None => Some((status, body.to_vec())),
    }
}

/// SigV4's URI encoding: unreserved characters as they are, `/` too in a
/// path (`slash` false), everything else `%XX`.
fn encode(s: &str, slash: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') || (b == b'/' && !slash) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The texts of every `<name>...</name>` element (flat XML, as S3 lists).
fn elements(xml: &str, name: &str) -> Vec<String> {
    let (open, close) = (format!("<{name}>"), format!("</{name}>"));
    let mut out = Vec::new();
    let mut rest = xml;
    while let Some(start) = rest.find(&open) {
        rest = rest.get(start + open.len()..).unwrap_or_default();
        let Some(end) = rest.find(&close) else { break };
        out.push(rest.get(..end).unwrap_or_default().to_string());
        rest = rest.get(end + close.len()..).unwrap_or_default();
    }
    out
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&apos;", "'").replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_answers() {
        assert_eq!(parse_url("s3://b/p/q/"), Some(("b".into(), "p/q".into())));
        assert_eq!(parse_url("s3://b"), Some(("b".into(), String::new())));
        assert_eq!(parse_url("s3:///x"), None);
        assert_eq!(parse_url("/tmp/x"), None);
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        assert_eq!(parse_response(chunked), Some((200, b"abcde".to_vec())));
        let sized = b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\nnoXX";
        assert_eq!(parse_response(sized), Some((404, b"no".to_vec())));
        assert_eq!(parse_response(b"garbage"), None);
        let xml = "<R><Key>a&amp;b</Key><Key>c</Key><IsTruncated>false</IsTruncated></R>";
        assert_eq!(elements(xml, "Key").iter().map(|k| unescape(k)).collect::<Vec<_>>(), vec!["a&b", "c"]);
        assert_eq!(encode("a b/c", false), "a%20b/c");
        assert_eq!(encode("a/b", true), "a%2Fb");
    }
}
