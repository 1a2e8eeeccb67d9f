//! Sending a report where people read it: a mail through an SMTP server or
//! the host's sendmail, and a webhook (an HTTP POST of JSON), as a lab's
//! watch does when a kernel changed a figure. Plain SMTP and HTTP: the
//! relay on the lab's network, or on the host itself, carries them on.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::process::{Command, Stdio};
use std::time::Duration;

/// A plain-text mail.
#[derive(Debug, Clone)]
pub struct Mail {
    pub from: String,
    pub to: Vec<String>,
    pub subject: String,
    pub body: String,
}

impl Mail {
    /// The message as sent: headers, a blank line, the body with CRLF line
    /// ends (and a leading dot doubled, as SMTP's DATA needs when `dotted`).
    fn message(&self, dotted: bool) -> String {
        let mut m = format!(
            "From: {}\r\nTo: {}\r\nSubject: {}\r\nMIME-Version: 1.0\r\n\
             Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n",
            self.from,
            self.to.join(", "),
            self.subject
        );
        for line in self.body.lines() {
            if dotted && line.starts_with('.') {
                m.push('.');
            }
            m.push_str(line);
            m.push_str("\r\n");
        }
        m
    }
}

const TIMEOUT: Duration = Duration::from_secs(30);

fn stream(addr: &str, default_port: u16, what: &str) -> Result<TcpStream, String> {
    let with_port = if addr
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        addr.to_string()
    } else {
        format!("{addr}:{default_port}")
    };
    let target = with_port
        .to_socket_addrs()
        .map_err(|e| format!("{what} {addr}: {e}"))?
        .next()
        .ok_or_else(|| format!("{what} {addr}: no address"))?;
    let s = TcpStream::connect_timeout(&target, TIMEOUT)
        .map_err(|e| format!("{what} {addr}: cannot connect: {e}"))?;
    s.set_read_timeout(Some(TIMEOUT)).ok();
    s.set_write_timeout(Some(TIMEOUT)).ok();
    Ok(s)
}

/// Sends `mail` through the SMTP server at `addr` (HOST[:PORT], port 25).
pub fn smtp(addr: &str, mail: &Mail) -> Result<(), String> {
    let s = stream(addr, 25, "--smtp")?;
    let mut r = BufReader::new(s.try_clone().map_err(|e| e.to_string())?);
    let mut w = s;
    // A reply may span lines ("250-..." then "250 ..."); its code is what
    // counts.
    let mut expect = |code: &str, after: &str| -> Result<(), String> {
        loop {
            let mut line = String::new();
            r.read_line(&mut line)
                .map_err(|e| format!("--smtp {addr}: after {after}: {e}"))?;
            if line.is_empty() {
                return Err(format!("--smtp {addr}: closed after {after}"));
            }
            if !line.starts_with(code) {
                return Err(format!(
                    "--smtp {addr}: {after} answered {}",
                    line.trim_end()
                ));
            }
            if line.as_bytes().get(3) != Some(&b'-') {
                return Ok(());
            }
        }
    };
    let say = |w: &mut TcpStream, line: &str| {
        w.write_all(format!("{line}\r\n").as_bytes())
            .map_err(|e| format!("--smtp {addr}: {e}"))
    };
    expect("220", "connecting")?;
    say(&mut w, &format!("EHLO {}", plumb_sys::proc::hostname()))?;
    expect("250", "EHLO")?;
    say(&mut w, &format!("MAIL FROM:<{}>", bare(&mail.from)))?;
    expect("250", "MAIL FROM")?;
    for to in &mail.to {
        say(&mut w, &format!("RCPT TO:<{}>", bare(to)))?;
        expect("25", &format!("RCPT TO {to}"))?;
    }
    say(&mut w, "DATA")?;
    expect("354", "DATA")?;
    w.write_all(mail.message(true).as_bytes())
        .map_err(|e| format!("--smtp {addr}: {e}"))?;
    say(&mut w, ".")?;
    expect("250", "the message")?;
    say(&mut w, "QUIT")?;
    Ok(())
}

/// The address in `Name <addr>`, or the whole.
fn bare(a: &str) -> &str {
    match (a.find('<'), a.rfind('>')) {
        (Some(i), Some(j)) if i < j => &a[i + 1..j],
        _ => a.trim(),
    }
}

/// Hands `mail` to the host's sendmail (`sendmail -t -oi`).
pub fn sendmail(path: &str, mail: &Mail) -> Result<(), String> {
    let mut child = Command::new(path)
        .args(["-t", "-oi"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("--sendmail {path}: {e}"))?;
    let message = mail.message(false).replace("\r\n", "\n");
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(message.as_bytes())
        .map_err(|e| format!("--sendmail {path}: {e}"))?;
    let out = child
        .wait_with_output()
        .map_err(|e| format!("--sendmail {path}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "--sendmail {path}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

/// POSTs `json` to `url` (http://HOST[:PORT]/PATH); a reply other than 2xx
/// is an error naming it.
pub fn webhook(url: &str, json: &str) -> Result<(), String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        format!("--webhook {url}: only http:// is sent; put a relay on the lab's network in front of an https one")
    })?;
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let mut s = stream(host, 80, "--webhook")?;
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\nUser-Agent: plumb\r\n\r\n{json}",
        json.len()
    );
    s.write_all(request.as_bytes())
        .map_err(|e| format!("--webhook {url}: {e}"))?;
    let mut status = String::new();
    BufReader::new(&s)
        .read_line(&mut status)
        .map_err(|e| format!("--webhook {url}: {e}"))?;
    let code = status.split_whitespace().nth(1).unwrap_or("");
    if !code.starts_with('2') {
        return Err(format!("--webhook {url}: answered {}", status.trim_end()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_that_starts_with_a_dot_is_doubled_for_smtp_alone() {
        let m = Mail {
            from: "plumb <plumb@lab>".into(),
            to: vec!["netdev@lab".into()],
            subject: "s".into(),
            body: "one\n.two\n".into(),
        };
        assert!(m.message(true).ends_with("one\r\n..two\r\n"));
        assert!(m.message(false).ends_with("one\r\n.two\r\n"));
        assert_eq!(bare(&m.from), "plumb@lab");
        assert_eq!(bare("netdev@lab"), "netdev@lab");
    }
}
