//! [`NetHooks`]: the only way out of the sandbox to the network. Every
//! outgoing `wasi:http` request passes [`NetPolicy::check`] (host grant,
//! tool request, safe methods for read-only calls) before a connection is
//! made, and gets the configured connect and first-byte timeouts. A call
//! without a network grant has no policy, and every request is refused.
//! The guest sees only `HTTP-request-denied`; the first refusal of a call
//! is kept, saying which host and how it could be granted, for the host to
//! add to the error the tool then reports ([`NetHooks::refused`]).
//!
//! An allowed request gets the secrets configured for its host
//! ([`Secrets::injections`]) as it leaves; the response is handed to the
//! guest with every secret taken out of its headers and body
//! ([`RedactedBody`]), so the guest never holds one.

use airlock_core::grants::NetPolicy;
use airlock_core::secrets::{Injection, Redactor, Secrets};
use bytes::Bytes;
use http_body::{Body, Frame};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
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
    secrets: Arc<Secrets>,
    refused: Option<String>,
}

impl NetHooks {
    pub(crate) fn new(
        policy: Option<Arc<NetPolicy>>,
        timeout: Duration,
        tool: Arc<str>,
        secrets: Arc<Secrets>,
    ) -> Self {
        NetHooks {
            policy,
            timeout,
            tool,
            secrets,
            refused: None,
        }
    }

    /// The call's network policy; `None` when it may reach nothing.
    pub(crate) fn policy(&self) -> Option<&Arc<NetPolicy>> {
        self.policy.as_ref()
    }

    /// Why the call's first refused request was refused: the request's
    /// origin (scheme, host and port), the reason, and how it could be
    /// granted.
    pub(crate) fn refused(&self) -> Option<&str> {
        self.refused.as_deref()
    }

    /// Guest text for `sink`: cleaned, the call's secrets taken out,
    /// capped ([`Secrets::clean`]).
    pub(crate) fn clean(
        &self,
        text: &str,
        sink: airlock_core::sanitize::Sink,
        max: usize,
    ) -> String {
        self.secrets.clean(text, sink, max)
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
        policy.check(request.method().as_str(), host, port_of(uri))
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
        let mut request = request;
        let injected = if verdict.is_ok() && !self.secrets.is_empty() {
            inject(&self.secrets, &self.tool, &mut request)
        } else {
            Ok(false)
        };
        let secrets = (!self.secrets.is_empty()).then(|| self.secrets.clone());
        let timeout = self.timeout;
        Box::new(async move {
            verdict.map_err(|_| HttpError::HttpRequestDenied)?;
            let injected = injected?;
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
            let mut response = response.map(BodyExt::boxed_unsync);
            if let Some(secrets) = secrets {
                if injected && let Some(coding) = opaque_coding(response.headers()) {
                    return Err(HttpError::InternalError(Some(format!(
                        "the response to a request carrying a secret came with the coding \
                         `{coding}`: Airlock hands such a response to the tool only as it was \
                         sent (no content or transfer coding but chunked), so that redaction \
                         reads every byte"
                    ))));
                }
                response = redact_response(response, secrets);
            }
            Ok((response, Box::new(io) as BoxedIo))
        })
    }
}

/// The port a request goes to: the URI's, or its scheme's default.
fn port_of(uri: &http::Uri) -> Option<u16> {
    uri.port_u16().or_else(|| match uri.scheme_str() {
        Some("http") => Some(80),
        Some("https") => Some(443),
        _ => None,
    })
}

/// The first content or transfer coding of a response that hides its
/// bytes from redaction: anything but `identity` in any `Content-Encoding`
/// header, anything but `chunked` (which hyper has undone) and `identity`
/// in any `Transfer-Encoding` header.
fn opaque_coding(headers: &http::HeaderMap) -> Option<String> {
    let codings = |name, plain: &'static [&'static str]| {
        headers.get_all(name).into_iter().flat_map(move |value| {
            let text = String::from_utf8_lossy(value.as_bytes()).into_owned();
            let codings: Vec<String> = text
                .split(',')
                .map(|c| c.trim().to_ascii_lowercase())
                .filter(|c| !c.is_empty() && !plain.contains(&c.as_str()))
                .collect();
            codings
        })
    };
    codings(http::header::CONTENT_ENCODING, &["identity"])
        .chain(codings(
            http::header::TRANSFER_ENCODING,
            &["identity", "chunked"],
        ))
        .next()
}

/// Adds the secrets for the request's host to it, replacing any header or
/// query parameter of the same name the guest set.
fn inject(
    secrets: &Secrets,
    tool: &str,
    request: &mut http::Request<WasiBody>,
) -> Result<bool, HttpError> {
    let uri = request.uri();
    let (Some(scheme), Some(host)) = (uri.scheme_str(), uri.host()) else {
        return Ok(false);
    };
    let injections = secrets.injections(tool, scheme, host, port_of(uri));
    if injections.is_empty() {
        return Ok(false);
    }
    // The response must come whole and as it is, for redaction to see the
    // secret wherever it is echoed: not compressed, not in ranges.
    let headers = request.headers_mut();
    headers.insert(
        http::header::ACCEPT_ENCODING,
        http::HeaderValue::from_static("identity"),
    );
    headers.remove(http::header::RANGE);
    headers.remove(http::header::IF_RANGE);
    for injection in injections {
        match injection {
            Injection::Header { name, value } => {
                let name = http::HeaderName::try_from(name.as_str())
                    .map_err(|_| HttpError::InternalError(None))?;
                let value = http::HeaderValue::try_from(value.as_str())
                    .map_err(|_| HttpError::InternalError(None))?;
                request.headers_mut().insert(name, value);
            }
            Injection::Query { name, encoded } => {
                let mut parts = request.uri().clone().into_parts();
                let path_and_query = parts.path_and_query.as_ref().map_or("/", |pq| pq.as_str());
                let (path, query) = path_and_query
                    .split_once('?')
                    .unwrap_or((path_and_query, ""));
                let mut pairs: Vec<&str> = query
                    .split('&')
                    .filter(|pair| {
                        !pair.is_empty() && pair.split('=').next() != Some(name.as_str())
                    })
                    .collect();
                let added = format!("{name}={encoded}");
                pairs.push(&added);
                let rebuilt = format!("{path}?{}", pairs.join("&"));
                parts.path_and_query = Some(
                    http::uri::PathAndQuery::try_from(rebuilt)
                        .map_err(|_| HttpError::InternalError(None))?,
                );
                *request.uri_mut() =
                    http::Uri::from_parts(parts).map_err(|_| HttpError::InternalError(None))?;
            }
        }
    }
    Ok(true)
}

/// The response with every secret taken out of its headers and body. Its
/// `Content-Length` goes: a redaction changes the length.
fn redact_response(
    response: http::Response<WasiBody>,
    secrets: Arc<Secrets>,
) -> http::Response<WasiBody> {
    let (mut parts, body) = response.into_parts();
    parts.headers.remove(http::header::CONTENT_LENGTH);
    redact_headers(&mut parts.headers, &secrets);
    let body = RedactedBody {
        inner: body,
        redactor: Redactor::new(secrets),
        trailers: None,
        done: false,
    };
    use http_body_util::BodyExt;
    http::Response::from_parts(parts, body.boxed_unsync())
}

/// Takes the secrets out of `headers`: a header whose name carries one
/// (names arrive in lowercase, which redaction matches) goes whole; values
/// are redacted.
fn redact_headers(headers: &mut http::HeaderMap, secrets: &Secrets) {
    let named: Vec<http::HeaderName> = headers
        .keys()
        .filter(|name| secrets.contains(name.as_str()))
        .cloned()
        .collect();
    for name in named {
        tracing::warn!(
            "a response header's name carried a secret; the header was dropped: {}",
            secrets.redact(name.as_str())
        );
        headers.remove(name);
    }
    for value in headers.values_mut() {
        if let std::borrow::Cow::Owned(clean) = secrets.redact_bytes(value.as_bytes()) {
            // What replaced the secret is visible ASCII: a valid value.
            *value = http::HeaderValue::from_bytes(&clean)
                .unwrap_or_else(|_| http::HeaderValue::from_static("[secret]"));
        }
    }
}

/// A response body with the secrets taken out, chunk by chunk.
struct RedactedBody {
    inner: WasiBody,
    redactor: Redactor,
    /// Trailers that came while redacted bytes were still held back.
    trailers: Option<http::HeaderMap>,
    done: bool,
}

impl Body for RedactedBody {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        let this = &mut *self;
        loop {
            if this.done {
                return Poll::Ready(this.trailers.take().map(|t| Ok(Frame::trailers(t))));
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => {
                        let out = this.redactor.push(&data);
                        if !out.is_empty() {
                            return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
                        }
                    }
                    Err(frame) => {
                        if let Ok(mut trailers) = frame.into_trailers() {
                            redact_headers(&mut trailers, this.redactor.secrets());
                            this.trailers = Some(trailers);
                        }
                        this.done = true;
                        let rest = this.redactor.finish();
                        if !rest.is_empty() {
                            return Poll::Ready(Some(Ok(Frame::data(Bytes::from(rest)))));
                        }
                    }
                },
                Poll::Ready(None) => {
                    this.done = true;
                    let rest = this.redactor.finish();
                    if !rest.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(Bytes::from(rest)))));
                    }
                }
            }
        }
    }
}
