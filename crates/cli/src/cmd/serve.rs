use crate::args::{LogArg, ServeArgs};
use crate::Failure;
use plumb_ctl::{serve, Cidr, Limits, LogFormat, ServeConfig, ServeError, DEFAULT_PORT};

pub fn exec(a: ServeArgs) -> Result<i32, Failure> {
    let listen = super::parse_addr(
        a.listen.as_deref().unwrap_or("[::]"),
        DEFAULT_PORT,
        "--listen",
    )?;
    let psk = match &a.psk_file {
        Some(p) => Some(plumb_ctl::auth::load_key(p, "--psk-file").map_err(Failure::usage)?),
        None => None,
    };
    let allow = a
        .allow
        .iter()
        .map(|s| Cidr::parse(s).map_err(|e| Failure::usage(format!("--allow: {e}"))))
        .collect::<Result<Vec<_>, _>>()?;
    match serve(&ServeConfig {
        listen,
        once: a.once,
        psk,
        limits: Limits {
            max_flows: a.max_flows,
            max_duration_ms: a.max_duration,
            max_buffer: a.max_buffer,
            max_rate_bps: a.max_rate,
        },
        allow,
        data_ports: a.data_ports,
        concurrent: a.concurrent,
        log: match a.log {
            LogArg::Text => LogFormat::Text,
            LogArg::Json => LogFormat::Json,
        },
    }) {
        Ok(()) => Ok(0),
        Err(e @ ServeError::Listen { .. }) => Err(Failure::usage(e.to_string())),
        // A failed session was already logged; the embedded server's parent
        // reports it to the user.
        Err(ServeError::Session(_)) => Ok(1),
    }
}
