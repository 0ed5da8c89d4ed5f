//! Landlock, inside the new root: everything there readable (it holds
//! only what was bound), the grants the call may write and the private
//! `/tmp` writable, no TCP but to the proxy's loopback port when it has
//! one, no abstract unix sockets or signals outside the program's own
//! processes.

use landlock::{
    ABI, Access, AccessFs, AccessNet, NetPort, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, Scope, path_beneath_rules,
};
use std::path::PathBuf;

/// Restricts this process (and the program) to the new root's view.
pub(super) fn restrict(writable: &[PathBuf], proxy_port: Option<u16>) -> Result<(), String> {
    let abi = ABI::V6;
    let error = |e: landlock::RulesetError| format!("cannot set up Landlock: {e}");
    let devices = ["/dev/null", "/dev/zero", "/dev/full"];
    let mut write = writable.to_vec();
    write.push(PathBuf::from("/tmp"));
    let top: Vec<PathBuf> = std::fs::read_dir("/")
        .map_err(|e| format!("cannot list the root: {e}"))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .collect();
    let status = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .and_then(|r| r.handle_access(AccessNet::from_all(abi)))
        .and_then(|r| r.scope(Scope::from_all(abi)))
        .and_then(|r| r.create())
        .and_then(|r| r.add_rules(path_beneath_rules(["/"], AccessFs::ReadDir)))
        .and_then(|r| r.add_rules(path_beneath_rules(&top, AccessFs::from_read(abi))))
        .and_then(|r| r.add_rules(path_beneath_rules(devices, AccessFs::from_file(abi))))
        .and_then(|r| r.add_rules(path_beneath_rules(&write, AccessFs::from_all(abi))))
        .and_then(|r| {
            r.add_rules(proxy_port.map(|port| Ok(NetPort::new(port, AccessNet::ConnectTcp))))
        })
        .and_then(|r| r.restrict_self())
        .map_err(error)?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err("this kernel does not enforce Landlock; native programs need it".into());
    }
    Ok(())
}
