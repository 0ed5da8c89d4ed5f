//! A guest that imports `wasi:sockets`: it must fail to load, with an
//! error naming the import, before any of its code runs.

use airlock_sdk::{Context, Describe, JsonSchema, Output, Tool, ToolError, export_tool};
use serde::Deserialize;

/// No input.
#[derive(Deserialize, JsonSchema)]
struct Empty {}

struct Sockets;

impl Tool for Sockets {
    type Input = Empty;

    fn describe() -> Describe {
        Describe::new("sockets", "Tries to open a raw socket.")
    }

    fn call(_input: Empty, _cx: &Context) -> Result<Output, ToolError> {
        let network = wasip2::sockets::instance_network::instance_network();
        let socket = wasip2::sockets::tcp_create_socket::create_tcp_socket(
            wasip2::sockets::network::IpAddressFamily::Ipv4,
        );
        drop(network);
        Ok(Output::text(format!("socket: {}", socket.is_ok())))
    }
}

export_tool!(Sockets);
