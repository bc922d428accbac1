//! Who is on the other end of a loopback TCP connection: the uid that owns the
//! client's socket, read from the kernel's socket tables (`/proc/net/tcp` and
//! `/proc/net/tcp6`, proc(5)). A TCP socket has no `SO_PEERCRED`; on loopback both
//! ends are sockets of this host, and the table names the owner of each.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The uid owning the client's end of the connection whose server end is `server`
/// and whose client end is `client`, or `None` when no socket of this network
/// namespace has that pair (the client is gone, or is not on this host).
///
/// Errors: a socket table cannot be read.
pub fn owner(server: SocketAddr, client: SocketAddr) -> std::io::Result<Option<u32>> {
    let (server, client) = (canonical(server), canonical(client));
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = match std::fs::read_to_string(table) {
            Ok(text) => text,
            // A kernel without IPv6 has no `tcp6`.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        if let Some(uid) = owner_in(&text, server, client) {
            return Ok(Some(uid));
        }
    }
    Ok(None)
}

/// The uid of the socket in the table `text` whose local address is `client` and
/// whose remote address is `server`. Each row is `sl local rem st queues tr retrnsmt
/// uid ...`, addresses as `ADDR:PORT` in hex.
fn owner_in(text: &str, server: SocketAddr, client: SocketAddr) -> Option<u32> {
    text.lines().skip(1).find_map(|row| {
        let fields: Vec<&str> = row.split_whitespace().collect();
        let (local, remote, uid) = (fields.get(1)?, fields.get(2)?, fields.get(7)?);
        (address(local)? == client && address(remote)? == server).then(|| uid.parse().ok())?
    })
}

/// A table's `ADDR:PORT`: the address as the kernel holds it, printed 32 bits at a
/// time in the host's byte order (8 hex digits for IPv4, 32 for IPv6), and the port.
fn address(field: &str) -> Option<SocketAddr> {
    let (addr, port) = field.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        Some(u32::from_str_radix(addr.get(i * 8..i * 8 + 8)?, 16).ok()?.to_ne_bytes())
    };
    let ip = match addr.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        32 => {
            let mut bytes = [0u8; 16];
            for i in 0..4 {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(canonical(SocketAddr::new(ip, port)))
}

/// `addr` with an IPv4-mapped IPv6 address as the IPv4 address it maps.
fn canonical(addr: SocketAddr) -> SocketAddr {
    SocketAddr::new(addr.ip().to_canonical(), addr.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clients_row_names_its_owner() {
        // 127.0.0.1:40000 (the client, uid 1000) to 127.0.0.1:8080 (the server, uid 0),
        // and the server's own row, the other way round.
        let v4 = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
           0: 0100007F:1F90 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 1 1 0\n\
           1: 0100007F:9C40 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 2 1 0\n";
        let (server, client) = ("127.0.0.1:8080".parse().unwrap(), "127.0.0.1:40000".parse().unwrap());
        assert_eq!(owner_in(v4, server, client), Some(1000));
        assert_eq!(owner_in(v4, client, server), Some(0));
        assert_eq!(owner_in(v4, server, "127.0.0.1:40001".parse().unwrap()), None);
        // A dual-stack client's socket: ::ffff:127.0.0.1 in `tcp6`.
        let v6 = "  sl  local_address                         remote_address                        st\n\
           0: 0000000000000000FFFF00000100007F:9C40 0000000000000000FFFF00000100007F:1F90 01 00000000:00000000 00:00000000 00000000  1001 0 3\n";
        assert_eq!(owner_in(v6, server, client), Some(1001));
    }

    #[test]
    fn a_real_connection_is_owned_by_this_process_user() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, from) = listener.accept().unwrap();
        let uid = nix::unistd::geteuid().as_raw();
        assert_eq!(owner(accepted.local_addr().unwrap(), from).unwrap(), Some(uid));
        drop(client);
    }
}
