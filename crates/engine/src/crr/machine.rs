//! One crr connection's exchange as a state machine with no I/O: connect,
//! the request in its writes, the response read in whatever pieces come,
//! and which end closes first. A driver (the epoll loop, the ring loop)
//! tells it what each write and read moved and when the peer closed, and
//! does what it answers; it counts bytes and transactions into the flow's
//! counters and hands a client's transaction time to the driver's sink.
//! Time comes in from the driver, so the machine runs the same against
//! sockets and in memory.

use super::CrrPlan;
use crate::flow::{FlowCounters, Writing};
use plumb_spec::Close;

/// What a connection does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Next {
    /// Write this many bytes: the write due.
    Write(usize),
    /// Read, now if the socket has something: more of the message coming
    /// in, or the peer's close that follows it closely.
    Read,
    /// Read at the socket's next readiness, not now: the server's wait for
    /// the client's close, which comes only after its answer is read.
    Await,
    /// The exchange is over: close the connection (the client opens its
    /// slot's next).
    Close,
    /// The exchange failed, for this reason.
    Fail(String),
}

/// Where one connection's exchange stands.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Exchange {
    at: Writing,
    /// Incoming bytes of the message.
    got: usize,
    /// The outgoing message has been written completely.
    written: bool,
    /// When the client started the connection.
    t0: u64,
}

/// The rules of one end's exchanges.
pub(crate) struct CrrMachine {
    client: bool,
    out_writes: Vec<usize>,
    in_size: usize,
    /// The server closes once its response is out (`server-fin`); otherwise
    /// the client closes once the response is in, and the server on the
    /// client's close.
    server_first: bool,
}

impl CrrMachine {
    pub(crate) fn new(plan: &CrrPlan) -> CrrMachine {
        CrrMachine {
            client: plan.client,
            out_writes: plan.out_writes.clone(),
            in_size: plan.in_size,
            server_first: plan.close == Close::ServerFin,
        }
    }

    /// The longest write and the size of a message coming in.
    pub(crate) fn sizes(&self) -> (usize, usize) {
        (crate::flow::longest(&self.out_writes), self.in_size)
    }

    /// A connection started at `t0_ns` (a client's connect, a server's
    /// accept), nothing written or read yet.
    pub(crate) fn begin(&self, t0_ns: u64) -> Exchange {
        Exchange {
            t0: t0_ns,
            ..Exchange::default()
        }
    }

    fn whole(&self, x: &Exchange) -> bool {
        x.got >= self.in_size
    }

    /// What a connection does next where no event says otherwise: a client
    /// writes its request and then reads; a server reads the request,
    /// writes its answer, and then waits for the client's close.
    pub(crate) fn next(&self, x: &Exchange) -> Next {
        let write = || Next::Write(x.at.due(&self.out_writes));
        match (self.client, x.written, self.whole(x)) {
            (true, false, _) => write(),
            (true, true, _) => Next::Read,
            (false, false, true) => write(),
            (false, false, false) => Next::Read,
            (false, true, _) => Next::Await,
        }
    }

    /// `n` bytes of the write due went out.
    pub(crate) fn wrote(&self, x: &mut Exchange, n: usize, c: &FlowCounters) -> Next {
        c.add_sent(n as u64);
        if !x.at.wrote(&self.out_writes, n) {
            return self.next(x);
        }
        x.written = true;
        if self.client {
            return Next::Read;
        }
        // The answer is out: the server's transaction.
        c.add_transaction();
        if self.server_first {
            Next::Close
        } else {
            Next::Await
        }
    }

    /// `n` more bytes came in. The ones that make the response whole end
    /// a client's transaction, timed from its connect as of `now_ns`.
    pub(crate) fn read(
        &self,
        x: &mut Exchange,
        n: usize,
        c: &FlowCounters,
        now_ns: impl FnOnce() -> u64,
        timed: impl FnOnce(u64, u64),
    ) -> Next {
        c.add_received(n as u64);
        let before = x.got;
        x.got += n;
        let completed = before < self.in_size && x.got >= self.in_size;
        if completed && self.client {
            c.add_transaction();
            timed(x.t0, now_ns().saturating_sub(x.t0));
            if !self.server_first {
                return Next::Close;
            }
        }
        self.next(x)
    }

    /// The peer closed (a read of 0 bytes). After a whole response it is
    /// the exchange's normal end; before it, the server gave up. A server
    /// closes whenever its client does.
    pub(crate) fn closed(&self, x: &Exchange) -> Next {
        if !self.client || self.whole(x) {
            Next::Close
        } else {
            Next::Fail("the server closed before its response".into())
        }
    }

    /// A read or write failed. A client's exchange fails with it; on a
    /// server it is the client's reset (linger 0), a normal end, which
    /// comes once a connection: `why` is only worded where it is kept.
    pub(crate) fn failed(&self, why: impl FnOnce() -> String) -> Next {
        if self.client {
            Next::Fail(why())
        } else {
            Next::Close
        }
    }
}

/// A client's and a server's exchanges joined in memory, each direction a
/// byte stream that arrives after a delay and is read in pieces cut at
/// random, writes taking part of what is due as a socket with little room
/// does; the close of either end arrives behind its bytes. Every choice
/// comes from a seeded generator, so a failure repeats.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::dice::Dice;
    use std::sync::atomic::Ordering::Relaxed;

    const REQ: usize = 100;
    const RESP: usize = 3000;

    fn machine(client: bool, close: Close) -> CrrMachine {
        let (out_writes, in_size) = if client {
            (vec![8, REQ - 8], RESP)
        } else {
            (vec![RESP], REQ)
        };
        CrrMachine::new(&CrrPlan {
            client,
            slots: 1,
            out_writes,
            in_size,
            close,
            peer: None,
            accept_from: None,
            opts: Default::default(),
            rate: None,
        })
    }

    /// One end of a connection: its exchange, what it does next, and what
    /// it wrote that the other has not read, with its close behind it.
    struct End {
        m: CrrMachine,
        x: Exchange,
        next: Next,
        wire: usize,
        /// The end closed; its close reaches the peer once `wire` is read.
        closed: bool,
    }

    impl End {
        fn new(m: CrrMachine, t0: u64) -> End {
            let x = m.begin(t0);
            End {
                next: m.next(&x),
                m,
                x,
                wire: 0,
                closed: false,
            }
        }
    }

    /// What one connection did, seen from both ends: which closed first,
    /// and how each exchange ended.
    #[derive(Debug, PartialEq)]
    struct Ended {
        first: &'static str,
        client: Next,
        server: Next,
    }

    /// Runs one connection to its end; returns how it ended and what the
    /// client timed.
    fn connection(
        close: Close,
        cc: &FlowCounters,
        sc: &FlowCounters,
        dice: &mut Dice,
        t0: u64,
    ) -> (Ended, Option<u64>) {
        let (mut c, mut s) = (
            End::new(machine(true, close), t0),
            End::new(machine(false, close), t0),
        );
        let mut now = t0;
        let mut first = None;
        let mut timed = None;
        // One step of `a`, the peer being `b`: write part of what is due,
        // or read part of what came, or take the peer's close.
        fn step(
            a: &mut End,
            b: &mut End,
            ac: &FlowCounters,
            now: u64,
            dice: &mut Dice,
            timed: &mut Option<u64>,
        ) {
            a.next = match a.next.clone() {
                Next::Write(due) => {
                    let n = dice.upto(due);
                    a.wire += n;
                    a.m.wrote(&mut a.x, n, ac)
                }
                Next::Read | Next::Await if b.wire > 0 => {
                    let n = dice.upto(b.wire);
                    b.wire -= n;
                    a.m.read(&mut a.x, n, ac, || now, |_, ns| *timed = Some(ns))
                }
                Next::Read | Next::Await if b.closed => a.m.closed(&a.x),
                other => other,
            };
        }
        for _ in 0..100_000 {
            now += 1000;
            if !c.closed {
                step(&mut c, &mut s, cc, now, dice, &mut timed);
            }
            if !s.closed {
                step(&mut s, &mut c, sc, now, dice, &mut timed);
            }
            for (end, name) in [(&mut c, "client"), (&mut s, "server")] {
                if matches!(end.next, Next::Close | Next::Fail(_)) && !end.closed {
                    end.closed = true;
                    first.get_or_insert(name);
                }
            }
            if c.closed && s.closed {
                break;
            }
        }
        let ended = Ended {
            first: first.expect("an end closed"),
            client: c.next,
            server: s.next,
        };
        (ended, timed)
    }

    fn load(c: &std::sync::atomic::AtomicU64) -> u64 {
        c.load(Relaxed)
    }

    #[test]
    fn every_byte_and_transaction_is_counted_once_whatever_the_pieces() {
        for close in [Close::Fin, Close::Rst, Close::ServerFin] {
            let (cc, sc) = (FlowCounters::default(), FlowCounters::default());
            let mut dice = Dice(7);
            for k in 0..200u64 {
                let (ended, timed) = connection(close, &cc, &sc, &mut dice, k * 1_000_000);
                assert_eq!(ended.client, Next::Close, "{close:?}");
                assert_eq!(ended.server, Next::Close, "{close:?}");
                // Timed from the connect: at least a step for each message.
                assert!(timed.is_some_and(|ns| ns >= 2000), "{close:?}: {timed:?}");
            }
            assert_eq!(load(&cc.transactions), 200);
            assert_eq!(load(&sc.transactions), 200);
            assert_eq!(load(&cc.sent), 200 * REQ as u64);
            assert_eq!(load(&sc.received), 200 * REQ as u64);
            assert_eq!(load(&sc.sent), 200 * RESP as u64);
            assert_eq!(load(&cc.received), 200 * RESP as u64);
        }
    }

    #[test]
    fn the_server_closes_first_only_with_server_fin() {
        let mut dice = Dice(3);
        for close in [Close::Fin, Close::Rst, Close::ServerFin] {
            for k in 0..50u64 {
                let (cc, sc) = (FlowCounters::default(), FlowCounters::default());
                let (ended, _) = connection(close, &cc, &sc, &mut dice, k);
                let first = if close == Close::ServerFin {
                    "server"
                } else {
                    "client"
                };
                assert_eq!(ended.first, first, "{close:?}");
            }
        }
    }

    #[test]
    fn a_response_split_over_reads_completes_one_transaction() {
        let m = machine(true, Close::Fin);
        let c = FlowCounters::default();
        let mut x = m.begin(0);
        assert_eq!(m.wrote(&mut x, 8, &c), Next::Write(REQ - 8));
        assert_eq!(m.wrote(&mut x, REQ - 8, &c), Next::Read);
        let mut timed = Vec::new();
        for _ in 0..RESP - 1 {
            assert_eq!(
                m.read(&mut x, 1, &c, || 5, |_, ns| timed.push(ns)),
                Next::Read
            );
        }
        assert_eq!(load(&c.transactions), 0);
        assert_eq!(
            m.read(&mut x, 1, &c, || 5, |_, ns| timed.push(ns)),
            Next::Close
        );
        assert_eq!((load(&c.transactions), timed), (1, vec![5]));
    }

    #[test]
    fn a_server_that_closes_before_its_response_fails_the_client_only() {
        let (cm, sm) = (machine(true, Close::Fin), machine(false, Close::Fin));
        let c = FlowCounters::default();
        let mut x = cm.begin(0);
        cm.wrote(&mut x, 8, &c);
        cm.wrote(&mut x, REQ - 8, &c);
        cm.read(&mut x, RESP - 1, &c, || 0, |_, _| {});
        assert_eq!(
            cm.closed(&x),
            Next::Fail("the server closed before its response".into())
        );
        assert_eq!(cm.failed(|| "reset".into()), Next::Fail("reset".into()));
        // A client's reset or close is a server's normal end, at any point.
        assert_eq!(sm.closed(&sm.begin(0)), Next::Close);
        assert_eq!(sm.failed(|| "reset".into()), Next::Close);
        assert_eq!(load(&c.transactions), 0);
    }

    #[test]
    fn a_server_answers_a_whole_request_once_and_then_waits_for_the_close() {
        let m = machine(false, Close::Rst);
        let c = FlowCounters::default();
        let mut x = m.begin(0);
        assert_eq!(m.next(&x), Next::Read);
        assert_eq!(m.read(&mut x, REQ / 2, &c, || 0, |_, _| {}), Next::Read);
        assert_eq!(
            m.read(&mut x, REQ / 2, &c, || 0, |_, _| {}),
            Next::Write(RESP)
        );
        assert_eq!(m.wrote(&mut x, RESP - 1, &c), Next::Write(1));
        assert_eq!(m.wrote(&mut x, 1, &c), Next::Await);
        assert_eq!(load(&c.transactions), 1);
        // Whatever comes after the answer does not answer again.
        assert_eq!(m.read(&mut x, 1, &c, || 0, |_, _| {}), Next::Await);
        assert_eq!(load(&c.transactions), 1);
    }
}
