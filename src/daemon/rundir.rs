//! The daemon's private directory, `<db>.daemon.d/`: mode 0700, owned by the daemon's
//! user. It holds the daemon's lock (`lock`, 0600) and the Unix socket forwarders talk to
//! (`mcp.sock`). Only that user (and root) can enter it, so nobody else can hold the
//! lock, bind the socket, or replace either (docs/security.md, "The daemon").
//!
//! The directory is opened once, without following a symlink, and checked on the open
//! handle (owner and mode); its entries are then reached through that handle
//! (`/proc/self/fd/N/NAME` for the socket, whose `bind` and `connect` take a path), never
//! by the checked name again, so swapping the directory after the check changes nothing.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FlockOperation, Mode, OFlags};
use rustix::io::Errno;

/// The socket's name in the directory.
pub(crate) const SOCKET: &str = "mcp.sock";
/// The lock's name in the directory.
const LOCK: &str = "lock";

/// An open, checked `<db>.daemon.d/`.
#[derive(Debug)]
pub(crate) struct RunDir {
    fd: OwnedFd,
    path: PathBuf,
}

/// `<db>.daemon.d`.
pub(crate) fn path_for(db: &Path) -> PathBuf {
    super::suffixed(db, ".daemon.d")
}

/// Why a directory is not the daemon's: owner or mode.
fn check(fd: &OwnedFd, path: &Path) -> Result<(), String> {
    let st = rustix::fs::fstat(fd).map_err(|e| format!("{}: {e}", path.display()))?;
    let me = rustix::process::geteuid().as_raw();
    if st.st_uid != me {
        return Err(format!(
            "{} belongs to uid {}, not to this user (uid {me}): it is not this user's \
             daemon's directory",
            path.display(),
            st.st_uid
        ));
    }
    if st.st_mode & 0o077 != 0 {
        return Err(format!(
            "{} is open to other users (mode {:o}); the daemon's directory is 0700",
            path.display(),
            st.st_mode & 0o7777
        ));
    }
    Ok(())
}

fn open_dir(path: &Path, flags: OFlags) -> Result<OwnedFd, Errno> {
    rustix::fs::open(
        path,
        flags | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

impl RunDir {
    /// The daemon's side: create the directory (0700) unless it exists, open it, and make
    /// sure it is this user's and closed to others (a directory of this user's with a
    /// wider mode is narrowed; one of another user's is refused).
    pub(crate) fn create(db: &Path) -> anyhow::Result<RunDir> {
        let path = path_for(db);
        match rustix::fs::mkdir(&path, Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => anyhow::bail!("creating {}: {e}", path.display()),
        }
        let fd = open_dir(&path, OFlags::RDONLY).map_err(|e| match e {
            Errno::LOOP | Errno::NOTDIR => anyhow::anyhow!(
                "{} is not a directory (a symlink or a file stands there); remove it",
                path.display()
            ),
            e => anyhow::anyhow!("opening {}: {e}", path.display()),
        })?;
        let st = rustix::fs::fstat(&fd)?;
        if st.st_uid == rustix::process::geteuid().as_raw() && st.st_mode & 0o077 != 0 {
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o700))?;
        }
        check(&fd, &path).map_err(|why| anyhow::anyhow!("{why}; remove it"))?;
        Ok(RunDir { fd, path })
    }

    /// A client's side (a forwarding `cairn serve`): open the directory if it exists and
    /// is this user's and closed to others; otherwise say why not.
    pub(crate) fn open(db: &Path) -> Result<RunDir, String> {
        let path = path_for(db);
        let fd = open_dir(&path, OFlags::PATH).map_err(|e| match e {
            Errno::NOENT => format!("{} does not exist (no daemon ran here)", path.display()),
            Errno::LOOP | Errno::NOTDIR => {
                format!("{} is not a directory (a symlink?)", path.display())
            }
            e => format!("opening {}: {e}", path.display()),
        })?;
        check(&fd, &path)?;
        Ok(RunDir { fd, path })
    }

    /// The directory's path (for messages).
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// A name in the directory reached through the open handle: `/proc/self/fd/N/name`.
    pub(crate) fn entry(&self, name: &str) -> PathBuf {
        use std::os::fd::AsRawFd;
        PathBuf::from(format!("/proc/self/fd/{}/{name}", self.fd.as_raw_fd()))
    }

    /// Take the daemon's lock (exclusive, not waiting): `None` when another process
    /// holds it. The lock lives as long as the returned file.
    pub(crate) fn lock(&self) -> anyhow::Result<Option<File>> {
        let fd = rustix::fs::openat(
            &self.fd,
            LOCK,
            OFlags::CREATE | OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
        .map_err(|e| anyhow::anyhow!("opening {}/{LOCK}: {e}", self.path.display()))?;
        match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(Some(File::from(fd))),
            Err(Errno::WOULDBLOCK) => Ok(None),
            Err(e) => anyhow::bail!("locking {}/{LOCK}: {e}", self.path.display()),
        }
    }

    /// Remove a stale socket before binding a new one (only the lock's holder may).
    pub(crate) fn remove_socket(&self) -> anyhow::Result<()> {
        match rustix::fs::unlinkat(&self.fd, SOCKET, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => anyhow::bail!("removing {}/{SOCKET}: {e}", self.path.display()),
        }
    }
}
