//! [`NetHooks`]: the only way out of the sandbox to the network. Every
//! outgoing `wasi:http` request passes [`NetPolicy::check`] (host grant,
//! tool request, safe methods for read-only calls) before a connection is
//! made, and gets the configured connect and first-byte timeouts. A call
//! without a network grant has no policy, and every request is refused.
//! The guest sees only `HTTP-request-denied`; the first refusal of a call
//! is kept, saying which host and how it could be granted, for the host to
//! add to the error the tool then reports ([`NetHooks::refused`]).

use airlock_core::grants::NetPolicy;
use std::sync::Arc;
use std::time::Duration;
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpHooks};

type BoxedIo = Box<dyn Future<Output = Result<(), HttpError>> + Send>;
type SendResult =
    Box<dyn Future<Output = Result<(http::Response<WasiBody>, BoxedIo), HttpError>> + Send>;

/// The network hooks of one store.
pub(crate) struct NetHooks {
    policy: Option<Arc<NetPolicy>>,
    timeout: Duration,
    tool: Arc<str>,
    refused: Option<String>,
}

impl NetHooks {
    pub(crate) fn new(policy: Option<Arc<NetPolicy>>, timeout: Duration, tool: Arc<str>) -> Self {
        NetHooks {
            policy,
            timeout,
            tool,
            refused: None,
        }
    }

    /// Why the call's first refused request was refused: the request's
    /// origin (scheme, host and port), the reason, and how it could be
    /// granted.
    pub(crate) fn refused(&self) -> Option<&str> {
        self.refused.as_deref()
    }

    fn check(&self, request: &http::Request<WasiBody>) -> Result<(), String> {
        let uri = request.uri();
        let host = uri.host().ok_or("the request has no host")?;
        let Some(policy) = &self.policy else {
            return Err(format!(
                "no network grant covers this call: a tool reaches only hosts its descriptor \
                 asks for and the operator grants (`--allow-host {host}`, or `network = [...]` \
                 under [tools.{}] in airlock.toml), and this one asks for none or was granted none",
                self.tool
            ));
        };
        let port = uri.port_u16().or_else(|| match uri.scheme_str() {
            Some("http") => Some(80),
            Some("https") => Some(443),
            _ => None,
        });
        policy.check(request.method().as_str(), host, port)
    }
}

impl WasiHttpHooks for NetHooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        fut: BoxedIo,
    ) -> SendResult {
        let _ = fut;
        let verdict = self.check(&request);
        if let Err(reason) = &verdict {
            tracing::info!(tool = %self.tool, uri = %request.uri(), %reason, "outgoing request refused");
            if self.refused.is_none() {
                // Scheme, host and port: never the userinfo, path or query,
                // which may carry what the guest should not have sent.
                let uri = request.uri();
                let origin = format!(
                    "{}://{}{}",
                    uri.scheme_str().unwrap_or("http"),
                    uri.host().unwrap_or(""),
                    uri.port().map(|p| format!(":{p}")).unwrap_or_default()
                );
                self.refused = Some(format!(
                    "Airlock refused the tool's {} request to {origin}: {reason}",
                    request.method()
                ));
            }
        }
        let timeout = self.timeout;
        Box::new(async move {
            verdict.map_err(|_| HttpError::HttpRequestDenied)?;
            let mut options = options.unwrap_or_default();
            for t in [
                &mut options.connect_timeout,
                &mut options.first_byte_timeout,
                &mut options.between_bytes_timeout,
            ] {
                *t = Some(t.map_or(timeout, |t| t.min(timeout)));
            }
            use http_body_util::BodyExt;
            let (response, io) =
                wasmtime_wasi_http::default_send_request(request, Some(options)).await?;
            Ok((response.map(BodyExt::boxed_unsync), Box::new(io) as BoxedIo))
        })
    }
}
