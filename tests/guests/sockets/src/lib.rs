//! A guest that imports `wasi:sockets` and `wasi:http`, asks for no network
//! hosts, and tries every way out through them: a TCP connection and a UDP
//! datagram to a loopback port, a name lookup, and an HTTP request to the
//! same TCP port. It loads (the interfaces are linked deny-all) and must
//! reach nothing: it reports what each attempt got, as its error when
//! nothing got through.

use airlock_sdk::{Context, Describe, JsonSchema, Output, Tool, ToolError, export_tool};
use serde::Deserialize;
use wasip2::sockets::network::{
    ErrorCode, IpAddressFamily, IpSocketAddress, Ipv4SocketAddress, Network,
};
use wasip2::sockets::{instance_network, ip_name_lookup, tcp_create_socket, udp_create_socket};

use wasip2::http::outgoing_handler;
use wasip2::http::types::{Fields, OutgoingRequest, Scheme};

/// Where to try to go.
#[derive(Deserialize, JsonSchema)]
struct Target {
    /// A loopback port to connect to.
    tcp_port: u16,
    /// A loopback port to send a datagram to.
    udp_port: u16,
}

struct Sockets;

fn loopback(port: u16) -> IpSocketAddress {
    IpSocketAddress::Ipv4(Ipv4SocketAddress {
        port,
        address: (127, 0, 0, 1),
    })
}

fn tcp(network: &Network, port: u16) -> Result<(), ErrorCode> {
    let socket = tcp_create_socket::create_tcp_socket(IpAddressFamily::Ipv4)?;
    socket.start_connect(network, loopback(port))?;
    loop {
        match socket.finish_connect() {
            Err(ErrorCode::WouldBlock) => socket.subscribe().block(),
            Err(e) => return Err(e),
            Ok(_) => return Ok(()),
        }
    }
}

fn udp(network: &Network, port: u16) -> Result<(), ErrorCode> {
    let socket = udp_create_socket::create_udp_socket(IpAddressFamily::Ipv4)?;
    socket.start_bind(network, loopback(0))?;
    loop {
        match socket.finish_bind() {
            Err(ErrorCode::WouldBlock) => socket.subscribe().block(),
            Err(e) => return Err(e),
            Ok(()) => break,
        }
    }
    let (_, outgoing) = socket.stream(Some(loopback(port)))?;
    outgoing.check_send()?;
    outgoing.send(&[wasip2::sockets::udp::OutgoingDatagram {
        data: b"out".to_vec(),
        remote_address: None,
    }])?;
    Ok(())
}

fn lookup(network: &Network) -> Result<(), ErrorCode> {
    let names = ip_name_lookup::resolve_addresses(network, "localhost")?;
    loop {
        match names.resolve_next_address() {
            Err(ErrorCode::WouldBlock) => names.subscribe().block(),
            Err(e) => return Err(e),
            Ok(_) => return Ok(()),
        }
    }
}

fn http(port: u16) -> Result<(), String> {
    let request = OutgoingRequest::new(Fields::new());
    request
        .set_scheme(Some(&Scheme::Http))
        .map_err(|()| "scheme")?;
    request
        .set_authority(Some(&format!("127.0.0.1:{port}")))
        .map_err(|()| "authority")?;
    request
        .set_path_with_query(Some("/"))
        .map_err(|()| "path")?;
    let pending = outgoing_handler::handle(request, None).map_err(|e| format!("{e:?}"))?;
    pending.subscribe().block();
    match pending.get() {
        Some(Ok(Ok(_))) => Ok(()),
        Some(Ok(Err(e))) => Err(format!("{e:?}")),
        _ => Err("lost".into()),
    }
}

fn shown<E: std::fmt::Display>(result: Result<(), E>) -> String {
    match result {
        Ok(()) => "reached".into(),
        Err(e) => e.to_string(),
    }
}

impl Tool for Sockets {
    type Input = Target;

    fn describe() -> Describe {
        Describe::new(
            "sockets",
            "Tries to reach the network through raw sockets and HTTP.",
        )
    }

    fn call(input: Target, _cx: &Context) -> Result<Output, ToolError> {
        let network = instance_network::instance_network();
        let name = |r: Result<(), ErrorCode>| r.map_err(|e| e.name());
        let attempts = [
            ("tcp", shown(name(tcp(&network, input.tcp_port)))),
            ("udp", shown(name(udp(&network, input.udp_port)))),
            ("lookup", shown(name(lookup(&network)))),
            ("http", shown(http(input.tcp_port))),
        ];
        let report = attempts
            .iter()
            .map(|(what, got)| format!("{what}: {got}"))
            .collect::<Vec<_>>()
            .join("\n");
        if attempts.iter().any(|(_, got)| got == "reached") {
            Ok(Output::text(report))
        } else {
            Err(ToolError::PermissionDenied(report))
        }
    }
}

export_tool!(Sockets);
