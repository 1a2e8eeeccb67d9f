//! Every protocol message survives encoding and decoding unchanged, and no
//! byte string makes the decoder panic.

use plumb_ctl::{decode_frame, read_frame, write_frame, Frame, FrameError, Message, MAX_FRAME};
use plumb_samples::{EndResult, Role};
use plumb_spec::{
    BufSize, Close, CpuList, Direction, Family, Io, RrSpec, SockOpt, SockOptValues, SocketOpts,
    Spec, Workload,
};
use proptest::prelude::*;

fn bufsize() -> impl Strategy<Value = BufSize> {
    prop_oneof![
        Just(BufSize::Auto),
        (1u64..1 << 30).prop_map(BufSize::Bytes)
    ]
}

fn rr() -> impl Strategy<Value = RrSpec> {
    (
        1u64..1 << 20,
        1u64..1 << 20,
        1u32..1024,
        proptest::collection::vec(1u64..100, 0..4),
        proptest::option::of(prop_oneof![
            Just(Close::Rst),
            Just(Close::Fin),
            Just(Close::ServerFin)
        ]),
        proptest::option::of(1u64..100_000_000),
        proptest::option::of(1u64..10_000),
    )
        .prop_map(
            |(req, resp, pipeline, writes, close, rate, timeout)| RrSpec {
                req_size: req,
                resp_size: resp,
                pipeline,
                req_writes: writes.clone(),
                resp_writes: writes,
                close,
                rate,
                timeout_ms: timeout,
            },
        )
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        prop_oneof![
            Just(Workload::Stream),
            Just(Workload::Rr),
            Just(Workload::Crr),
            Just(Workload::UdpStream),
            Just(Workload::UdpRr)
        ],
        prop_oneof![
            Just(Direction::Send),
            Just(Direction::Recv),
            Just(Direction::Both)
        ],
        (1u32..1_000_000, 1u32..4096, 1u64..64 << 20),
        (bufsize(), bufsize(), any::<bool>(), any::<bool>()),
        (
            proptest::option::of(88u32..65535),
            proptest::option::of("[a-z_]{1,15}"),
            proptest::option::of(8u64..u64::MAX / 2),
        ),
        prop_oneof![Just(Family::V4), Just(Family::V6)],
        (1u64..86_400_000, 0u64..3_600_000, any::<bool>()),
        proptest::option::of(proptest::collection::vec(0u32..256, 1..8)),
        proptest::option::of(rr()),
    )
        .prop_map(
            |(
                workload,
                direction,
                (flows, threads, msg),
                (snd, rcv, nodelay, cork),
                (mss, cc, pacing),
                family,
                (d, w, uring),
                cpus,
                rr,
            )| Spec {
                workload,
                direction,
                flows,
                threads,
                msg_size: msg,
                socket: SocketOpts {
                    sndbuf: snd,
                    rcvbuf: rcv,
                    nodelay,
                    cork,
                    mss,
                    cc,
                    pacing_rate_bps: pacing,
                    table: mss.map_or_else(Default::default, |m| {
                        SockOptValues::default()
                            .with(SockOpt::NotsentLowat, m * 4)
                            .with(SockOpt::RcvLowat, m * 2)
                            .with(SockOpt::BusyPoll, m % 1000)
                    }),
                },
                family,
                duration_ms: d,
                warmup_ms: w,
                client_cpus: cpus.clone().map(CpuList::new),
                server_cpus: cpus.map(CpuList::new),
                rr,
                topology: None,
                server_host: None,
                machine: None,
                // A run of parts travels with its parts.
                parts: match flows % 3 {
                    0 => vec![plumb_spec::Part {
                        name: "load".into(),
                        start_ms: w / 1000 * 1000,
                        stop_ms: None,
                        spec: Spec::stream(),
                    }],
                    _ => Vec::new(),
                },
                zerocopy: Default::default(),
                rx: Default::default(),
                read_size: None,
                self_probes: None,
                io: if uring { Io::Uring } else { Io::Epoll },
                io_auto: uring,
            },
        )
}

/// An end's result with its free-form and counted fields drawn; floats are
/// eighths, which JSON carries exactly.
fn end() -> impl Strategy<Value = EndResult> {
    (
        "\\PC{0,20}",
        any::<u64>(),
        any::<u64>(),
        0u32..1_000_000,
        proptest::collection::vec("\\PC{0,40}", 0..3),
        proptest::collection::btree_map("[a-z.]{1,12}", any::<i64>(), 0..4),
    )
        .prop_map(
            |(host, sent, received, window8, warnings, counters)| EndResult {
                role: Role::Server,
                hostname: host.clone(),
                kernel: host,
                online_cpus: 4,
                threads: 2,
                window_s: window8 as f64 / 8.0,
                bytes_sent: sent,
                bytes_received: received,
                queued_start_bytes: sent / 3,
                queued_end_bytes: received / 5,
                counters: counters.clone(),
                warnings,
                transactions: received % 1000,
                irq_time_accounting: Some(true),
                interrupts: counters
                    .iter()
                    .map(|(k, v)| (k.to_uppercase(), v.unsigned_abs()))
                    .collect(),
                sockstat: Some(plumb_samples::Sockstat {
                    sockets_used: sent % 1000,
                    tcp_mem_pages: received % 1000,
                    ..Default::default()
                }),
                limited: Some(plumb_samples::SenderLimits {
                    flows: 1,
                    busy_s: window8 as f64 / 8.0,
                    rwnd_limited_s: window8 as f64 / 16.0,
                    sndbuf_limited_s: 0.0,
                    slow_start_flows: 0,
                }),
                window_retransmits: Some(sent % 97),
                tracepoints: Some(plumb_samples::Tracepoints {
                    counts: [("tcp:tcp_retransmit_skb".to_string(), received % 89)].into(),
                    unavailable: [("skb:kfree_skb".to_string(), "not here".to_string())].into(),
                    drop_reasons: [("SOCKET_RCVBUFF".to_string(), received % 83)].into(),
                    drop_reasons_read: Some(received % 83),
                    drop_reasons_as_read: [("SOCKET_RCVBUFF".to_string(), received % 79)].into(),
                    drop_reasons_throttled: sent % 7,
                    drop_reasons_lost: sent % 5,
                }),
                acks: Some(plumb_samples::AckSamples {
                    filter: format!("sport == {}", received % 65536),
                    counted: sent,
                    read: sent / 2,
                    kept: sent % 100_000,
                    srtt_us: [1.0, 2.0, 3.0, window8 as f64],
                    cwnd: [10.0, 10.0, 20.0, 40.0],
                    snd_wnd: [0.0, 65535.0, 65535.0, 1e6],
                    in_flight_bytes: [0.0, 1448.0, 2896.0, received as f64],
                    sampler_cpu_s: 0.25,
                }),
                flow_events: Some(plumb_samples::FlowEvents {
                    filter: format!("dport == {}", sent % 65536),
                    counts: [("tcp:tcp_rcvbuf_grow".to_string(), sent % 79)].into(),
                    unavailable: [("tcp:tcp_send_reset".to_string(), "no ports".to_string())]
                        .into(),
                    rcvbuf_grow: Some(plumb_samples::RcvbufGrowth {
                        read: sent % 79,
                        rcvbuf_sum: received,
                        window_clamp_sum: received / 2,
                        rcv_wnd_sum: received / 3,
                        scaling_ratio_sum: sent % 79 * 128,
                    }),
                }),
                tcp_series: Some(series(sent, window8)),
                ..EndResult::default()
            },
        )
}

/// Sampled TCP state built from drawn lifetime counters, as the sampler
/// builds it.
fn series(sent: u64, window8: u32) -> plumb_samples::TcpSeries {
    let mut b = plumb_samples::tcp::SeriesBuilder::new(2, 100);
    for t in 0..3u32 {
        let state = plumb_samples::TcpState {
            mss: 1448,
            cwnd: 10 + t,
            ssthresh: (t > 0).then_some(7),
            srtt_us: window8,
            in_flight: t * 3,
            snd_wnd: Some(window8),
            total_retrans: (sent % 1000) as u32 + t,
            busy_us: Some(sent % 1_000_000 + u64::from(t) * 1000),
            rwnd_limited_us: Some(u64::from(t) * 10),
            sndbuf_limited_us: Some(0),
            ..Default::default()
        };
        b.push(t * 100, &[Some(state), (t != 1).then_some(state)]);
    }
    b.finish(f64::from(window8) / 8e3)
}

fn message() -> impl Strategy<Value = Message> {
    let text = "\\PC{0,64}";
    prop_oneof![
        (text, text).prop_map(|(software, nonce)| Message::Hello { software, nonce }),
        (text, text, any::<bool>()).prop_map(|(software, nonce, auth)| Message::Welcome {
            software,
            nonce,
            auth
        }),
        text.prop_map(|proof| Message::Auth { proof }),
        text.prop_map(|proof| Message::AuthOk { proof }),
        (
            spec(),
            proptest::collection::vec(text, 0..3),
            any::<Option<(u16, u8)>>(),
            any::<bool>()
        )
            .prop_map(|(s, knobs, profile, tcp_probe)| Message::Setup {
                spec: Box::new(s),
                knobs,
                observe: plumb_samples::Observe {
                    profile: profile.map(|(f, p)| plumb_samples::ProfileAsk {
                        freq_hz: f as u64,
                        ring_pages: p as u32,
                    }),
                    tcp_probe,
                },
            }),
        (any::<u16>(), text, any::<u32>()).prop_map(|(data_port, cookie, threads)| {
            Message::Ready(plumb_ctl::Ready {
                data_port,
                cookie,
                threads,
                knobs: Vec::new(),
                part_ports: Vec::new(),
                boot_id: None,
            })
        }),
        Just(Message::Start),
        Just(Message::Started),
        Just(Message::Mark),
        Just(Message::Stop),
        end().prop_map(|e| Message::Results {
            end: Box::new(e),
            env: None,
            parts: Vec::new(),
        }),
        (text, text).prop_map(|(code, message)| Message::Error { code, message }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_message_round_trips(m in message()) {
        let mut wire = Vec::new();
        write_frame(&mut wire, &Frame::new(m.clone())).unwrap();
        let back = read_frame(&wire[..], MAX_FRAME).unwrap();
        prop_assert_eq!(back.message.name(), m.name());
        // The same bytes again: nothing was lost or changed on the way.
        let mut again = Vec::new();
        write_frame(&mut again, &back).unwrap();
        prop_assert_eq!(&again, &wire);
        let json_before = serde_json::to_value(Frame::new(m)).unwrap();
        let json_after = serde_json::to_value(&back).unwrap();
        prop_assert_eq!(json_before, json_after);
    }

    #[test]
    fn specs_come_back_equal(s in spec()) {
        let mut wire = Vec::new();
        write_frame(&mut wire, &Frame::new(Message::Setup {
            spec: Box::new(s.clone()),
            knobs: vec!["sysctl:net.core.rmem_max=8388608".into()],
            observe: Default::default(),
        })).unwrap();
        match read_frame(&wire[..], MAX_FRAME).unwrap().message {
            Message::Setup { spec, knobs, .. } => {
                prop_assert_eq!(*spec, s);
                prop_assert_eq!(knobs, vec!["sysctl:net.core.rmem_max=8388608".to_string()]);
            }
            m => prop_assert!(false, "got {}", m.name()),
        }
    }

    #[test]
    fn results_come_back_equal(e in end()) {
        let mut wire = Vec::new();
        write_frame(&mut wire, &Frame::new(Message::Results {
                end: Box::new(e.clone()),
                env: None,
                parts: Vec::new(),
            })).unwrap();
        match read_frame(&wire[..], MAX_FRAME).unwrap().message {
            Message::Results { end, .. } => prop_assert_eq!(*end, e),
            m => prop_assert!(false, "got {}", m.name()),
        }
    }

    #[test]
    fn no_bytes_make_the_decoder_panic(b in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode_frame(&b);
        let _ = read_frame(&b[..], MAX_FRAME);
    }

    #[test]
    fn a_cut_frame_is_never_taken_for_a_whole_one(m in message(), cut in 0usize..4096) {
        let mut wire = Vec::new();
        write_frame(&mut wire, &Frame::new(m)).unwrap();
        let cut = cut % wire.len();
        prop_assert!(matches!(read_frame(&wire[..cut], MAX_FRAME), Err(FrameError::Closed)));
    }
}
