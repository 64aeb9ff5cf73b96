//! Path safety: the one place where a caller-given path becomes an open file or
//! directory.
//!
//! Every tool that takes a path or reads files under a root it was given
//! (`vault_update`, `vault_delete`, `cairn reindex`, `update_memory`, `complete_phase`,
//! `move_issue`, `skill_list`, `verify_workspace`) opens the root directory **once** as a
//! [`DirHandle`] and then opens the caller's path *beneath that handle*, never by a name
//! that was checked earlier (an agent with a shell can swap any component for a symlink
//! between a check and an open). See docs/security.md for the threat model.
//!
//! - **Shape** ([`relative_components`]): an empty path, a NUL byte, a path longer than
//!   [`PATH_MAX`] bytes or a component longer than [`COMPONENT_MAX`] bytes, an absolute
//!   path and any `..` component (even `a/../a`) are refused with a field error.
//! - **Opening**: `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`
//!   relative to the handle; on a kernel without `openat2` (before 5.6, or a seccomp
//!   filter that refuses it), component by component with `openat(O_NOFOLLOW)`, each
//!   directory opened beneath the previous one. A symlink *anywhere* along the path is
//!   refused, whether it leads inside the root or not.
//! - **Files** ([`DirHandle::open_file`]): opened non-blocking (a FIFO cannot hang the
//!   open), then checked with `fstat` on the handle: a regular file, at most one hard link
//!   (a hard link to a file outside the root is indistinguishable from the file itself),
//!   at most the caller's size cap; [`OpenFile::read_capped`] reads at most cap + 1 bytes,
//!   so a file that grows after the check is refused, not read to exhaustion.
//! - **Writes**: directories are created with `mkdirat` beneath the handle
//!   ([`DirHandle::create_dirs`]); files with `O_CREAT | O_EXCL | O_NOFOLLOW`
//!   ([`DirHandle::create_new`]); an atomic replacement ([`DirHandle::write_atomic`]) writes
//!   a temp file in the verified directory and `renameat`s it over the target in that same
//!   directory, and only over a regular file (never a symlink, directory, device, FIFO or
//!   socket). [`write_output`] is the CLI's `--out PATH`: a device or FIFO is written to
//!   directly, a directory or socket refused, a regular file replaced atomically.
//!
//! What this cannot prevent: the content of a regular file changing after it was opened
//! (the bytes read are what the tool acts on; callers hash what they read), and a root
//! directory that is itself swapped before [`DirHandle::open_root`] (roots come from the
//! operator's flags and the database, not from the agent's call).

use std::ffi::{CStr, OsStr};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags, ResolveFlags};
use rustix::io::Errno;

use crate::error::{Error, Result};

/// Longest accepted path, in bytes (Linux `PATH_MAX`).
pub(crate) const PATH_MAX: usize = 4096;
/// Longest accepted path component, in bytes (Linux `NAME_MAX`).
pub(crate) const COMPONENT_MAX: usize = 255;

/// A caller's text, shortened for an error message.
pub(crate) fn shown(text: &str) -> String {
    let mut s: String = text.chars().take(120).collect();
    if s.len() < text.len() {
        s.push('…');
    }
    format!("{s:?}")
}

/// Check the shape of a caller-given relative path without touching the filesystem and
/// return its normal components (`.` components dropped). Errors name `field`.
pub(crate) fn relative_components<'a>(relative: &'a str, field: &str) -> Result<Vec<&'a str>> {
    let fail = |why: String| Err(Error::invalid(field, why));
    if relative.is_empty() {
        return fail("must not be empty; give a path relative to the root".into());
    }
    if relative.contains('\0') {
        return fail("must not contain a NUL byte".into());
    }
    if relative.len() > PATH_MAX {
        return fail(format!(
            "is {} bytes long; at most {PATH_MAX} bytes are accepted",
            relative.len()
        ));
    }
    let mut parts = Vec::new();
    for c in Path::new(relative).components() {
        match c {
            Component::Normal(part) => {
                let part = part.to_str().unwrap_or_default();
                if part.len() > COMPONENT_MAX {
                    return fail(format!(
                        "has a component of {} bytes; at most {COMPONENT_MAX} bytes per name",
                        part.len()
                    ));
                }
                parts.push(part);
            }
            Component::CurDir => {}
            Component::ParentDir => {
                return fail(format!(
                    "{} contains a `..` component; give a path inside the root without `..`",
                    shown(relative)
                ));
            }
            Component::RootDir | Component::Prefix(_) => {
                return fail(format!(
                    "{} is absolute; give a path relative to the root (e.g. docs/notes.md)",
                    shown(relative)
                ));
            }
        }
    }
    if parts.is_empty() {
        return fail(format!("{} names the root itself", shown(relative)));
    }
    Ok(parts)
}

/// The canonical form of a root directory that must exist.
pub(crate) fn canonical_root(root: &Path) -> Result<PathBuf> {
    let canon = std::fs::canonicalize(root).map_err(|e| {
        Error::FailedPrecondition(format!(
            "the directory {} cannot be used: {e}",
            root.display()
        ))
    })?;
    if !canon.is_dir() {
        return Err(Error::FailedPrecondition(format!(
            "{} is not a directory",
            root.display()
        )));
    }
    Ok(canon)
}

/// Whether the components of a relative path begin with `prefix` (`["docs", "tickets"]`).
pub(crate) fn starts_with_parts(parts: &[&str], prefix: &[&str]) -> bool {
    parts.len() >= prefix.len() && parts.iter().zip(prefix).all(|(a, b)| a == b)
}

/// The text of a refusal for a message that is not a field error: the field messages
/// joined with `; `, or the error itself.
pub(crate) fn refusal_text(e: &Error) -> String {
    match e {
        Error::InvalidInput(fields) => fields
            .iter()
            .map(|f| f.message.as_str())
            .collect::<Vec<_>>()
            .join("; "),
        other => other.to_string(),
    }
}

/// Set once `openat2` answered `ENOSYS`: from then on every open walks component by
/// component.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// Open `parts` beneath `dir` without following any symlink and without leaving `dir`.
fn open_beneath(
    dir: std::os::fd::BorrowedFd<'_>,
    parts: &[&str],
    flags: OFlags,
    mode: Mode,
) -> rustix::io::Result<OwnedFd> {
    if !NO_OPENAT2.load(Ordering::Relaxed) {
        let path = parts.join("/");
        let how = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        // EAGAIN: the kernel saw a concurrent rename and refuses to guess; try again.
        for _ in 0..16 {
            match rustix::fs::openat2(dir, path.as_str(), flags | OFlags::CLOEXEC, mode, how) {
                Err(Errno::AGAIN) => continue,
                Err(Errno::NOSYS) => {
                    NO_OPENAT2.store(true, Ordering::Relaxed);
                    break;
                }
                other => return other,
            }
        }
        if !NO_OPENAT2.load(Ordering::Relaxed) {
            return Err(Errno::AGAIN);
        }
    }
    walk_open(dir, parts, flags, mode)
}

/// The fallback of [`open_beneath`]: every directory opened with `O_NOFOLLOW` beneath
/// the previous one, the last component opened with `O_NOFOLLOW`. Since no part is `..`
/// and no symlink is followed, the result is beneath `dir`.
fn walk_open(
    dir: std::os::fd::BorrowedFd<'_>,
    parts: &[&str],
    flags: OFlags,
    mode: Mode,
) -> rustix::io::Result<OwnedFd> {
    let (last, dirs) = parts.split_last().ok_or(Errno::INVAL)?;
    let mut current: Option<OwnedFd> = None;
    for part in dirs {
        let base = current.as_ref().map_or(dir, |f| f.as_fd());
        let next = rustix::fs::openat(
            base,
            *part,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        );
        // O_DIRECTORY | O_NOFOLLOW on a symlink answers ENOTDIR: tell the two apart
        // (the open was refused either way; this only picks the message).
        let next = match next {
            Err(Errno::NOTDIR)
                if rustix::fs::statat(base, *part, AtFlags::SYMLINK_NOFOLLOW)
                    .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink) =>
            {
                return Err(Errno::LOOP);
            }
            other => other?,
        };
        current = Some(next);
    }
    let base = current.as_ref().map_or(dir, |f| f.as_fd());
    let fd = rustix::fs::openat(
        base,
        *last,
        flags | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        mode,
    )?;
    // With O_PATH, O_NOFOLLOW opens a symlink itself instead of failing.
    if flags.contains(OFlags::PATH)
        && FileType::from_raw_mode(rustix::fs::fstat(&fd)?.st_mode) == FileType::Symlink
    {
        return Err(Errno::LOOP);
    }
    Ok(fd)
}

/// What a file type is called in an error message.
fn kind_name(t: FileType) -> &'static str {
    match t {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symlink",
        FileType::Fifo => "a FIFO (named pipe)",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Unknown => "a special file",
    }
}

fn std_kind(t: std::fs::FileType) -> FileType {
    if t.is_file() {
        FileType::RegularFile
    } else if t.is_dir() {
        FileType::Directory
    } else if t.is_symlink() {
        FileType::Symlink
    } else if t.is_fifo() {
        FileType::Fifo
    } else if t.is_socket() {
        FileType::Socket
    } else if t.is_char_device() {
        FileType::CharacterDevice
    } else if t.is_block_device() {
        FileType::BlockDevice
    } else {
        FileType::Unknown
    }
}

/// A single file name (no `/`, not `.` or `..`, not empty), for names Cairn builds.
fn check_name(name: &OsStr) -> Result<()> {
    let b = name.as_bytes();
    if b.is_empty() || b == b"." || b == b".." || b.contains(&b'/') || b.contains(&0) {
        return Err(Error::Internal(format!(
            "{name:?} is not a single file name"
        )));
    }
    Ok(())
}

/// A counter for temp names, unique within the process.
static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);

fn temp_name(prefix: &str) -> String {
    format!(
        ".{prefix}{}-{}.tmp",
        std::process::id(),
        TEMP_SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// One entry of a directory read through a [`DirHandle`].
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) name: std::ffi::OsString,
    /// The entry's own type (a symlink is a symlink), as seen when listed.
    pub(crate) kind: FileType,
}

/// An open directory beneath which paths are opened (see the module docs).
#[derive(Debug)]
pub(crate) struct DirHandle {
    fd: OwnedFd,
    /// Where the directory was when it was opened, for messages.
    path: PathBuf,
}

impl DirHandle {
    /// Open a root directory: canonical, then opened once. Everything under it is
    /// opened beneath this handle.
    pub(crate) fn open_root(root: &Path) -> Result<DirHandle> {
        let canon = canonical_root(root)?;
        let fd = rustix::fs::open(
            &canon,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| Error::io(&canon, e.into()))?;
        Ok(DirHandle { fd, path: canon })
    }

    /// The directory's path when it was opened (for messages and results only).
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn child(&self, fd: OwnedFd, parts: &[&str]) -> DirHandle {
        let mut path = self.path.clone();
        path.extend(parts);
        DirHandle { fd, path }
    }

    /// The structured error for a refused open of `parts` (the caller's `relative`).
    fn refusal(&self, e: Errno, parts: &[&str], relative: &str, field: &str) -> Error {
        let rel = shown(relative);
        match e {
            Errno::LOOP => {
                let at = (1..=parts.len())
                    .find(|&i| {
                        open_beneath(self.fd.as_fd(), &parts[..i], OFlags::PATH, Mode::empty())
                            .err()
                            == Some(Errno::LOOP)
                    })
                    .map_or_else(|| parts.join("/"), |i| parts[..i].join("/"));
                Error::invalid(
                    field,
                    format!(
                        "{rel}: {at} is a symlink; paths under {} are opened without following \
                         symlinks (one could lead outside it): use the real path",
                        self.path.display()
                    ),
                )
            }
            Errno::NOTDIR => Error::invalid(
                field,
                format!("{rel}: a component of it is a file, not a directory"),
            ),
            Errno::XDEV => Error::invalid(
                field,
                format!("{rel} leads outside {}", self.path.display()),
            ),
            Errno::NXIO | Errno::NODEV => Error::invalid(
                field,
                format!("{rel} is a socket or a device, not a regular file"),
            ),
            other => {
                let mut at = self.path.clone();
                at.extend(parts);
                Error::io(at, other.into())
            }
        }
    }

    /// Open the directory `relative` beneath this one; `None` when it does not exist.
    pub(crate) fn dir(&self, relative: &str, field: &str) -> Result<Option<DirHandle>> {
        let parts = relative_components(relative, field)?;
        self.dir_parts(&parts, relative, field)
    }

    /// [`DirHandle::dir`] for components already checked.
    pub(crate) fn dir_parts(
        &self,
        parts: &[&str],
        relative: &str,
        field: &str,
    ) -> Result<Option<DirHandle>> {
        match open_beneath(
            self.fd.as_fd(),
            parts,
            OFlags::RDONLY | OFlags::DIRECTORY,
            Mode::empty(),
        ) {
            Ok(fd) => Ok(Some(self.child(fd, parts))),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(self.refusal(e, parts, relative, field)),
        }
    }

    /// Check that the existing part of `parts` has no symlink and no file in the
    /// middle, without opening anything for reading (for paths a tool records but does
    /// not read). A path that does not exist yet is accepted.
    pub(crate) fn probe(&self, parts: &[&str], relative: &str, field: &str) -> Result<()> {
        match open_beneath(self.fd.as_fd(), parts, OFlags::PATH, Mode::empty()) {
            Ok(_) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(self.refusal(e, parts, relative, field)),
        }
    }

    /// Open the file `relative` beneath this directory for reading, checked: a regular
    /// file, one hard link, at most `cap` bytes. `None` when it does not exist.
    pub(crate) fn open_file(
        &self,
        relative: &str,
        field: &str,
        cap: u64,
    ) -> Result<Option<OpenFile>> {
        let parts = relative_components(relative, field)?;
        self.open_file_parts(&parts, relative, field, cap)
    }

    /// [`DirHandle::open_file`] for components already checked.
    pub(crate) fn open_file_parts(
        &self,
        parts: &[&str],
        relative: &str,
        field: &str,
        cap: u64,
    ) -> Result<Option<OpenFile>> {
        // Non-blocking, so that opening a FIFO returns at once; no controlling tty.
        let fd = match open_beneath(
            self.fd.as_fd(),
            parts,
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(None),
            Err(e) => return Err(self.refusal(e, parts, relative, field)),
        };
        let file = File::from(fd);
        let mut at = self.path.clone();
        at.extend(parts);
        let meta = file.metadata().map_err(|e| Error::io(&at, e))?;
        let rel = shown(relative);
        let kind = std_kind(meta.file_type());
        if kind != FileType::RegularFile {
            return Err(Error::invalid(
                field,
                format!(
                    "{rel} is {}, not a regular file; give the path of a regular file",
                    kind_name(kind)
                ),
            ));
        }
        if meta.nlink() > 1 {
            return Err(Error::invalid(
                field,
                format!(
                    "{rel} has {} hard links; a file with more than one link may be a file \
                     outside {} and is not read: replace the link with a copy (cp, not ln)",
                    meta.nlink(),
                    self.path.display()
                ),
            ));
        }
        if meta.len() > cap {
            return Err(Error::invalid(
                field,
                format!(
                    "{rel} is {} bytes; at most {cap} bytes are read",
                    meta.len()
                ),
            ));
        }
        Ok(Some(OpenFile {
            file,
            meta,
            shown: rel,
            field: field.to_string(),
            cap,
        }))
    }

    /// The entries of this directory (not `.` and `..`), by name, each with its own type
    /// (symlinks not followed). Entries that vanish while listed are left out.
    pub(crate) fn entries(&self) -> Result<Vec<Entry>> {
        let io = |e: Errno| Error::io(&self.path, e.into());
        let dir = rustix::fs::Dir::read_from(&self.fd).map_err(io)?;
        let mut out = Vec::new();
        for entry in dir {
            let entry = entry.map_err(io)?;
            let name: &CStr = entry.file_name();
            if name.to_bytes() == b"." || name.to_bytes() == b".." {
                continue;
            }
            let kind = match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => FileType::from_raw_mode(st.st_mode),
                Err(Errno::NOENT) => continue,
                Err(e) => return Err(io(e)),
            };
            out.push(Entry {
                name: OsStr::from_bytes(name.to_bytes()).to_os_string(),
                kind,
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Create the directories `parts` beneath this one (`mkdirat`, each opened beneath
    /// the last without following symlinks) and return the innermost.
    pub(crate) fn create_dirs(
        &self,
        parts: &[&str],
        relative: &str,
        field: &str,
    ) -> Result<DirHandle> {
        let mut current = DirHandle {
            fd: self.fd.try_clone().map_err(|e| Error::io(&self.path, e))?,
            path: self.path.clone(),
        };
        for (i, part) in parts.iter().enumerate() {
            match rustix::fs::mkdirat(&current.fd, *part, Mode::from_raw_mode(0o755)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(self.refusal(e, &parts[..=i], relative, field)),
            }
            current = current
                .dir_parts(&[part], relative, field)
                .map_err(|e| match e {
                    Error::InvalidInput(_) => self.refusal(
                        open_beneath(self.fd.as_fd(), &parts[..=i], OFlags::PATH, Mode::empty())
                            .err()
                            .unwrap_or(Errno::LOOP),
                        &parts[..=i],
                        relative,
                        field,
                    ),
                    other => other,
                })?
                .ok_or_else(|| Error::Conflict {
                    message: format!(
                        "{} was removed while it was being created; retry",
                        current.path.join(part).display()
                    ),
                    existing_id: None,
                })?;
        }
        Ok(current)
    }

    /// Create the new file `name` in this directory (`O_CREAT | O_EXCL | O_NOFOLLOW`).
    pub(crate) fn create_new(&self, name: &OsStr) -> Result<File> {
        check_name(name)?;
        rustix::fs::openat(
            &self.fd,
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )
        .map(File::from)
        .map_err(|e| Error::io(self.path.join(name), e.into()))
    }

    /// Create a new, uniquely named directory in this one; returns its name and handle.
    pub(crate) fn create_temp_dir(&self, prefix: &str) -> Result<(String, DirHandle)> {
        loop {
            let name = temp_name(prefix);
            match rustix::fs::mkdirat(&self.fd, name.as_str(), Mode::from_raw_mode(0o755)) {
                Ok(()) => {}
                Err(Errno::EXIST) => continue,
                Err(e) => return Err(Error::io(self.path.join(&name), e.into())),
            }
            let fd = open_beneath(
                self.fd.as_fd(),
                &[name.as_str()],
                OFlags::RDONLY | OFlags::DIRECTORY,
                Mode::empty(),
            )
            .map_err(|e| Error::io(self.path.join(&name), e.into()))?;
            let handle = self.child(fd, &[name.as_str()]);
            return Ok((name, handle));
        }
    }

    /// Rename the entry `from` to `to` in this directory unless `to` exists
    /// (`renameat2(RENAME_NOREPLACE)`). Returns false when `to` exists.
    pub(crate) fn rename_new(&self, from: &str, to: &str) -> Result<bool> {
        check_name(OsStr::new(from))?;
        check_name(OsStr::new(to))?;
        match rustix::fs::renameat_with(&self.fd, from, &self.fd, to, RenameFlags::NOREPLACE) {
            Ok(()) => Ok(true),
            Err(Errno::EXIST) | Err(Errno::NOTEMPTY) => Ok(false),
            Err(e) => Err(Error::io(self.path.join(to), e.into())),
        }
    }

    /// Remove the entry `name` of this directory and, for a directory, everything in
    /// it, beneath this handle (symlinks are removed, never followed).
    pub(crate) fn remove_tree(&self, name: &OsStr) -> Result<()> {
        check_name(name)?;
        let at = || self.path.join(name);
        match rustix::fs::unlinkat(&self.fd, name, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => return Ok(()),
            Err(Errno::ISDIR) | Err(Errno::PERM) => {}
            Err(e) => return Err(Error::io(at(), e.into())),
        }
        let fd = rustix::fs::openat(
            &self.fd,
            name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| Error::io(at(), e.into()))?;
        let sub = DirHandle { fd, path: at() };
        for entry in sub.entries()? {
            sub.remove_tree(&entry.name)?;
        }
        match rustix::fs::unlinkat(&self.fd, name, AtFlags::REMOVEDIR) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(Error::io(at(), e.into())),
        }
    }

    /// fsync the directory (after a rename in it).
    pub(crate) fn sync(&self) -> Result<()> {
        rustix::fs::fsync(&self.fd).map_err(|e| Error::io(&self.path, e.into()))
    }

    /// Replace the file `name` in this directory with `bytes` atomically: a temp file
    /// created in this directory (`O_EXCL`), written, fsynced, `renameat` over `name`,
    /// the directory fsynced. Only a regular file is ever replaced: a symlink, directory,
    /// FIFO, device or socket named `name` is refused (field `field`). Returns whether a
    /// file was replaced.
    pub(crate) fn write_atomic(&self, name: &OsStr, bytes: &[u8], field: &str) -> Result<bool> {
        check_name(name)?;
        let target = self.path.join(name);
        let replaced = match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile => true,
            Ok(st) => {
                return Err(Error::invalid(
                    field,
                    format!(
                        "{} is {}, which is never replaced: remove it or write to another path",
                        target.display(),
                        kind_name(FileType::from_raw_mode(st.st_mode))
                    ),
                ));
            }
            Err(Errno::NOENT) => false,
            Err(e) => return Err(Error::io(&target, e.into())),
        };
        let (tmp, mut file) = loop {
            let tmp = temp_name("cairn-");
            match self.create_new(OsStr::new(&tmp)) {
                Ok(f) => break (tmp, f),
                Err(Error::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::AlreadyExists =>
                {
                    continue;
                }
                Err(e) => return Err(e),
            }
        };
        let written = file
            .write_all(bytes)
            .and_then(|_| file.sync_all())
            .map_err(|e| Error::io(self.path.join(&tmp), e))
            .and_then(|_| {
                rustix::fs::renameat(&self.fd, tmp.as_str(), &self.fd, name)
                    .map_err(|e| Error::io(&target, e.into()))
            });
        if let Err(e) = written {
            let _ = rustix::fs::unlinkat(&self.fd, tmp.as_str(), AtFlags::empty());
            return Err(e);
        }
        self.sync()?;
        Ok(replaced)
    }
}

/// A file opened and checked by [`DirHandle::open_file`].
#[derive(Debug)]
pub(crate) struct OpenFile {
    file: File,
    meta: std::fs::Metadata,
    shown: String,
    field: String,
    cap: u64,
}

impl OpenFile {
    /// The `fstat` of the open file (taken when it was opened).
    pub(crate) fn metadata(&self) -> &std::fs::Metadata {
        &self.meta
    }

    /// The open file, to read or copy from. Read at most the cap (see
    /// [`OpenFile::read_capped`]).
    pub(crate) fn file(&self) -> &File {
        &self.file
    }

    /// Read the whole file through a bound of cap + 1 bytes: a file that grew past the
    /// cap since it was opened is refused, never read to the end.
    pub(crate) fn read_capped(self) -> Result<Vec<u8>> {
        let cap = self.cap;
        let mut bytes = Vec::with_capacity(self.meta.len().min(cap) as usize);
        (&self.file)
            .take(cap.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|e| {
                Error::invalid(&self.field, format!("{} cannot be read: {e}", self.shown))
            })?;
        if bytes.len() as u64 > cap {
            return Err(Error::invalid(
                &self.field,
                format!(
                    "{} grew past {cap} bytes while it was read; at most {cap} bytes are read",
                    self.shown
                ),
            ));
        }
        Ok(bytes)
    }
}

/// Write a CLI output file (`--out PATH`) without ever replacing anything but a regular
/// file: a FIFO or a device (`/dev/null`, `/dev/stdout`) is written to directly, a
/// directory or socket is refused, a regular file (or a new one) is replaced atomically
/// through [`DirHandle::write_atomic`] in its directory. A symlink is resolved first.
pub(crate) fn write_output(path: &Path, bytes: &[u8]) -> Result<()> {
    let refuse = |what: &str| {
        Err(Error::invalid(
            "out",
            format!(
                "{} is {what}; give the path of a file to write (or /dev/stdout)",
                path.display()
            ),
        ))
    };
    let target = match std::fs::metadata(path) {
        Ok(m) => {
            let kind = std_kind(m.file_type());
            match kind {
                FileType::RegularFile => {
                    std::fs::canonicalize(path).map_err(|e| Error::io(path, e))?
                }
                FileType::Directory | FileType::Socket | FileType::Unknown => {
                    return refuse(kind_name(kind));
                }
                _ => {
                    let mut out = std::fs::OpenOptions::new()
                        .write(true)
                        .open(path)
                        .map_err(|e| Error::io(path, e))?;
                    return out.write_all(bytes).map_err(|e| Error::io(path, e));
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if std::fs::symlink_metadata(path).is_ok() {
                return refuse("a symlink whose target does not exist");
            }
            path.to_path_buf()
        }
        Err(e) => return Err(Error::io(path, e)),
    };
    let Some(name) = target.file_name() else {
        return refuse("not a file name");
    };
    let parent = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let fd = rustix::fs::open(
        parent,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| Error::io(parent, e.into()))?;
    let dir = DirHandle {
        fd,
        path: parent.to_path_buf(),
    };
    dir.write_atomic(name, bytes, "out").map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(root.join("docs/tickets")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(root.join("docs/a.md"), "a").unwrap();
        std::fs::write(outside.join("secret.md"), "s").unwrap();
        (dir, root, outside)
    }

    fn shape_err(rel: &str) -> String {
        let e = relative_components(rel, "path").unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::InvalidInput, "{e}");
        e.to_string()
    }

    fn open_err(h: &DirHandle, rel: &str) -> String {
        let e = h.open_file(rel, "path", 1024).unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::InvalidInput, "{e}");
        e.to_string()
    }

    fn read(h: &DirHandle, rel: &str) -> Vec<u8> {
        h.open_file(rel, "path", 1024)
            .unwrap()
            .expect("exists")
            .read_capped()
            .unwrap()
    }

    #[test]
    fn shapes_are_checked_before_the_filesystem() {
        assert!(shape_err("../outside/secret.md").contains(".."));
        assert!(shape_err("docs/../docs/a.md").contains(".."));
        assert!(shape_err("/etc/passwd").contains("absolute"));
        assert!(shape_err("docs/a\0.md").contains("NUL"));
        assert!(shape_err("").contains("empty"));
        assert!(shape_err("./.").contains("root itself"));
        assert!(shape_err(&format!("docs/{}.md", "x".repeat(256))).contains("at most 255"));
        assert!(shape_err(&"d/".repeat(2100)).contains("at most 4096"));
        assert_eq!(
            relative_components("./docs//a.md", "path").unwrap(),
            ["docs", "a.md"]
        );
        assert!(starts_with_parts(
            &["docs", "tickets", "a"],
            &["docs", "tickets"]
        ));
        assert!(!starts_with_parts(
            &["docs", "ticketsx"],
            &["docs", "tickets"]
        ));
        assert!(!starts_with_parts(&["docs"], &["docs", "tickets"]));
    }

    #[test]
    fn files_open_beneath_the_root_and_symlinks_are_refused_wherever_they_lead() {
        let (_d, root, outside) = setup();
        symlink(&outside, root.join("docs/escape")).unwrap();
        symlink(outside.join("secret.md"), root.join("docs/leaf.md")).unwrap();
        symlink(root.join("docs"), root.join("alias")).unwrap();
        let h = DirHandle::open_root(&root).unwrap();
        assert_eq!(read(&h, "docs/a.md"), b"a");
        assert_eq!(read(&h, "./docs/a.md"), b"a");
        let e = open_err(&h, "docs/escape/secret.md");
        assert!(e.contains("docs/escape is a symlink"), "{e}");
        assert!(open_err(&h, "docs/leaf.md").contains("docs/leaf.md is a symlink"));
        // Even a symlink that stays inside the root is not followed.
        assert!(open_err(&h, "alias/a.md").contains("alias is a symlink"));
        assert!(
            h.open_file("docs/missing.md", "path", 10)
                .unwrap()
                .is_none()
        );
        assert!(open_err(&h, "docs/a.md/x").contains("not a directory"));
        // probe: the same refusals without opening; a missing path is fine.
        assert!(h.probe(&["docs", "escape", "new.md"], "x", "path").is_err());
        assert!(h.probe(&["docs", "new", "new.md"], "x", "path").is_ok());
        let e = DirHandle::open_root(&root.join("missing")).unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::FailedPrecondition);
    }

    #[test]
    fn the_component_walk_refuses_what_openat2_refuses() {
        let (_d, root, outside) = setup();
        symlink(&outside, root.join("docs/escape")).unwrap();
        symlink(outside.join("secret.md"), root.join("docs/leaf.md")).unwrap();
        let h = DirHandle::open_root(&root).unwrap();
        let fd = h.fd.as_fd();
        let rd = OFlags::RDONLY | OFlags::NONBLOCK;
        assert!(walk_open(fd, &["docs", "a.md"], rd, Mode::empty()).is_ok());
        for parts in [&["docs", "escape", "secret.md"][..], &["docs", "leaf.md"]] {
            assert_eq!(
                walk_open(fd, parts, rd, Mode::empty()).unwrap_err(),
                Errno::LOOP,
                "{parts:?}"
            );
            assert_eq!(
                walk_open(fd, parts, OFlags::PATH, Mode::empty()).unwrap_err(),
                Errno::LOOP,
                "{parts:?}"
            );
            assert_eq!(
                open_beneath(fd, parts, rd, Mode::empty()).unwrap_err(),
                Errno::LOOP
            );
        }
        assert_eq!(
            walk_open(fd, &["docs", "a.md", "x"], rd, Mode::empty()).unwrap_err(),
            Errno::NOTDIR
        );
    }

    #[test]
    fn special_files_hard_links_and_sizes_are_refused() {
        let (_d, root, outside) = setup();
        let h = DirHandle::open_root(&root).unwrap();
        // A FIFO: the open does not block, the check refuses it.
        rustix::fs::mkfifoat(h.fd.as_fd(), "docs/pipe.md", Mode::from_raw_mode(0o644)).unwrap();
        assert!(open_err(&h, "docs/pipe.md").contains("FIFO"));
        // A hard link to a file outside: more than one link.
        std::fs::hard_link(outside.join("secret.md"), root.join("docs/hard.md")).unwrap();
        let e = open_err(&h, "docs/hard.md");
        assert!(e.contains("2 hard links"), "{e}");
        // A directory is not a file.
        assert!(open_err(&h, "docs/tickets").contains("a directory"));
        // Over the cap.
        std::fs::write(root.join("docs/big.md"), vec![b'x'; 2000]).unwrap();
        assert!(open_err(&h, "docs/big.md").contains("2000 bytes"));
        // A file that grows after the check is read only to cap + 1, then refused.
        let f = h.open_file("docs/a.md", "path", 4).unwrap().unwrap();
        std::fs::write(root.join("docs/a.md"), "abcdefgh").unwrap();
        let e = f.read_capped().unwrap_err();
        assert!(e.to_string().contains("grew past 4 bytes"), "{e}");
    }

    #[test]
    fn a_character_device_is_refused_without_reading_it() {
        let (_d, root, _) = setup();
        let h = DirHandle::open_root(&root).unwrap();
        // A device node inside the root needs CAP_MKNOD; a bind of /dev/zero is not
        // possible either without privileges, so skip the node when we cannot make it.
        let made = rustix::fs::mknodat(
            h.fd.as_fd(),
            "docs/zero.md",
            FileType::CharacterDevice,
            Mode::from_raw_mode(0o644),
            rustix::fs::makedev(1, 5),
        );
        match made {
            Ok(()) => assert!(open_err(&h, "docs/zero.md").contains("character device")),
            Err(e) => assert_eq!(e, Errno::PERM, "mknod failed unexpectedly"),
        }
    }

    #[test]
    fn directories_are_created_and_files_replaced_beneath_the_handle() {
        let (_d, root, outside) = setup();
        let h = DirHandle::open_root(&root).unwrap();
        let d = h
            .create_dirs(&["data", "memory", "x"], "data/memory/x", "dir")
            .unwrap();
        assert!(root.join("data/memory/x").is_dir());
        assert!(!d.write_atomic(OsStr::new("m.md"), b"one", "f").unwrap());
        assert!(d.write_atomic(OsStr::new("m.md"), b"two", "f").unwrap());
        assert_eq!(
            std::fs::read(root.join("data/memory/x/m.md")).unwrap(),
            b"two"
        );
        // No temp file is left behind.
        assert_eq!(
            std::fs::read_dir(root.join("data/memory/x"))
                .unwrap()
                .count(),
            1
        );
        // A symlinked component is refused and nothing is created outside.
        symlink(&outside, root.join("data/memory/y")).unwrap();
        let e = h
            .create_dirs(&["data", "memory", "y", "z"], "data/memory/y/z", "dir")
            .unwrap_err();
        assert!(e.to_string().contains("symlink"), "{e}");
        assert!(!outside.join("z").exists());
        // Only a regular file is ever replaced.
        symlink(outside.join("secret.md"), root.join("data/memory/x/l.md")).unwrap();
        rustix::fs::mkfifoat(d.fd.as_fd(), "p.md", Mode::from_raw_mode(0o644)).unwrap();
        for name in ["l.md", "p.md"] {
            let e = d.write_atomic(OsStr::new(name), b"x", "f").unwrap_err();
            assert_eq!(e.kind(), crate::error::ErrorKind::InvalidInput, "{e}");
        }
        assert_eq!(std::fs::read(outside.join("secret.md")).unwrap(), b"s");
        assert!(
            std::fs::symlink_metadata(root.join("data/memory/x/p.md"))
                .unwrap()
                .file_type()
                .is_fifo()
        );
        // Staging: a temp directory renamed into place only when the name is free.
        let (tmp, staging) = d.create_temp_dir("t-").unwrap();
        staging.create_new(OsStr::new("f")).unwrap();
        assert!(d.rename_new(&tmp, "placed").unwrap());
        let (tmp2, _) = d.create_temp_dir("t-").unwrap();
        assert!(!d.rename_new(&tmp2, "placed").unwrap());
        d.remove_tree(OsStr::new(&tmp2)).unwrap();
        d.remove_tree(OsStr::new("placed")).unwrap();
        let names: Vec<_> = d.entries().unwrap().into_iter().map(|e| e.name).collect();
        assert_eq!(names, ["l.md", "m.md", "p.md"]);
    }

    #[test]
    fn outputs_never_replace_special_files() {
        let (_d, root, _) = setup();
        // A FIFO output is written to, not replaced (a reader drains it).
        let fifo = root.join("out.fifo");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, Mode::from_raw_mode(0o644)).unwrap();
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        write_output(&fifo, b"[1]").unwrap();
        assert_eq!(reader.join().unwrap(), b"[1]");
        assert!(
            std::fs::symlink_metadata(&fifo)
                .unwrap()
                .file_type()
                .is_fifo()
        );
        // /dev/null stays a character device.
        write_output(Path::new("/dev/null"), b"[]").unwrap();
        assert!(
            std::fs::symlink_metadata("/dev/null")
                .unwrap()
                .file_type()
                .is_char_device()
        );
        // A directory is refused; a regular file is replaced; a new file is created.
        let e = write_output(&root.join("docs"), b"x").unwrap_err();
        assert!(e.to_string().contains("a directory"), "{e}");
        write_output(&root.join("docs/a.md"), b"new").unwrap();
        assert_eq!(std::fs::read(root.join("docs/a.md")).unwrap(), b"new");
        write_output(&root.join("docs/b.json"), b"b").unwrap();
        assert_eq!(std::fs::read(root.join("docs/b.json")).unwrap(), b"b");
        // Through a symlink to a regular file: the file is replaced, the link kept.
        symlink(root.join("docs/b.json"), root.join("link.json")).unwrap();
        write_output(&root.join("link.json"), b"c").unwrap();
        assert_eq!(std::fs::read(root.join("docs/b.json")).unwrap(), b"c");
        assert!(
            std::fs::symlink_metadata(root.join("link.json"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }
}
