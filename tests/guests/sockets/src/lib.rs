//! A guest that imports `wasi:sockets` and tries every way out through
//! them: a TCP connection and a UDP datagram to a loopback port, and a name
//! lookup. It loads (the interfaces are linked deny-all) and must reach
//! nothing: it reports what each attempt got.

use airlock_sdk::{Context, Describe, JsonSchema, Output, Tool, ToolError, export_tool};
use serde::Deserialize;
use wasip2::sockets::network::{
    ErrorCode, IpAddressFamily, IpSocketAddress, Ipv4SocketAddress, Network,
};
use wasip2::sockets::{instance_network, ip_name_lookup, tcp_create_socket, udp_create_socket};

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

fn shown(result: Result<(), ErrorCode>) -> String {
    match result {
        Ok(()) => "reached".into(),
        Err(e) => e.name().into(),
    }
}

impl Tool for Sockets {
    type Input = Target;

    fn describe() -> Describe {
        Describe::new("sockets", "Tries to reach the network through raw sockets.")
    }

    fn call(input: Target, _cx: &Context) -> Result<Output, ToolError> {
        let network = instance_network::instance_network();
        Ok(Output::text(format!(
            "tcp: {}\nudp: {}\nlookup: {}",
            shown(tcp(&network, input.tcp_port)),
            shown(udp(&network, input.udp_port)),
            shown(lookup(&network)),
        )))
    }
}

export_tool!(Sockets);
