//! A TCP relay that can black-hole the connections open through it, as a load balancer
//! fail-over or a conntrack flush does to long-lived connections: bytes stop flowing both
//! ways and neither end is told. Connections opened afterwards pass. A kube client has no
//! read timeout by default, so a watch through such a connection never delivers again.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The relay; it runs until the test process ends.
pub struct Blackhole {
    addr: SocketAddr,
    /// Raised by each black-holing: a connection opened in an earlier epoch stops.
    epoch: Arc<AtomicU64>,
}

impl Blackhole {
    /// Relay `listen`:(a free port) to `upstream`.
    pub fn start(listen: IpAddr, upstream: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind((listen, 0))?;
        let addr = listener.local_addr()?;
        let epoch = Arc::new(AtomicU64::new(0));
        let relay_epoch = epoch.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let born = relay_epoch.load(Ordering::SeqCst);
                if let Ok(server) = TcpStream::connect(upstream) {
                    pipe(&client, &server, born, &relay_epoch);
                    pipe(&server, &client, born, &relay_epoch);
                }
            }
        });
        Ok(Self { addr, epoch })
    }

    /// The port the relay listens on.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Every connection open now stops forwarding, for good (its sockets stay open).
    pub fn swallow_open_connections(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
    }
}

/// Copy `from` to `to` until either closes or the connection is black-holed; then keep
/// both open and silent.
fn pipe(from: &TcpStream, to: &TcpStream, born: u64, epoch: &Arc<AtomicU64>) {
    let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
        return;
    };
    let epoch = epoch.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if epoch.load(Ordering::SeqCst) != born {
                // Swallow this and everything after it; holding the sockets keeps the
                // peers waiting instead of seeing a reset.
                loop {
                    std::thread::park();
                }
            }
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = to.shutdown(std::net::Shutdown::Write);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn echo() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for mut conn in listener.incoming().flatten() {
                std::thread::spawn(move || {
                    let mut buf = [0u8; 64];
                    while let Ok(n) = conn.read(&mut buf) {
                        if n == 0 || conn.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        addr
    }

    fn round_trip(conn: &mut TcpStream) -> bool {
        conn.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let mut buf = [0u8; 4];
        conn.write_all(b"ping").is_ok() && conn.read_exact(&mut buf).is_ok() && &buf == b"ping"
    }

    #[test]
    fn open_connections_go_silent_and_new_ones_pass() {
        let relay = Blackhole::start("127.0.0.1".parse().unwrap(), echo()).unwrap();
        let mut old = TcpStream::connect(("127.0.0.1", relay.port())).unwrap();
        assert!(round_trip(&mut old));
        relay.swallow_open_connections();
        assert!(!round_trip(&mut old), "a black-holed connection answered");
        let mut new = TcpStream::connect(("127.0.0.1", relay.port())).unwrap();
        assert!(round_trip(&mut new));
    }
}
