//! [`NetHooks`]: the only way out of the sandbox to the network. Every
//! outgoing `wasi:http` request passes [`NetPolicy::check`] (host grant,
//! tool request, safe methods for read-only calls) before a connection is
//! made, and gets the configured connect and first-byte timeouts. A call
//! without a network grant has no policy, and every request is refused.

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
}

impl NetHooks {
    pub(crate) fn new(policy: Option<Arc<NetPolicy>>, timeout: Duration, tool: Arc<str>) -> Self {
        NetHooks {
            policy,
            timeout,
            tool,
        }
    }

    fn check(&self, request: &http::Request<WasiBody>) -> Result<(), String> {
        let Some(policy) = &self.policy else {
            return Err("this call has no network grant".into());
        };
        let uri = request.uri();
        let host = uri.host().ok_or("the request has no host")?;
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
