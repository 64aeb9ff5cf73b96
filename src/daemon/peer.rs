//! Who is at the other end of a Unix socket, as the kernel says (`SO_PEERCRED`), and the
//! binding of a forwarder's session token to its own process.
//!
//! A process is named by its pid *and* its start time (field 22 of `/proc/PID/stat`, in
//! clock ticks since boot), so a pid that is reused by another process after the first
//! one ended names a different process.

use serde::{Deserialize, Serialize};

/// A process on this host: user, pid and start time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Process {
    pub(crate) uid: u32,
    pub(crate) pid: u32,
    /// Clock ticks since boot when it started.
    pub(crate) start: u64,
}

impl Process {
    /// This process.
    pub fn me() -> std::io::Result<Process> {
        let pid = std::process::id();
        Ok(Process {
            uid: rustix::process::geteuid().as_raw(),
            pid,
            start: start_time(pid)?,
        })
    }

    /// The process at the other end of a connected Unix socket (the one that connected,
    /// or that listens). `None` when the kernel gives no pid or the process is gone.
    pub(crate) fn peer_of(stream: &tokio::net::UnixStream) -> Option<Process> {
        let cred = stream.peer_cred().ok()?;
        let pid = u32::try_from(cred.pid()?).ok()?;
        Some(Process {
            uid: cred.uid(),
            pid,
            start: start_time(pid).ok()?,
        })
    }

    /// The text stored with a token bound to this process (`session_tokens.peer`).
    pub fn binding(&self) -> String {
        format!("{}:{}:{}", self.uid, self.pid, self.start)
    }

    /// A binding stored by [`Process::binding`].
    pub(crate) fn parse_binding(text: &str) -> Option<Process> {
        let mut parts = text.split(':');
        let p = Process {
            uid: parts.next()?.parse().ok()?,
            pid: parts.next()?.parse().ok()?,
            start: parts.next()?.parse().ok()?,
        };
        parts.next().is_none().then_some(p)
    }
}

/// Field 22 of `/proc/PID/stat`: when the process started, in clock ticks since boot.
fn start_time(pid: u32) -> std::io::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name (field 2) is in parentheses and may hold spaces and ')'.
    let after = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .ok_or_else(|| std::io::Error::other("no ')' in /proc/PID/stat"))?;
    // `after` begins with field 3 (state); field 22 is the 20th from there.
    after
        .split_whitespace()
        .nth(19)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other("no start time in /proc/PID/stat"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binding_names_this_process_and_parses_back() {
        let me = Process::me().unwrap();
        assert_eq!(me.pid, std::process::id());
        assert!(me.start > 0);
        assert_eq!(Process::parse_binding(&me.binding()), Some(me));
        assert_eq!(Process::me().unwrap(), me, "the start time is stable");
        for bad in ["", "1:2", "1:2:3:4", "a:2:3", "1:2:x"] {
            assert_eq!(Process::parse_binding(bad), None, "{bad}");
        }
    }

    #[test]
    fn another_process_has_another_start_time_or_pid() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let theirs = start_time(child.id()).unwrap();
        let me = Process::me().unwrap();
        assert!(child.id() != me.pid);
        assert!(theirs >= me.start);
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(
            start_time(child.id()).is_err(),
            "a reaped process has no stat"
        );
    }
}
