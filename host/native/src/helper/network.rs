//! The network namespace's one way out: loopback brought up, and a
//! forwarder process listening on a loopback port that joins each
//! connection to the proxy's socket ([`crate::proxy::INSIDE`]).

use crate::proxy;
use std::net::TcpListener;
use std::os::unix::net::UnixStream;

/// Brings loopback up and starts the forwarder; returns its port.
pub(super) fn forwarder() -> Result<u16, String> {
    loopback_up()?;
    let listener = TcpListener::bind("127.0.0.1:0")
        .map_err(|e| format!("cannot listen for the proxy: {e}"))?;
    let port = listener
        .local_addr()
        .map_err(|e| format!("cannot listen for the proxy: {e}"))?
        .port();
    if super::fork() == 0 {
        forward(listener);
    }
    Ok(port)
}

/// The forwarder's process: no capabilities (none held, none to
/// gain), no descriptor but its listener (the program's streams
/// become `/dev/null`), a thread per connection.
fn forward(listener: TcpListener) -> ! {
    use std::os::fd::AsRawFd;
    let kept = listener.as_raw_fd();
    let null = c"/dev/null";
    // SAFETY: open, dup2 and close_range with a NUL-terminated path
    // and integers; `kept` is the listener, which stays open.
    unsafe {
        let fd = libc::open(null.as_ptr(), libc::O_RDWR);
        for standard in 0..3 {
            libc::dup2(fd, standard);
        }
        let (kept, last) = (kept as u32, u32::MAX);
        libc::syscall(libc::SYS_close_range, 3u32, kept - 1, 0u32);
        libc::syscall(libc::SYS_close_range, kept + 1, last, 0u32);
    }
    if let Err(e) = super::drop_privileges().and_then(|()| no_capabilities()) {
        crate::fail(&e);
    }
    for client in listener.incoming() {
        let Ok(client) = client else { continue };
        let _ = std::thread::Builder::new().spawn(move || {
            if let Ok(upstream) = UnixStream::connect(proxy::INSIDE) {
                proxy::splice(client, upstream);
            }
        });
    }
    std::process::exit(0)
}

/// Empties this process's capability sets (a process that does not
/// exec keeps those it has, whatever its bounding set).
fn no_capabilities() -> Result<(), String> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    // _LINUX_CAPABILITY_VERSION_3: two `Data`, for 64 capabilities.
    let header = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let none = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capset reads a valid header and two data records.
    if unsafe { libc::syscall(libc::SYS_capset, &header, none.as_ptr()) } != 0 {
        return Err(format!(
            "cannot drop the forwarder's capabilities: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

fn loopback_up() -> Result<(), String> {
    let error = || {
        format!(
            "cannot bring loopback up: {}",
            std::io::Error::last_os_error()
        )
    };
    // SAFETY: socket takes integers only.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(error());
    }
    // SAFETY: a zeroed ifreq is valid: a name of NULs and no flags.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (to, from) in request.ifr_name.iter_mut().zip(b"lo") {
        *to = *from as libc::c_char;
    }
    // SAFETY: `request` names an interface and has room for its flags;
    // the flags are the union's member SIOCGIFFLAGS fills.
    let done = unsafe {
        libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut request) == 0 && {
            request.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
            libc::ioctl(fd, libc::SIOCSIFFLAGS, &request) == 0
        }
    };
    let result = if done { Ok(()) } else { Err(error()) };
    // SAFETY: closing the socket made above.
    unsafe { libc::close(fd) };
    result
}
