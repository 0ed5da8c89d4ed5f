//! The seccomp deny list: what a program has no business calling and
//! that would reach past the namespaces or Landlock. Denied calls fail
//! with EPERM; `clone3` fails with ENOSYS, so C libraries fall back to
//! `clone`, whose flags the filter can read. On x86_64 every x32 system
//! call number fails with EPERM too (the deny list names x86_64's
//! numbers only, and a kernel built with x32 would take the others).

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

const DENIED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_mount_setattr,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_userfaultfd,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_acct,
    libc::SYS_quotactl,
];

/// `clone` flags that make namespaces.
const NAMESPACES: &[libc::c_int] = &[
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWNS,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWCGROUP,
];

#[cfg(target_arch = "x86_64")]
const ARCH: TargetArch = TargetArch::x86_64;
#[cfg(target_arch = "aarch64")]
const ARCH: TargetArch = TargetArch::aarch64;

/// Installs both filters on this process (inherited by the program).
pub(super) fn restrict() -> Result<(), String> {
    let error = |e: seccompiler::BackendError| format!("cannot build the seccomp filter: {e}");
    let mut denied: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|call| (*call, Vec::new())).collect();
    let mut clone = Vec::new();
    for flag in NAMESPACES {
        let flag = *flag as u64;
        let condition = SeccompCondition::new(
            0,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(flag),
            flag,
        )
        .map_err(error)?;
        clone.push(SeccompRule::new(vec![condition]).map_err(error)?);
    }
    denied.insert(libc::SYS_clone, clone);
    let eperm = SeccompAction::Errno(libc::EPERM as u32);
    let deny = SeccompFilter::new(denied, SeccompAction::Allow, eperm, ARCH).map_err(error)?;
    let enosys = SeccompAction::Errno(libc::ENOSYS as u32);
    let clone3 = BTreeMap::from([(libc::SYS_clone3, Vec::new())]);
    let clone3 = SeccompFilter::new(clone3, SeccompAction::Allow, enosys, ARCH).map_err(error)?;
    let mut programs = Vec::new();
    for filter in [deny, clone3] {
        let program: BpfProgram = filter
            .try_into()
            .map_err(|e| format!("cannot compile the seccomp filter: {e}"))?;
        programs.push(program);
    }
    #[cfg(target_arch = "x86_64")]
    programs.push(no_x32());
    for program in programs {
        seccompiler::apply_filter(&program)
            .map_err(|e| format!("cannot install the seccomp filter: {e}"))?;
    }
    Ok(())
}

/// EPERM for every system call number with x32's bit set (the other
/// filters check the architecture: x32 shares x86_64's).
#[cfg(target_arch = "x86_64")]
fn no_x32() -> BpfProgram {
    use seccompiler::sock_filter;
    const X32_BIT: u32 = 0x4000_0000;
    // BPF_LD | BPF_W | BPF_ABS; BPF_JMP | BPF_JGE | BPF_K; BPF_RET | BPF_K.
    let (load, at_least, ret) = (0x20, 0x35, 0x06);
    let errno = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
    let op = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    vec![
        // The system call's number: offset 0 of `seccomp_data`.
        op(load, 0, 0, 0),
        op(at_least, 0, 1, X32_BIT),
        op(ret, 0, 0, errno),
        op(ret, 0, 0, libc::SECCOMP_RET_ALLOW),
    ]
}
