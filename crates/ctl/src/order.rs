//! The order of a control session's messages: one state machine that both
//! sides step through with every frame they send and every frame they
//! receive, so that a message out of place is refused the same way on
//! either side, with what was due instead.
//!
//! hello → welcome → [auth → auth_ok, when the welcome asks for it] → setup
//! → ready → start → started → mark → stop → results. A client stopped
//! during the warm-up sends stop without a mark. `error` may come at any
//! point and ends the session.

use crate::message::Message;

/// Why a message the order let through is the one a side matched for.
pub const IN_ORDER: &str = "the order lets no other message through here";

/// The message a session waits for next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Due {
    Hello,
    Welcome,
    Auth,
    AuthOk,
    Setup,
    Ready,
    Start,
    Started,
    Mark,
    Stop,
    Results,
    /// Results or an error went by: nothing more belongs to the session.
    Done,
}

/// Where a control session stands.
#[derive(Debug, Clone)]
pub struct Order {
    due: Due,
}

impl Default for Order {
    fn default() -> Self {
        Order::new()
    }
}

impl Order {
    /// A session that has exchanged nothing yet.
    pub fn new() -> Order {
        Order { due: Due::Hello }
    }

    /// The name of the message due next.
    pub fn due(&self) -> &'static str {
        match self.due {
            Due::Hello => "hello",
            Due::Welcome => "welcome",
            Due::Auth => "auth",
            Due::AuthOk => "auth_ok",
            Due::Setup => "setup",
            Due::Ready => "ready",
            Due::Start => "start",
            Due::Started => "started",
            Due::Mark => "mark",
            Due::Stop => "stop",
            Due::Results => "results",
            Due::Done => "nothing",
        }
    }

    /// Whether the session is over.
    pub fn is_done(&self) -> bool {
        self.due == Due::Done
    }

    /// Takes `m` as the session's next message, sent or received. One out
    /// of place is refused with what was due ("expected X, got Y") and
    /// leaves the order where it was.
    pub fn take(&mut self, m: &Message) -> Result<(), String> {
        use Due as D;
        let next = match (self.due, m) {
            (D::Done, _) => return Err(format!("expected nothing, got {}", m.name())),
            (_, Message::Error { .. }) => D::Done,
            (D::Hello, Message::Hello { .. }) => D::Welcome,
            (D::Welcome, Message::Welcome { auth: true, .. }) => D::Auth,
            (D::Welcome, Message::Welcome { auth: false, .. }) => D::Setup,
            (D::Auth, Message::Auth { .. }) => D::AuthOk,
            (D::AuthOk, Message::AuthOk { .. }) => D::Setup,
            (D::Setup, Message::Setup { .. }) => D::Ready,
            (D::Ready, Message::Ready(_)) => D::Start,
            (D::Start, Message::Start) => D::Started,
            (D::Started, Message::Started) => D::Mark,
            (D::Mark, Message::Mark) => D::Stop,
            (D::Mark | D::Stop, Message::Stop) => D::Results,
            (D::Results, Message::Results { .. }) => D::Done,
            _ => return Err(format!("expected {}, got {}", self.due(), m.name())),
        };
        self.due = next;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use plumb_samples::Role;

    fn hello() -> Message {
        Message::Hello {
            software: "plumb".into(),
            nonce: String::new(),
        }
    }
    fn welcome(auth: bool) -> Message {
        Message::Welcome {
            software: "plumb".into(),
            nonce: String::new(),
            auth,
        }
    }
    fn setup() -> Message {
        Message::Setup {
            spec: Box::new(plumb_spec::Spec::stream()),
            knobs: Vec::new(),
            observe: Default::default(),
        }
    }
    fn ready() -> Message {
        Message::Ready(crate::Ready {
            data_port: 1,
            cookie: String::new(),
            threads: 1,
            knobs: Vec::new(),
            part_ports: Vec::new(),
            boot_id: None,
        })
    }
    fn results() -> Message {
        Message::Results {
            env: None,
            end: Box::new(plumb_samples::EndResult::empty(Role::Server, 1)),
            parts: Vec::new(),
        }
    }

    /// A session without auth, up to the server's "started".
    fn until_started() -> Vec<Message> {
        vec![
            hello(),
            welcome(false),
            setup(),
            ready(),
            Message::Start,
            Message::Started,
        ]
    }

    fn run(messages: &[Message]) -> Result<Order, String> {
        let mut o = Order::new();
        for m in messages {
            o.take(m)?;
        }
        Ok(o)
    }

    #[test]
    fn a_whole_test_goes_through_in_order() {
        let mut plain = until_started();
        plain.extend([Message::Mark, Message::Stop, results()]);
        assert!(run(&plain).unwrap().is_done());
        let mut keyed = vec![hello(), welcome(true)];
        keyed.push(Message::Auth {
            proof: String::new(),
        });
        keyed.push(Message::AuthOk {
            proof: String::new(),
        });
        keyed.extend_from_slice(&plain[2..]);
        assert!(run(&keyed).unwrap().is_done());
    }

    #[test]
    fn a_stop_during_the_warm_up_needs_no_mark() {
        let o = run(&[until_started(), vec![Message::Stop]].concat()).unwrap();
        assert_eq!(o.due(), "results");
    }

    #[test]
    fn a_message_out_of_place_names_what_was_due_and_changes_nothing() {
        let mut o = run(&[hello(), welcome(false)]).unwrap();
        assert_eq!(
            o.take(&Message::Start).unwrap_err(),
            "expected setup, got start"
        );
        assert_eq!(o.due(), "setup");
        // Auth is only due when the welcome asked for it.
        let e = o.take(&Message::Auth {
            proof: String::new(),
        });
        assert_eq!(e.unwrap_err(), "expected setup, got auth");
        assert_eq!(run(&[setup()]).unwrap_err(), "expected hello, got setup");
        let mut o = run(&[hello(), welcome(true)]).unwrap();
        assert_eq!(o.take(&setup()).unwrap_err(), "expected auth, got setup");
        let mut o = run(&[until_started(), vec![Message::Mark]].concat()).unwrap();
        assert_eq!(
            o.take(&Message::Mark).unwrap_err(),
            "expected stop, got mark"
        );
    }

    #[test]
    fn an_error_ends_the_session_anywhere() {
        for n in 0..6 {
            let mut o = run(&until_started()[..n.min(5)]).unwrap();
            o.take(&Message::error("busy", "busy")).unwrap();
            assert!(o.is_done());
            assert_eq!(
                o.take(&Message::Start).unwrap_err(),
                "expected nothing, got start"
            );
        }
    }
}
