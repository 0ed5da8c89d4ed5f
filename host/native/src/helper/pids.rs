//! The bound on processes that holds for root too: a pids cgroup the
//! helper joins before it makes its namespaces (root's processes are
//! exempt from `RLIMIT_NPROC`). Made where this process may make one:
//! cgroup v1's pids hierarchy, or a child of its own cgroup in v2.
//!
//! Only the kernel's root needs it. Any other user's `RLIMIT_NPROC`, set
//! inside the call's new user namespace, counts that namespace's processes
//! only (Linux 5.14 and later; before, all the user's processes), so it
//! bounds the one tree. And joining costs: on cgroup v1 moving a
//! process waits for an RCU grace period (7 to 17 ms here when no other
//! move came just before), longer than the rest of the confinement.

use crate::plan::Plan;
use std::ffi::{CString, OsStr};
use std::fs;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// A pids cgroup the helper joined: its parent directory, opened before
/// the namespaces (from a pivoted root it cannot be named), and its name.
pub(super) struct Group {
    parent: fs::File,
    name: CString,
}

/// Joins a new pids cgroup named after the plan's root, bounded at the
/// plan's processes; `None` when none can be made here.
pub(super) fn enter(plan: &Plan) -> Option<Group> {
    enter_named(plan.root.file_name()?, plan.confinement.limits.processes)
}

/// Joins a new pids cgroup `name` bounded at `processes` (plus the helper
/// and pid 1), when this process runs as the kernel's root; `None` when
/// it does not or none can be made here.
pub(super) fn enter_named(name: &OsStr, processes: u64) -> Option<Group> {
    if !kernel_root() {
        return None;
    }
    let name = CString::new(name.as_bytes()).ok()?;
    let pid = std::process::id().to_string();
    for parent in parents() {
        let path = parent.join(OsStr::from_bytes(name.as_bytes()));
        if fs::create_dir(&path).is_err() {
            continue;
        }
        let group = fs::File::open(&parent).map(|parent| Group {
            parent,
            name: name.clone(),
        });
        let joined = group.and_then(|group| {
            bound(&group, processes)?;
            group.write(c"cgroup.procs", &pid)?;
            Ok(group)
        });
        if let Ok(group) = joined {
            return Some(group);
        }
        let _ = fs::remove_dir(&path);
    }
    None
}

/// Bounds the cgroup `group` at `processes` (plus the helper and pid 1).
pub(super) fn bound(group: &Group, processes: u64) -> std::io::Result<()> {
    group.write(c"pids.max", &(processes + 2).to_string())
}

impl Group {
    /// Writes `text` to the cgroup's file `file`.
    fn write(&self, file: &std::ffi::CStr, text: &str) -> std::io::Result<()> {
        let mut path = self.name.as_bytes().to_vec();
        path.push(b'/');
        path.extend_from_slice(file.to_bytes());
        write_at(&self.parent, &CString::new(path)?, text)
    }
}

/// Writes `text` to the file `path` under the directory `dir`.
fn write_at(dir: &fs::File, path: &std::ffi::CStr, text: &str) -> std::io::Result<()> {
    // SAFETY: a directory descriptor we hold and a NUL-terminated path.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            path.as_ptr(),
            libc::O_WRONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    let mut file = unsafe { fs::File::from_raw_fd(fd) };
    file.write_all(text.as_bytes())
}

/// Whether this process runs as the kernel's root, which `RLIMIT_NPROC`
/// exempts: uid 0 here, or any uid this user namespace maps to 0 (and not
/// a container's "root" that maps to an ordinary user).
fn kernel_root() -> bool {
    // SAFETY: getuid cannot fail.
    let uid = u64::from(unsafe { libc::getuid() });
    let Ok(map) = fs::read_to_string("/proc/self/uid_map") else {
        return uid == 0;
    };
    map.lines().any(|line| {
        let mut numbers = line.split_whitespace().map(str::parse::<u64>);
        let (Some(Ok(inside)), Some(Ok(outside)), Some(Ok(count))) =
            (numbers.next(), numbers.next(), numbers.next())
        else {
            return false;
        };
        (inside..inside.saturating_add(count)).contains(&uid) && outside + (uid - inside) == 0
    })
}

/// Moves the helper back out and removes the cgroup, once the program
/// and its namespace are gone.
pub(super) fn leave(group: Option<Group>) {
    let Some(group) = group else { return };
    let _ = write_at(
        &group.parent,
        c"cgroup.procs",
        &std::process::id().to_string(),
    );
    // SAFETY: a directory descriptor we hold and a NUL-terminated name.
    unsafe {
        libc::unlinkat(
            group.parent.as_raw_fd(),
            group.name.as_ptr(),
            libc::AT_REMOVEDIR,
        )
    };
}

/// Where a pids cgroup may be made: v1's hierarchy, v2's own cgroup.
/// Both under this process's own cgroup, so a service manager's bound
/// on the service (systemd's `TasksMax`, its kill on stop) still holds.
pub(super) fn parents() -> Vec<PathBuf> {
    let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let under = |root: &str, path: &str| PathBuf::from(root).join(path.trim_start_matches('/'));
    let v1 = own.lines().find_map(|l| {
        let (_, rest) = l.split_once(':')?;
        let (controllers, path) = rest.split_once(':')?;
        controllers
            .split(',')
            .any(|c| c == "pids")
            .then(|| under("/sys/fs/cgroup/pids", path))
    });
    let v2 = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| under("/sys/fs/cgroup", p));
    v1.into_iter().chain(v2).collect()
}
