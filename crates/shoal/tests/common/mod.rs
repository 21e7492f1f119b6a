//! Shared by the integration tests: a real `shoal server` child process on
//! free loopback ports (CQL, internode, admin API) with its own data directory.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A port that was free a moment ago.
#[allow(dead_code)]
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("free port")
}

/// A `shoal server` child process, killed (by its PID) when dropped. Each
/// test binary compiles this module on its own and uses some of the fields.
#[allow(dead_code)]
pub struct Node {
    pub child: Child,
    pub port: u16,
    pub addr: SocketAddr,
    /// The admin API's port (`shoal tool -p`).
    pub admin_port: u16,
    pub dir: tempfile::TempDir,
}

impl Node {
    /// Starts a node and waits (at most 30 s) until it accepts CQL and admin connections.
    pub fn start() -> Node {
        let port = free_port();
        let admin_port = free_port();
        let dir = tempfile::tempdir().expect("temp dir");
        // Its own internode port, so that several nodes can run side by side on 127.0.0.1.
        let config = dir.path().join("shoal.yaml");
        std::fs::write(&config, format!("storage_port: {}\n", free_port())).expect("write config");
        let data = dir.path().join("data");
        let child = Command::new(env!("CARGO_BIN_EXE_shoal"))
            .args(["server", "--listen-address", "127.0.0.1", "--native-port", &port.to_string()])
            .args(["--admin-port", &admin_port.to_string()])
            .arg("--config")
            .arg(&config)
            .arg("--data-dir")
            .arg(&data)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start shoal");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        let admin: SocketAddr = format!("127.0.0.1:{admin_port}").parse().expect("addr");
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(addr).is_err() || TcpStream::connect(admin).is_err() {
            assert!(Instant::now() < deadline, "shoal did not start listening on {addr} and {admin}");
            std::thread::sleep(Duration::from_millis(50));
        }
        Node { child, port, addr, admin_port, dir }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
