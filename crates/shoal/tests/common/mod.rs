//! Shared by the integration tests: a real `shoal server` child process on a
//! free loopback port with its own data directory.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `shoal server` child process, killed (by its PID) when dropped. Each
/// test binary compiles this module on its own and uses some of the fields.
#[allow(dead_code)]
pub struct Node {
    pub child: Child,
    pub port: u16,
    pub addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Node {
    /// Starts a node and waits (at most 30 s) until it accepts CQL connections.
    pub fn start() -> Node {
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("free port");
        let dir = tempfile::tempdir().expect("temp dir");
        let child = Command::new(env!("CARGO_BIN_EXE_shoal"))
            .args(["server", "--listen-address", "127.0.0.1", "--native-port", &port.to_string(), "--data-dir"])
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start shoal");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(addr).is_err() {
            assert!(Instant::now() < deadline, "shoal did not start listening on {addr}");
            std::thread::sleep(Duration::from_millis(50));
        }
        Node { child, port, addr, _dir: dir }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
