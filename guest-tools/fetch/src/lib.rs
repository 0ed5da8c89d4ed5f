//! `fetch`: an HTTP GET through `wasi:http`. It asks for any host (`*`);
//! the operator decides which it gets, and the host refuses the rest before
//! a connection is made. Redirects are followed (up to 5), each one checked
//! by the host like the first request. The body comes back as text, capped.

use airlock_sdk::{Context, Describe, Flags, JsonSchema, Output, Tool, ToolError, export_tool};
use serde::Deserialize;
use wasip2::http::outgoing_handler;
use wasip2::http::types::{ErrorCode, Fields, IncomingBody, Method, OutgoingRequest, Scheme};
use wasip2::io::streams::StreamError;

const DEFAULT_MAX_LENGTH: usize = 100_000;
const MAX_REDIRECTS: usize = 5;
/// Bytes read from a body at most, whatever `max_length` says.
const MAX_BODY_BYTES: usize = 10 << 20;

/// Input of `fetch`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FetchInput {
    /// The URL to fetch (http or https).
    url: String,
    /// The most characters of the body to return (default 100000).
    #[schemars(range(min = 1))]
    max_length: Option<usize>,
}

struct Fetch;

impl Tool for Fetch {
    type Input = FetchInput;
    const PREFLIGHT: airlock_sdk::Preflight = airlock_sdk::Preflight::VALIDATE;

    fn describe() -> Describe {
        Describe::new(
            "fetch",
            "Fetches a URL over HTTP(S) and returns the response body as text.",
        )
        .alias("WebFetch")
        .title("Fetch URL")
        .prompt(
            "Sends an HTTP GET to `url` (http or https) and returns the status, the content \
                 type and the body as text, up to `max_length` characters (default 100000). \
                 Redirects are followed, up to 5. Only hosts the operator granted can be \
                 reached; a refused host is reported as permission denied.",
        )
        .flags(Flags::READ_ONLY | Flags::CONCURRENCY_SAFE | Flags::OPEN_WORLD | Flags::IDEMPOTENT)
        .network_host("*")
    }

    fn validate(input: &FetchInput, _cx: &Context) -> Result<(), String> {
        Url::parse(&input.url).map(drop)
    }

    fn call(input: FetchInput, cx: &Context) -> Result<Output, ToolError> {
        let max_length = input.max_length.unwrap_or(DEFAULT_MAX_LENGTH);
        let mut url = Url::parse(&input.url).map_err(ToolError::InvalidInput)?;
        for _ in 0..=MAX_REDIRECTS {
            cx.progress(&format!("GET {}", url.display()), None);
            let response = get(&url)?;
            if let Some(location) = response
                .location
                .as_deref()
                .filter(|_| is_redirect(response.status))
            {
                url = url.join(location).map_err(|e| {
                    ToolError::Failed(format!("{} redirected to {location:?}: {e}", url.display()))
                })?;
                continue;
            }
            return Ok(render(&url, response, max_length));
        }
        Err(ToolError::Failed(format!(
            "{} redirected more than {MAX_REDIRECTS} times",
            input.url
        )))
    }
}

struct Response {
    status: u16,
    content_type: Option<String>,
    location: Option<String>,
    body: Vec<u8>,
    body_truncated: bool,
}

fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

fn render(url: &Url, r: Response, max_length: usize) -> Output {
    let content_type = r
        .content_type
        .clone()
        .unwrap_or_else(|| "unknown type".into());
    let textual = r.content_type.as_deref().is_none_or(|t| {
        t.starts_with("text/")
            || t.contains("json")
            || t.contains("xml")
            || t.contains("javascript")
    });
    let mut text = format!(
        "HTTP {} from {} ({content_type}, {} bytes)",
        r.status,
        url.display(),
        r.body.len()
    );
    if !textual {
        text.push_str("\n\n(the body is not text, so it is not shown)");
    } else if !r.body.is_empty() {
        let body = String::from_utf8_lossy(&r.body);
        text.push_str("\n\n");
        match body.char_indices().nth(max_length) {
            Some((cut, _)) => {
                text.push_str(&body[..cut]);
                text.push_str(&format!(
                    "\n\n(the body was cut at {max_length} characters)"
                ));
            }
            None => text.push_str(&body),
        }
    }
    if r.body_truncated {
        text.push_str(&format!(
            "\n(only the first {MAX_BODY_BYTES} bytes were downloaded)"
        ));
    }
    Output::text(text)
}

/// One GET, without following redirects.
fn get(url: &Url) -> Result<Response, ToolError> {
    let failed = |what: &str| ToolError::Failed(format!("{what} for {}", url.display()));
    let headers = Fields::from_list(&[
        ("user-agent".to_string(), b"airlock-fetch/0.1".to_vec()),
        (
            "accept".to_string(),
            b"text/html, text/plain, application/json, */*;q=0.5".to_vec(),
        ),
    ])
    .map_err(|_| failed("could not build the request headers"))?;
    let request = OutgoingRequest::new(headers);
    request
        .set_method(&Method::Get)
        .map_err(|_| failed("could not set the method"))?;
    request
        .set_scheme(Some(&if url.https {
            Scheme::Https
        } else {
            Scheme::Http
        }))
        .map_err(|_| failed("could not set the scheme"))?;
    request
        .set_authority(Some(&url.authority))
        .map_err(|_| failed("the host is not valid"))?;
    request
        .set_path_with_query(Some(&url.path))
        .map_err(|_| failed("the path is not valid"))?;

    let pending = outgoing_handler::handle(request, None).map_err(|e| http_error(url, e))?;
    pending.subscribe().block();
    let response = match pending.get() {
        Some(Ok(Ok(response))) => response,
        Some(Ok(Err(e))) => return Err(http_error(url, e)),
        _ => return Err(failed("the response was lost")),
    };
    let status = response.status();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .first()
            .map(|v| String::from_utf8_lossy(v).into_owned())
    };
    let content_type = header("content-type");
    let location = header("location");
    let body = response
        .consume()
        .map_err(|_| failed("could not read the body"))?;
    let stream = body
        .stream()
        .map_err(|_| failed("could not read the body"))?;
    let mut bytes = Vec::new();
    let mut truncated = false;
    loop {
        match stream.blocking_read(64 << 10) {
            Ok(chunk) => {
                let room = MAX_BODY_BYTES - bytes.len();
                if chunk.len() > room {
                    bytes.extend_from_slice(&chunk[..room]);
                    truncated = true;
                    break;
                }
                bytes.extend_from_slice(&chunk);
            }
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(e)) => {
                return Err(ToolError::Failed(format!(
                    "reading the body of {} failed: {}",
                    url.display(),
                    e.to_debug_string()
                )));
            }
        }
    }
    drop(stream);
    if !truncated {
        let _ = IncomingBody::finish(body);
    }
    Ok(Response {
        status,
        content_type,
        location,
        body: bytes,
        body_truncated: truncated,
    })
}

fn http_error(url: &Url, e: ErrorCode) -> ToolError {
    match e {
        ErrorCode::HttpRequestDenied => ToolError::PermissionDenied(format!(
            "the request to {} was refused: this call is not granted network access to {}",
            url.display(),
            url.host()
        )),
        ErrorCode::ConnectionTimeout
        | ErrorCode::ConnectionReadTimeout
        | ErrorCode::HttpResponseTimeout => {
            ToolError::Timeout(format!("{} did not answer in time", url.display()))
        }
        ErrorCode::DnsError(_) => {
            ToolError::Failed(format!("{} could not be resolved", url.host()))
        }
        ErrorCode::ConnectionRefused => {
            ToolError::Failed(format!("{} refused the connection", url.host()))
        }
        other => ToolError::Failed(format!("fetching {} failed: {other:?}", url.display())),
    }
}

/// An http(s) URL, split the way `wasi:http` wants it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Url {
    https: bool,
    authority: String,
    path: String,
}

impl Url {
    fn parse(text: &str) -> Result<Url, String> {
        if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!(
                "{text:?} is not a URL: it contains spaces or control characters"
            ));
        }
        let (scheme, rest) = text.split_once("://").ok_or_else(|| {
            format!("{text:?} is not a URL: it has no scheme (http:// or https://)")
        })?;
        let https = match scheme.to_ascii_lowercase().as_str() {
            "https" => true,
            "http" => false,
            other => {
                return Err(format!(
                    "the scheme {other:?} is not supported; use http or https"
                ));
            }
        };
        let rest = rest.split('#').next().unwrap_or_default();
        let split = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(split);
        if authority.is_empty() {
            return Err(format!("{text:?} has no host"));
        }
        if authority.contains('@') {
            return Err("URLs with credentials (user@host) are not supported".into());
        }
        let path = match path {
            "" => "/".to_string(),
            p if p.starts_with('?') => format!("/{p}"),
            p => p.to_string(),
        };
        Ok(Url {
            https,
            authority: authority.to_string(),
            path,
        })
    }

    /// Resolves a redirect target against this URL.
    fn join(&self, location: &str) -> Result<Url, String> {
        if location.contains("://") {
            Url::parse(location)
        } else if let Some(rest) = location.strip_prefix("//") {
            Url::parse(&format!(
                "{}://{rest}",
                if self.https { "https" } else { "http" }
            ))
        } else if location.starts_with('/') {
            Ok(Url {
                path: location.to_string(),
                ..self.clone()
            })
        } else {
            let base = &self.path[..self.path.rfind('/').map_or(0, |i| i + 1)];
            Ok(Url {
                path: format!("{base}{location}"),
                ..self.clone()
            })
        }
    }

    fn host(&self) -> &str {
        if let Some(end) = self.authority.find(']') {
            return &self.authority[..=end];
        }
        self.authority
            .rsplit_once(':')
            .map_or(&self.authority, |(h, _)| h)
    }

    fn display(&self) -> String {
        format!(
            "{}://{}{}",
            if self.https { "https" } else { "http" },
            self.authority,
            self.path
        )
    }
}

export_tool!(Fetch);
