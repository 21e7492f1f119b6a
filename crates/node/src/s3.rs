//! A minimal S3 client for backups (`shoal tool backup s3://BUCKET/PREFIX`,
//! `shoal tool load s3://...`): PutObject, the multipart upload
//! (CreateMultipartUpload, UploadPart, CompleteMultipartUpload,
//! AbortMultipartUpload), GetObject by byte ranges and ListObjectsV2,
//! path-style, signed with AWS Signature Version 4, over plain HTTP to an
//! S3-compatible endpoint (`AWS_ENDPOINT_URL`, e.g. MinIO or moto; no TLS).
//!
//! Credentials and place come from the node's environment, as the AWS
//! tools take them: `AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_REGION` (default `us-east-1`), and the part
//! size `SHOAL_S3_MULTIPART_CHUNKSIZE` (as shoal.yaml's sizes: bytes, KiB, MiB, GiB;
//! default 64 MiB, at least S3's 5 MiB; the AWS CLI's `multipart_chunksize`).
//!
//! Invariants:
//! - Every call is bounded (connect, read and write timeouts) and blocking:
//!   callers run it on the blocking pool.
//! - A file larger than one part is uploaded in parts, so no object is
//!   limited by a single PUT's 5 GiB; a failed multipart upload is aborted
//!   (its parts are not left stored). Downloads are ranged GETs of one part
//!   each. Either way at most one part is held in memory, whatever the file.
//! - Nothing here panics on a malformed answer; it is an error.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ring_crypto::{digest, hmac};

const TIMEOUT: Duration = Duration::from_secs(60);
/// The default part of multipart uploads and ranged downloads.
const PART_BYTES: u64 = 64 << 20;
/// S3's smallest part (all but the last).
const MIN_PART_BYTES: u64 = 5 << 20;

/// The part size: `SHOAL_S3_MULTIPART_CHUNKSIZE`, or 64 MiB.
pub fn part_bytes() -> Result<u64, String> {
    let Some(text) = std::env::var("SHOAL_S3_MULTIPART_CHUNKSIZE").ok().filter(|v| !v.is_empty()) else {
        return Ok(PART_BYTES);
    };
    // The sizes shoal.yaml takes (`16MiB`, `512KiB`, bytes).
    match crate::config::parse_size(&text) {
        None => Err(format!("SHOAL_S3_MULTIPART_CHUNKSIZE: not a size (e.g. 64MiB): {text}")),
        Some(b) if b < MIN_PART_BYTES => {
            Err(format!("SHOAL_S3_MULTIPART_CHUNKSIZE must be at least 5MiB (S3's smallest part): {text}"))
        }
        Some(b) => Ok(b),
    }
}

/// An HTTP answer: status, header lines, body.
struct Answer {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<String> {
        header_in(&self.head, name)
    }

    fn text(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.body)
    }
}

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
        let a = self.call("PUT", &object_path(bucket, key), &[], &[], body)?;
        if a.status != 200 {
            return Err(format!("PUT s3://{bucket}/{key}: HTTP {}: {}", a.status, a.text()));
        }
        Ok(())
    }

    /// Uploads the file at `path` as `key`: one PUT when it fits in a part
    /// of `part` bytes, else a multipart upload (aborted if any step fails).
    /// Returns the bytes uploaded.
    pub fn put_file(&self, bucket: &str, key: &str, path: &std::path::Path, part: u64) -> Result<u64, String> {
        let failed = |e: std::io::Error| format!("{}: {e}", path.display());
        let mut file = std::fs::File::open(path).map_err(failed)?;
        let size = file.metadata().map_err(failed)?.len();
        if size <= part {
            let mut body = Vec::with_capacity(size as usize);
            file.read_to_end(&mut body).map_err(failed)?;
            self.put(bucket, key, &body)?;
            return Ok(body.len() as u64);
        }
        let object = object_path(bucket, key);
        let created = self.call("POST", &object, &[("uploads".into(), String::new())], &[], &[])?;
        let upload = elements(&created.text(), "UploadId").into_iter().next().map(|u| unescape(&u));
        let Some(upload) = upload.filter(|_| created.status == 200) else {
            return Err(format!(
                "CreateMultipartUpload s3://{bucket}/{key}: HTTP {}: {}",
                created.status,
                created.text()
            ));
        };
        let uploaded = (|| -> Result<u64, String> {
            let mut parts = Vec::new();
            let mut buf = Vec::with_capacity(part as usize);
            let mut sent = 0u64;
            while sent < size {
                buf.clear();
                (&mut file).take(part).read_to_end(&mut buf).map_err(failed)?;
                if buf.is_empty() {
                    return Err(format!("{}: shorter than its {size} bytes", path.display()));
                }
                let number = parts.len() + 1;
                let query = [("partNumber".to_string(), number.to_string()), ("uploadId".to_string(), upload.clone())];
                let a = self.call("PUT", &object, &query, &[], &buf)?;
                let etag = a.header("etag").filter(|_| a.status == 200).ok_or_else(|| {
                    format!("UploadPart {number} of s3://{bucket}/{key}: HTTP {}: {}", a.status, a.text())
                })?;
                parts.push(etag);
                sent += buf.len() as u64;
            }
            let mut xml = String::from("<CompleteMultipartUpload>");
            for (i, etag) in parts.iter().enumerate() {
                xml.push_str(&format!("<Part><PartNumber>{}</PartNumber><ETag>{}</ETag></Part>", i + 1, escape(etag)));
            }
            xml.push_str("</CompleteMultipartUpload>");
            let done = self.call("POST", &object, &[("uploadId".into(), upload.clone())], &[], xml.as_bytes())?;
            // S3 may answer 200 with an error document once the parts are being put together.
            if done.status != 200 || done.text().contains("<Error>") {
                return Err(format!(
                    "CompleteMultipartUpload s3://{bucket}/{key}: HTTP {}: {}",
                    done.status,
                    done.text()
                ));
            }
            Ok(sent)
        })();
        if uploaded.is_err() {
            let _ = self.call("DELETE", &object, &[("uploadId".into(), upload.clone())], &[], &[]);
        }
        uploaded
    }

    /// Downloads `key` into the file at `path` by ranged GETs of `part`
    /// bytes each. Returns the bytes written.
    pub fn get_to_file(&self, bucket: &str, key: &str, path: &std::path::Path, part: u64) -> Result<u64, String> {
        let failed = |e: std::io::Error| format!("{}: {e}", path.display());
        let mut file = std::fs::File::create(path).map_err(failed)?;
        let object = object_path(bucket, key);
        let mut written = 0u64;
        loop {
            let range = [("Range", format!("bytes={written}-{}", written + part - 1))];
            let a = self.call("GET", &object, &[], &range, &[])?;
            match a.status {
                // The whole object: the store ignored the range (it may, for a small one).
                200 if written == 0 => {
                    file.write_all(&a.body).map_err(failed)?;
                    return Ok(a.body.len() as u64);
                }
                206 => {}
                // An empty object has no byte 0.
                416 if written == 0 => return Ok(0),
                status => {
                    return Err(format!("GET s3://{bucket}/{key} at byte {written}: HTTP {status}: {}", a.text()))
                }
            }
            let total = a.header("content-range").and_then(|r| r.rsplit('/').next()?.trim().parse::<u64>().ok());
            let Some(total) = total.filter(|_| !a.body.is_empty()) else {
                return Err(format!("GET s3://{bucket}/{key}: a partial answer without its Content-Range"));
            };
            file.write_all(&a.body).map_err(failed)?;
            written += a.body.len() as u64;
            if written >= total {
                file.sync_all().map_err(failed)?;
                return Ok(written);
            }
        }
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
            let a = self.call("GET", &format!("/{bucket}"), &query, &[], &[])?;
            let text = a.text();
            if a.status != 200 {
                return Err(format!("LIST s3://{bucket}/{prefix}: HTTP {}: {text}", a.status));
            }
            keys.extend(elements(&text, "Key").into_iter().map(|k| unescape(&k)));
            token = elements(&text, "NextContinuationToken").into_iter().next().map(|t| unescape(&t));
            if elements(&text, "IsTruncated").first().map(String::as_str) != Some("true") || token.is_none() {
                return Ok(keys);
            }
        }
    }

    /// One signed request (`extra`: headers sent unsigned, as `Range`); its answer.
    fn call(
        &self,
        method: &str,
        path: &str,
        query: &[(String, String)],
        extra: &[(&str, String)],
        body: &[u8],
    ) -> Result<Answer, String> {
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
        // On the request line a parameter without a value goes bare (`?uploads`); signed, it is `uploads=`.
        let target_query =
            sorted.iter().map(|(k, v)| if v.is_empty() { k.clone() } else { format!("{k}={v}") }).collect::<Vec<_>>();
        let target =
            if query_string.is_empty() { path.to_string() } else { format!("{path}?{}", target_query.join("&")) };
        let extra: String = extra.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
        let head = format!(
            "{method} {target} HTTP/1.1\r\nHost: {}\r\nx-amz-date: {stamp}\r\nx-amz-content-sha256: {payload_hash}\r\n\
             Authorization: AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders=host;x-amz-content-sha256;x-amz-date, \
             Signature={signature}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n",
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
        let (status, head, body) =
            parse_response(&raw).ok_or_else(|| format!("S3 endpoint {}: malformed HTTP answer", self.host))?;
        Ok(Answer { status, head, body })
    }
}

/// `/bucket/key`, the key URI-encoded.
fn object_path(bucket: &str, key: &str) -> String {
    format!("/{bucket}/{}", encode(key, false))
}

/// The value of header `name` among an answer's header lines (after its status line).
fn header_in(head: &str, name: &str) -> Option<String> {
    head.lines().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_string())
    })
}

/// A whole HTTP/1.1 answer's status, header lines and body (Content-Length, chunked, or to the end).
fn parse_response(raw: &[u8]) -> Option<(u16, String, Vec<u8>)> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(raw.get(..end)?).ok()?;
    let body = raw.get(end + 4..)?;
    let status: u16 = head.lines().next()?.split(' ').nth(1)?.parse().ok()?;
    let header = |name: &str| header_in(head, name);
    if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        let mut out = Vec::new();
        let mut rest = body;
        loop {
            let line_end = rest.windows(2).position(|w| w == b"\r\n")?;
            let size_text = std::str::from_utf8(rest.get(..line_end)?).ok()?;
            let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
            rest = rest.get(line_end + 2..)?;
            if size == 0 {
                return Some((status, head.to_string(), out));
            }
            out.extend_from_slice(rest.get(..size)?);
            rest = rest.get(size + 2..)?;
        }
    }
    match header("content-length").and_then(|v| v.parse::<usize>().ok()) {
        Some(n) => Some((status, head.to_string(), body.get(..n)?.to_vec())),
        None => Some((status, head.to_string(), body.to_vec())),
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

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
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
        let (status, head, body) = parse_response(chunked).unwrap();
        assert_eq!((status, body), (200, b"abcde".to_vec()));
        assert_eq!(header_in(&head, "TRANSFER-ENCODING").as_deref(), Some("chunked"));
        let sized = b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\nETag: \"x-2\"\r\n\r\nnoXX";
        let (status, head, body) = parse_response(sized).unwrap();
        assert_eq!((status, body), (404, b"no".to_vec()));
        assert_eq!(header_in(&head, "etag").as_deref(), Some("\"x-2\""));
        assert_eq!(escape("\"a&b\""), "&quot;a&amp;b&quot;");
        assert_eq!(unescape(&escape("<\"x\">&")), "<\"x\">&");
        assert_eq!(parse_response(b"garbage"), None);
        let xml = "<R><Key>a&amp;b</Key><Key>c</Key><IsTruncated>false</IsTruncated></R>";
        assert_eq!(elements(xml, "Key").iter().map(|k| unescape(k)).collect::<Vec<_>>(), vec!["a&b", "c"]);
        assert_eq!(encode("a b/c", false), "a%20b/c");
        assert_eq!(encode("a/b", true), "a%2Fb");
    }

    #[test]
    fn part_sizes() {
        let with = |v: &str| {
            std::env::set_var("SHOAL_S3_MULTIPART_CHUNKSIZE", v);
            let got = part_bytes();
            std::env::remove_var("SHOAL_S3_MULTIPART_CHUNKSIZE");
            got
        };
        assert_eq!(with(""), Ok(64 << 20));
        assert_eq!(with("8MiB"), Ok(8 << 20));
        assert_eq!(with("5242880"), Ok(5 << 20));
        assert!(with("4MiB").unwrap_err().contains("at least 5MiB"));
        assert!(with("lots").unwrap_err().contains("not a size"));
    }
}
