use crate::args::ServeArgs;
use crate::Failure;
use plumb_ctl::{serve, ServeConfig, ServeError, DEFAULT_PORT};

pub fn exec(a: ServeArgs) -> Result<i32, Failure> {
    let listen = super::parse_addr(&a.listen, DEFAULT_PORT, "--listen")?;
    match serve(&ServeConfig {
        listen,
        once: a.once,
    }) {
        Ok(()) => Ok(0),
        Err(e @ ServeError::Listen { .. }) => Err(Failure::usage(e.to_string())),
        // A failed session was already logged; the embedded server's parent
        // reports it to the user.
        Err(ServeError::Session(_)) => Ok(1),
    }
}
