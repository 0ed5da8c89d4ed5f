//! The bound on processes that holds for root too: a pids cgroup the
//! helper joins before it makes its namespaces (root's processes are
//! exempt from `RLIMIT_NPROC`). Made where this process may make one:
//! cgroup v1's pids hierarchy, or a child of its own cgroup in v2.

use crate::plan::Plan;
use std::fs;
use std::path::PathBuf;

/// Joins a new pids cgroup bounded at the plan's processes (plus the
/// helper and pid 1); `None` when none can be made here.
pub(super) fn enter(plan: &Plan) -> Option<PathBuf> {
    let name = plan.root.file_name()?;
    let max = plan.confinement.limits.processes + 2;
    let pid = std::process::id().to_string();
    for parent in parents() {
        let group = parent.join(name);
        if fs::create_dir(&group).is_err() {
            continue;
        }
        let joined = fs::write(group.join("pids.max"), max.to_string())
            .and_then(|()| fs::write(group.join("cgroup.procs"), &pid));
        if joined.is_ok() {
            return Some(group);
        }
        let _ = fs::remove_dir(&group);
    }
    None
}

/// Moves the helper back out and removes the cgroup, once the program
/// and its namespace are gone.
pub(super) fn leave(group: Option<PathBuf>) {
    let Some(group) = group else { return };
    if let Some(parent) = group.parent() {
        let _ = fs::write(parent.join("cgroup.procs"), std::process::id().to_string());
    }
    let _ = fs::remove_dir(&group);
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
