//! Socket options on real loopback TCP connections.

use super::*;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

fn pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    (client, server)
}

/// Writes to a server that does not read until the kernel pushes back.
fn fill_send_queue(client: &TcpStream) -> usize {
    client.set_nonblocking(true).unwrap();
    let chunk = vec![0x5au8; 1 << 20];
    let mut written = 0;
    // Against a peer that never reads the queues fill within megabytes; the
    // deadline only keeps a surprise from hanging the test.
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        match (&*client).write(&chunk) {
            Ok(n) => written += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) => panic!("write: {e}"),
        }
    }
    written
}

#[test]
fn tcp_info_of_an_established_connection() {
    let (mut client, mut server) = pair();
    let mut buf = [0u8; 4096];
    for _ in 0..20 {
        client.write_all(&buf).unwrap();
        server.read_exact(&mut buf).unwrap();
        server.write_all(&buf[..1]).unwrap();
        client.read_exact(&mut buf[..1]).unwrap();
    }
    let info = tcp_info(&client).unwrap();
    assert_eq!(info.state, 1, "TCP_ESTABLISHED");
    assert!(info.snd_mss > 0);
    assert!(info.rtt_us > 0, "{info:?}");
    assert!(info.snd_cwnd > 0);
    assert_eq!(info.flow, 0);
    assert!(info.bytes_acked.unwrap() >= 20 * 4096);
    assert!(info.delivered.is_some());
    assert!(info.bytes_retrans.is_some());
    let server_info = tcp_info(&server).unwrap();
    assert!(server_info.bytes_received.unwrap() >= 20 * 4096);
}

#[test]
fn tcp_info_on_a_non_tcp_socket_fails() {
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    assert!(tcp_info(&udp).is_err());
}

#[test]
fn congestion_control_round_trip() {
    let (client, _server) = pair();
    // reno is built into every kernel and allowed to unprivileged users.
    set_congestion(&client, "reno").unwrap();
    assert_eq!(congestion(&client).unwrap(), "reno");
    assert!(set_congestion(&client, "no_such_cc").is_err());
    assert!(set_congestion(&client, "a_name_far_too_long_for_the_kernel").is_err());
    assert_eq!(congestion(&client).unwrap(), "reno");
    assert!(available_congestion_controls().contains("reno"));
}

#[test]
fn max_pacing_rate_round_trip() {
    let (client, _server) = pair();
    assert_eq!(max_pacing_rate(&client).unwrap(), u64::MAX);
    set_max_pacing_rate(&client, 12_500_000).unwrap();
    assert_eq!(max_pacing_rate(&client).unwrap(), 12_500_000);
    // Beyond 32 bits, where a u32 option would truncate.
    set_max_pacing_rate(&client, 50_000_000_000).unwrap();
    assert_eq!(max_pacing_rate(&client).unwrap(), 50_000_000_000);
    let info = tcp_info(&client).unwrap();
    assert_eq!(info.max_pacing_rate_bps, Some(400_000_000_000));
    set_max_pacing_rate(&client, u64::MAX).unwrap();
    assert_eq!(max_pacing_rate(&client).unwrap(), u64::MAX);
}

#[test]
fn pacing_rate_answers_of_both_sizes() {
    let mut buf = [0u8; 8];
    buf[..4].copy_from_slice(&u32::MAX.to_ne_bytes());
    assert_eq!(decode_pacing_rate(&buf, 4).unwrap(), u64::MAX);
    buf[..4].copy_from_slice(&1000u32.to_ne_bytes());
    assert_eq!(decode_pacing_rate(&buf, 4).unwrap(), 1000);
    let buf = 5_000_000_000u64.to_ne_bytes();
    assert_eq!(decode_pacing_rate(&buf, 8).unwrap(), 5_000_000_000);
    assert!(decode_pacing_rate(&buf, 2).is_err());
}

#[test]
fn cork_round_trip() {
    let (client, _server) = pair();
    assert!(!cork(&client).unwrap());
    set_cork(&client, true).unwrap();
    assert!(cork(&client).unwrap());
    set_cork(&client, false).unwrap();
    assert!(!cork(&client).unwrap());
}

#[test]
fn maxseg_set_before_connect_caps_the_mss() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let socket = socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )
    .unwrap();
    set_maxseg(&socket, 1000).unwrap();
    socket.connect(&addr.into()).unwrap();
    let _server = listener.accept().unwrap();
    let mss = maxseg(&socket).unwrap();
    assert!(mss > 0 && mss <= 1000, "mss {mss}");
}

#[test]
fn outq_counts_unacknowledged_bytes() {
    let (client, server) = pair();
    assert_eq!(outq(&client).unwrap(), 0);
    let written = fill_send_queue(&client);
    assert!(written > 0);
    assert!(outq(&client).unwrap() > 0);
    drop(server);
}

#[test]
fn inq_counts_unread_bytes() {
    let (mut client, server) = pair();
    assert_eq!(inq(&server).unwrap(), 0);
    client.write_all(&[7u8; 1000]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut queued = 0;
    while queued < 1000 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
        queued = inq(&server).unwrap();
    }
    assert_eq!(queued, 1000);
}
