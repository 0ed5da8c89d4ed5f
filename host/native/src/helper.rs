//! The helper on Linux. Three processes, each single-threaded:
//!
//! - the helper itself, as root, joins a pids cgroup when it can make one
//!   (`pids`), makes new user, mount, pid and network namespaces, maps its
//!   own uid and gid (so file owners, and git's ownership check, look as
//!   outside), forks, waits and exits with the program's status;
//! - its child is pid 1 of the new pid namespace: it builds the program's
//!   root (the system's runtime, the grants and a private `/tmp`, bound at
//!   their own paths onto a tmpfs) and pivots into it, then forks the
//!   program and reaps; when it exits the kernel kills every process left
//!   in the namespace, `setsid` or not;
//! - the program's process sets its rlimits, drops every capability,
//!   restricts itself with Landlock and seccomp and executes the program
//!   with a clean environment.
//!
//! A helper started ahead of its program (a spare, [`crate::Helper::start`])
//! does what needs no plan first: the binary is loaded and, unless it must
//! join a pids cgroup (named after the plan) before them, the namespaces
//! are made; then it reads its plan from stdin ([`spare`]).
//!
//! A step that fails ends the helper with status 125 and a message that
//! names it ([`crate::fail`]).

use crate::plan::{ETC, Grant, Plan, SYSTEM};
use crate::{READY, fail, proxy};
use std::ffi::{CString, OsStr};
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

mod landlock;
mod limits;
mod network;
mod pids;
mod seccomp;

/// Runs `plan` as the helper; never returns.
pub(crate) fn enter(plan: Plan) -> ! {
    let host = Host::watch();
    let pids = pids::enter(&plan);
    ignore_termination();
    make_namespaces();
    run(&plan, &host, pids)
}

/// Runs as a spare: joins the pids cgroup `group` (as root; bounded at
/// the default processes until the plan says) and makes the namespaces,
/// then waits for the plan on stdin (its length as eight little-endian
/// bytes, then its JSON; what follows is the program's input). Never
/// returns; a host that goes away before sending a plan ends it.
pub(crate) fn spare(group: &OsStr) -> ! {
    let host = Host::watch();
    ignore_termination();
    let pids = pids::enter_named(group, crate::Limits::default().processes);
    make_namespaces();
    let Some(plan) = read_plan() else {
        // The host let the spare go, or went.
        pids::leave(pids);
        std::process::exit(125)
    };
    if let Some(group) = &pids
        && let Err(e) = pids::bound(group, plan.confinement.limits.processes)
    {
        fail(&format!("cannot bound the processes: {e}"));
    }
    run(&plan, &host, pids)
}

/// The plan a spare is sent on stdin, read without reading past it;
/// `None` when stdin ends first.
fn read_plan() -> Option<Plan> {
    use std::io::Read;
    // SAFETY: descriptor 0 is open for the helper's life; ManuallyDrop
    // keeps it so (the program inherits it).
    let mut stdin = std::mem::ManuallyDrop::new(unsafe {
        <fs::File as std::os::fd::FromRawFd>::from_raw_fd(0)
    });
    let mut length = [0; 8];
    stdin.read_exact(&mut length).ok()?;
    let length = usize::try_from(u64::from_le_bytes(length)).unwrap_or(usize::MAX);
    if length > crate::PLAN_BYTES {
        fail("the helper's plan is too long");
    }
    let mut text = vec![0; length];
    if let Err(e) = stdin.read_exact(&mut text) {
        fail(&format!("the helper's plan was cut short: {e}"));
    }
    Some(crate::parse_plan(&text))
}

/// New user, mount, pid and network namespaces, this process's uid and
/// gid mapped to themselves.
fn make_namespaces() {
    // SAFETY: getuid and getgid cannot fail and touch no memory of ours.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let namespaces =
        libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWNET;
    // SAFETY: unshare takes flags only; the helper is single-threaded, as
    // a new user namespace requires.
    if unsafe { libc::unshare(namespaces) } != 0 {
        fail(&format!(
            "user namespaces are not available ({}); native programs need them",
            std::io::Error::last_os_error()
        ));
    }
    let maps = [
        ("/proc/self/setgroups", "deny".to_string()),
        ("/proc/self/uid_map", format!("{uid} {uid} 1")),
        ("/proc/self/gid_map", format!("{gid} {gid} 1")),
    ];
    for (file, map) in maps {
        if let Err(e) = fs::write(file, map) {
            fail(&format!("cannot write {file}: {e}"));
        }
    }
}

/// In the namespaces: starts pid 1, which runs the program, and exits with
/// its status. The pids cgroup is left to the host to remove (moving out
/// would wait as joining does) unless the host has gone.
fn run(plan: &Plan, host: &Host, pids: Option<pids::Group>) -> ! {
    // Pid 1 holds the read end: it ends when the helper dies, which is how
    // pid 1 sees a death that came before its PR_SET_PDEATHSIG.
    let mut alive = [0; 2];
    // SAFETY: `alive` is two writable descriptors' worth of space.
    if unsafe { libc::pipe2(alive.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        fail(&format!(
            "cannot make a pipe: {}",
            std::io::Error::last_os_error()
        ));
    }
    let init = fork();
    if init == 0 {
        self::init(plan, alive);
    }
    let status = host.wait_for(init);
    if host.gone() {
        pids::leave(pids);
    }
    std::process::exit(status)
}

/// The process that started the helper (the host), watched so that the
/// program goes when it goes, however it died: a pidfd, readable once it
/// has exited. (The parent-death signal would fire when the host's
/// *thread* that started the helper exits, which a thread pool does at
/// any time.)
struct Host(Option<libc::c_int>);

impl Host {
    fn watch() -> Host {
        // SAFETY: getppid cannot fail.
        let parent = unsafe { libc::getppid() };
        let fd = pidfd(parent);
        // SAFETY: as above.
        if fd.is_some() && unsafe { libc::getppid() } != parent {
            // The host died before the pidfd named it.
            std::process::exit(137);
        }
        Host(fd)
    }

    /// Whether the host has exited (never known without pidfds).
    fn gone(&self) -> bool {
        let Some(fd) = self.0 else { return false };
        let mut host = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, not waited on.
        unsafe { libc::poll(&mut host, 1, 0) == 1 }
    }

    /// Waits for `child` (pid 1) as [`wait_for`] does, killing it (and so
    /// its namespace) first if the host exits meanwhile. Without pidfds
    /// (Linux before 5.3), it only waits.
    fn wait_for(&self, child: libc::pid_t) -> i32 {
        let (Some(host), Some(child_fd)) = (self.0, pidfd(child)) else {
            return wait_for(child);
        };
        loop {
            let mut fds = [host, child_fd].map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            });
            // SAFETY: two valid pollfds, waiting without a time limit.
            if unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } < 0 {
                continue;
            }
            if fds[0].revents != 0 {
                // SAFETY: kill with a pid and a signal.
                unsafe { libc::kill(child, libc::SIGKILL) };
            }
            if fds[0].revents != 0 || fds[1].revents != 0 {
                return wait_for(child);
            }
        }
    }
}

/// A pidfd for `pid`, if the kernel has them.
fn pidfd(pid: libc::pid_t) -> Option<libc::c_int> {
    // SAFETY: pidfd_open takes a pid and flags.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    libc::c_int::try_from(fd).ok().filter(|fd| *fd >= 0)
}

/// Removes the pids cgroup `name` once its helper has exited (a helper
/// leaves its cgroup only when its host has gone first). One whose
/// processes are still being torn down (a helper killed a moment ago
/// goes before its pid 1 and program) is tried again on a thread of its
/// own, for a second at most.
pub(crate) fn forget_pids(name: &OsStr) {
    let busy = |group: &PathBuf| {
        fs::remove_dir(group).is_err_and(|e| e.raw_os_error() == Some(libc::EBUSY))
    };
    let mut left: Vec<PathBuf> = pids::parents()
        .into_iter()
        .map(|parent| parent.join(name))
        .filter(busy)
        .collect();
    if left.is_empty() {
        return;
    }
    std::thread::spawn(move || {
        for _ in 0..100 {
            std::thread::sleep(std::time::Duration::from_millis(10));
            left.retain(busy);
            if left.is_empty() {
                return;
            }
        }
    });
}

/// The pid namespace's first process: builds the root, starts the program
/// and reaps until it exits.
fn init(plan: &Plan, [alive, helper_end]: [libc::c_int; 2]) -> ! {
    // SAFETY: prctl with integer arguments only; closing our copy of the
    // pipe's write end, which nothing else here uses.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        libc::close(helper_end);
    }
    let mut poll = libc::pollfd {
        fd: alive,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no waiting.
    if unsafe { libc::poll(&mut poll, 1, 0) } != 0 {
        // The helper died before the death signal was set.
        std::process::exit(137);
    }
    if let Err(e) = build_root(plan) {
        fail(&e);
    }
    let proxy_port = match plan.confinement.proxy {
        Some(_) => match network::forwarder() {
            Ok(port) => Some(port),
            Err(e) => fail(&e),
        },
        None => None,
    };
    let program = fork();
    if program == 0 {
        run_program(plan, proxy_port);
    }
    std::process::exit(wait_for(program))
}

/// Waits for `child`, reaping whatever else exits meanwhile (orphans come
/// to pid 1), and returns its status as a shell gives it.
fn wait_for(child: libc::pid_t) -> i32 {
    loop {
        let mut status = 0;
        // SAFETY: `status` is a valid place for waitpid to write.
        let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
        if pid == child {
            return if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                128 + libc::WTERMSIG(status)
            };
        }
        if pid < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            fail(&format!(
                "lost the program: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
}

fn fork() -> libc::pid_t {
    // SAFETY: the helper is single-threaded, so the child may go on
    // running Rust code, allocating included.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        fail(&format!("cannot fork: {}", std::io::Error::last_os_error()));
    }
    pid
}

/// SIGTERM, SIGINT and SIGHUP sent to the process group reach the program
/// itself: the helper and pid 1 only wake (a handler, which `execve`
/// resets, rather than ignoring, which the program would inherit).
fn ignore_termination() {
    extern "C" fn wake(_: libc::c_int) {}
    for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        // SAFETY: `wake` is async-signal-safe (it does nothing).
        unsafe { libc::signal(signal, wake as *const () as libc::sighandler_t) };
    }
}

/// Builds the program's root on `plan.root` and pivots into it.
fn build_root(plan: &Plan) -> Result<(), String> {
    let root = &plan.root;
    mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    )?;
    let nosuid = libc::MS_NOSUID | libc::MS_NODEV;
    mount(
        Some(Path::new("tmpfs")),
        root,
        Some("tmpfs"),
        nosuid,
        Some("mode=0755,size=1m"),
    )?;
    for system in SYSTEM {
        let path = Path::new(system);
        match fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = fs::read_link(path).map_err(|e| format!("{system}: {e}"))?;
                std::os::unix::fs::symlink(target, inside(root, path))
                    .map_err(|e| format!("cannot link {system}: {e}"))?;
            }
            Ok(_) => bind(path, &inside(root, path), false)?,
            Err(_) => {}
        }
    }
    for etc in ETC {
        if Path::new(etc).exists() {
            bind(Path::new(etc), &inside(root, Path::new(etc)), false)?;
        }
    }
    let dev = inside(root, Path::new("/dev"));
    fs::create_dir(&dev).map_err(|e| format!("cannot make /dev: {e}"))?;
    for device in ["null", "zero", "full", "random", "urandom"] {
        let device = Path::new("/dev").join(device);
        bind(&device, &inside(root, &device), true)?;
    }
    for (link, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        std::os::unix::fs::symlink(target, dev.join(link))
            .map_err(|e| format!("cannot link /dev/{link}: {e}"))?;
    }
    let proc = inside(root, Path::new("/proc"));
    fs::create_dir(&proc).map_err(|e| format!("cannot make /proc: {e}"))?;
    let noexec = nosuid | libc::MS_NOEXEC;
    mount(Some(Path::new("proc")), &proc, Some("proc"), noexec, None)?;
    let tmp = inside(root, Path::new("/tmp"));
    fs::create_dir(&tmp).map_err(|e| format!("cannot make /tmp: {e}"))?;
    let size = format!("mode=1777,size={}", plan.confinement.limits.tmp_bytes);
    mount(
        Some(Path::new("tmpfs")),
        &tmp,
        Some("tmpfs"),
        nosuid,
        Some(&size),
    )?;
    for grant in grants(plan) {
        bind(&grant.host, &inside(root, &grant.inside), grant.writable)?;
    }
    if let Some(socket) = &plan.confinement.proxy {
        bind(socket, &inside(root, Path::new(proxy::INSIDE)), false)?;
    }
    remount_read_only(root, nosuid)?;
    pivot(root)?;
    std::env::set_current_dir(&plan.confinement.cwd).map_err(|e| {
        format!(
            "cannot work in {}: {e} (the working directory must lie in a grant)",
            plan.confinement.cwd.display()
        )
    })
}

/// The grants, outer paths first (a grant inside another is bound over
/// it), the program itself among the read ones when no grant or system
/// directory holds it.
fn grants(plan: &Plan) -> Vec<Grant> {
    let mut grants = plan.confinement.grants.clone();
    let program = &plan.program;
    let held = SYSTEM.iter().any(|s| program.starts_with(s))
        || grants.iter().any(|g| program.starts_with(&g.inside));
    if !plan.probe && !held {
        grants.push(Grant {
            host: program.clone(),
            inside: program.clone(),
            writable: false,
        });
    }
    grants.sort_by_key(|g| g.inside.components().count());
    grants
}

/// `path` under `root`.
fn inside(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

/// Binds `path` at `target`, read-only unless `writable`.
fn bind(path: &Path, target: &Path, writable: bool) -> Result<(), String> {
    let shown = path.display();
    let meta = fs::metadata(path).map_err(|e| format!("cannot grant {shown}: {e}"))?;
    if meta.is_dir() {
        fs::create_dir_all(target).map_err(|e| format!("cannot place {shown}: {e}"))?;
    } else if !target.exists() {
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent).map_err(|e| format!("cannot place {shown}: {e}"))?;
        }
        fs::File::create(target).map_err(|e| format!("cannot place {shown}: {e}"))?;
    }
    mount(Some(path), target, None, libc::MS_BIND | libc::MS_REC, None)?;
    let mut flags = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_NOSUID | locked_flags(target)?;
    if !writable {
        flags |= libc::MS_RDONLY;
    }
    mount(None, target, None, flags, None)
}

/// The flags a bind mount in a user namespace must keep when remounted
/// (the kernel refuses to clear those the outer mount has).
fn locked_flags(target: &Path) -> Result<libc::c_ulong, String> {
    let path = c_path(target)?;
    // SAFETY: a zeroed statvfs is a valid value to be overwritten.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a NUL-terminated path and `stat` a valid place.
    if unsafe { libc::statvfs(path.as_ptr(), &mut stat) } != 0 {
        return Err(format!(
            "cannot read the mount flags of {}: {}",
            target.display(),
            std::io::Error::last_os_error()
        ));
    }
    let pairs = [
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ];
    Ok(pairs
        .iter()
        .filter(|(st, _)| stat.f_flag & st == *st)
        .fold(0, |flags, (_, ms)| flags | ms))
}

/// Makes the root's own tmpfs read-only, once everything is placed on it.
fn remount_read_only(root: &Path, flags: libc::c_ulong) -> Result<(), String> {
    mount(
        None,
        root,
        None,
        libc::MS_REMOUNT | libc::MS_RDONLY | flags,
        None,
    )
}

/// Makes `root` the root, the old one detached.
fn pivot(root: &Path) -> Result<(), String> {
    std::env::set_current_dir(root).map_err(|e| format!("cannot enter the root: {e}"))?;
    let dot = c".";
    // SAFETY: both arguments are NUL-terminated paths.
    if unsafe { libc::syscall(libc::SYS_pivot_root, dot.as_ptr(), dot.as_ptr()) } != 0 {
        return Err(format!(
            "cannot pivot into the root: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: a NUL-terminated path and integer flags.
    if unsafe { libc::umount2(dot.as_ptr(), libc::MNT_DETACH) } != 0 {
        return Err(format!(
            "cannot detach the old root: {}",
            std::io::Error::last_os_error()
        ));
    }
    std::env::set_current_dir("/").map_err(|e| format!("cannot enter the root: {e}"))
}

fn c_path(path: &Path) -> Result<CString, String> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("{} holds a NUL byte", path.display()))
}

fn mount(
    source: Option<&Path>,
    target: &Path,
    kind: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> Result<(), String> {
    let source = source.map(c_path).transpose()?;
    let c_target = c_path(target)?;
    let kind = kind.map(|k| CString::new(k).unwrap_or_default());
    let data = data.map(|d| CString::new(d).unwrap_or_default());
    let ptr = |c: &Option<CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    // SAFETY: every pointer is null or a NUL-terminated string that lives
    // across the call.
    let done = unsafe {
        libc::mount(
            ptr(&source),
            c_target.as_ptr(),
            ptr(&kind),
            flags,
            ptr(&data).cast(),
        )
    };
    if done != 0 {
        return Err(format!(
            "cannot mount {}: {}",
            target.display(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// The program's process: limits, privileges, Landlock, seccomp, then the
/// program.
fn run_program(plan: &Plan, proxy_port: Option<u16>) -> ! {
    let confinement = &plan.confinement;
    if let Err(e) = limits::apply(&confinement.limits) {
        fail(&e);
    }
    if let Err(e) = drop_privileges() {
        fail(&e);
    }
    let writable: Vec<PathBuf> = (confinement.grants.iter())
        .filter(|g| g.writable)
        .map(|g| g.inside.clone())
        .collect();
    if let Err(e) = landlock::restrict(&writable, proxy_port) {
        fail(&e);
    }
    if let Err(e) = seccomp::restrict() {
        fail(&e);
    }
    close_inherited();
    if plan.probe {
        println!("{READY}");
        std::process::exit(0);
    }
    let mut command = std::process::Command::new(&plan.program);
    command
        .args(&plan.args)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", "/tmp")
        .env("TMPDIR", "/tmp")
        .env("LANG", "C.UTF-8");
    if let Some(port) = proxy_port {
        let url = format!("http://127.0.0.1:{port}");
        for name in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"] {
            command.env(name, &url).env(name.to_ascii_lowercase(), &url);
        }
    }
    command.envs(&confinement.env);
    let error = command.exec();
    eprintln!(
        "airlock sandbox: cannot run {}: {error}",
        plan.program.display()
    );
    std::process::exit(if error.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    })
}

/// No capability survives into the program, for root inside the
/// namespace too: an empty bounding set, no ambient ones, root's
/// exec-time gains switched off and locked, and `no_new_privs` (setuid
/// bits and file capabilities do nothing).
fn drop_privileges() -> Result<(), String> {
    let error = |what: &str| format!("cannot {what}: {}", std::io::Error::last_os_error());
    for capability in 0..=63 {
        // SAFETY: prctl with integer arguments only.
        let dropped = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, capability, 0, 0, 0) };
        if dropped != 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
            return Err(error("drop capabilities"));
        }
    }
    // SAFETY: prctl with integer arguments only.
    unsafe {
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        ) != 0
        {
            return Err(error("clear ambient capabilities"));
        }
        // SECBIT_NOROOT, SECBIT_NO_SETUID_FIXUP, their locks and
        // SECBIT_KEEP_CAPS_LOCKED.
        if libc::prctl(libc::PR_SET_SECUREBITS, 0x2f, 0, 0, 0) != 0 {
            return Err(error("lock root's capabilities away"));
        }
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(error("set no_new_privs"));
        }
    }
    Ok(())
}

/// Closes every descriptor above the standard three, so nothing of the
/// host's reaches the program.
fn close_inherited() {
    // SAFETY: close_range with integer arguments only.
    unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) };
}
