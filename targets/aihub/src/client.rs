//! The HTTP side of AI Hub's protocol: protobuf bodies with `Authorization: token …` and
//! `Content-Type: application/x-protobuf`, `{api_url}/api/v1/…/` paths, a reply that counts only
//! with the protobuf content type, 429 and 5xx and dropped connections retried with backoff (as
//! the official client does), 401/403 a rejected token, 426 a protocol too old.

use std::time::Duration;

use prost::Message;

use crate::config::{ClientConfig, CONFIGURE};

/// The protocol version npugate speaks, sent as `Client-Version` (the official client sends its
/// own version there): the messages and paths are those of qai-hub 0.56.0.
pub const PROTOCOL_VERSION: &str = "0.56.0";
/// The content type of every request and reply body.
pub const PROTOBUF: &str = "application/x-protobuf";
/// The largest reply npugate reads (a profile of a big model is a few MB).
const REPLY_LIMIT: u64 = 256 << 20;

/// How often and how long a failed request is tried again.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts in all.
    pub attempts: u32,
    /// The wait after the first failure; it doubles after each.
    pub first_wait: Duration,
    /// The longest wait.
    pub max_wait: Duration,
}

impl Default for RetryPolicy {
    /// The official client's: 7 attempts, 0.75 s doubling, at most 10 s apart.
    fn default() -> RetryPolicy {
        RetryPolicy { attempts: 7, first_wait: Duration::from_millis(750), max_wait: Duration::from_secs(10) }
    }
}

impl RetryPolicy {
    /// The wait before attempt `attempt` (1 = the first retry).
    pub fn wait(&self, attempt: u32) -> Duration {
        self.first_wait.saturating_mul(1 << attempt.saturating_sub(1).min(16)).min(self.max_wait)
    }
}

/// Why a request failed; every message names the URL or the file and what to do.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 401/403: the token was refused.
    #[error("AI Hub at {api_url} rejected the token (HTTP {status}) from {}: the token was rejected; get a valid token from your AI Hub account page and run `{CONFIGURE}`", file.display())]
    Rejected {
        /// The HTTP status.
        status: u16,
        /// The service.
        api_url: String,
        /// The client's file the token came from.
        file: std::path::PathBuf,
    },
    /// 426: the service no longer speaks this protocol version.
    #[error("AI Hub at {0} refuses protocol {PROTOCOL_VERSION} (HTTP 426, upgrade required): the service changed its protocol since npugate was written against qai-hub {PROTOCOL_VERSION}; update npugate")]
    Upgrade(String),
    /// Any other unexpected status.
    #[error("AI Hub answered {method} {url} with HTTP {status}{}", body_note(.body))]
    Status {
        /// The method.
        method: &'static str,
        /// The URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The reply's text, if short.
        body: String,
    },
    /// The connection failed (every attempt).
    #[error("cannot reach AI Hub at {url}: {error} (after {attempts} attempts)")]
    Transport {
        /// The URL.
        url: String,
        /// What failed.
        error: String,
        /// How many attempts were made.
        attempts: u32,
    },
    /// A reply that is no protobuf message of the expected kind.
    #[error("AI Hub's reply to {url} is not the expected {what}: {error}")]
    Reply {
        /// The URL.
        url: String,
        /// The message expected.
        what: &'static str,
        /// What was wrong.
        error: String,
    },
}

fn body_note(body: &str) -> String {
    match body.trim() {
        "" => String::new(),
        text => format!(": {}", text.chars().take(300).collect::<String>()),
    }
}

impl ApiError {
    /// The HTTP status of a [`ApiError::Status`] error.
    pub fn status(&self) -> Option<u16> {
        match self {
            ApiError::Status { status, .. } | ApiError::Rejected { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// True for a failure worth trying again later (the connection, a busy service).
    pub fn is_transient(&self) -> bool {
        matches!(self, ApiError::Transport { .. }) || self.status().is_some_and(retried_status)
    }
}

/// The statuses retried with backoff: too many requests and the gateway's and server's failures.
fn retried_status(status: u16) -> bool {
    matches!(status, 429 | 500 | 502 | 503 | 504)
}

/// A connection to AI Hub with the official client's credentials.
pub struct Client {
    config: ClientConfig,
    agent: ureq::Agent,
    retry: RetryPolicy,
}

/// A request body: a protobuf message, raw bytes of a file part, or nothing.
enum Body<'a> {
    None,
    Protobuf(Vec<u8>),
    Part(&'a [u8]),
}

/// A successful reply: its content type, headers npugate reads and body.
struct Reply {
    content_type: String,
    etag: Option<String>,
    body: Vec<u8>,
}

impl Client {
    /// A client for `config`, retrying as `retry` says.
    pub fn new(config: ClientConfig, retry: RetryPolicy) -> Client {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(10)))
            .timeout_global(Some(Duration::from_secs(300)))
            .user_agent(format!("npugate/{}", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Client { config, agent, retry }
    }

    /// The configuration it uses.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// `GET {api}/{path}/?query` → `M`.
    pub fn get<M: Message + Default>(&self, path: &str, query: &[(&str, String)]) -> Result<M, ApiError> {
        let url = self.config.api(path);
        let reply = self.call("GET", &url, query, Body::None, true)?;
        self.decode(&url, reply)
    }

    /// `POST {api}/{path}/` with `message` → `M`.
    pub fn post<M: Message + Default>(&self, path: &str, message: &impl Message) -> Result<M, ApiError> {
        let url = self.config.api(path);
        let reply = self.call("POST", &url, &[], Body::Protobuf(message.encode_to_vec()), true)?;
        self.decode(&url, reply)
    }

    /// `PUT` of one part of a file to a multipart URL; its ETag.
    pub fn put_part(&self, url: &str, part: &[u8]) -> Result<String, ApiError> {
        let reply = self.call("PUT", url, &[], Body::Part(part), false)?;
        reply.etag.filter(|etag| !etag.is_empty()).ok_or_else(|| ApiError::Reply {
            url: url.to_string(),
            what: "part upload reply",
            error: "it has no ETag header".into(),
        })
    }

    fn decode<M: Message + Default>(&self, url: &str, reply: Reply) -> Result<M, ApiError> {
        let what = std::any::type_name::<M>().rsplit("::").next().unwrap_or("message");
        if reply.content_type != PROTOBUF {
            return Err(ApiError::Reply {
                url: url.to_string(),
                what,
                error: format!("its content type is {:?}, not {PROTOBUF}", reply.content_type),
            });
        }
        M::decode(reply.body.as_slice()).map_err(|e| ApiError::Reply {
            url: url.to_string(),
            what,
            error: e.to_string(),
        })
    }

    /// One request, tried again on a transient failure as the retry policy says.
    fn call(
        &self,
        method: &'static str,
        url: &str,
        query: &[(&str, String)],
        body: Body<'_>,
        authorized: bool,
    ) -> Result<Reply, ApiError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let outcome = self.once(method, url, query, &body, authorized);
            match outcome {
                Err(error) if error.is_transient() && attempt < self.retry.attempts => {
                    std::thread::sleep(self.retry.wait(attempt));
                }
                Err(ApiError::Transport { url, error, .. }) => {
                    return Err(ApiError::Transport { url, error, attempts: attempt });
                }
                other => return other,
            }
        }
    }

    fn once(
        &self,
        method: &'static str,
        url: &str,
        query: &[(&str, String)],
        body: &Body<'_>,
        authorized: bool,
    ) -> Result<Reply, ApiError> {
        let transport =
            |error: ureq::Error| ApiError::Transport { url: url.to_string(), error: error.to_string(), attempts: 1 };
        let token = format!("token {}", self.config.api_token);
        let response = match (method, body) {
            ("GET", _) => {
                let mut request = self.agent.get(url).header("Client-Version", PROTOCOL_VERSION);
                if authorized {
                    request = request.header("Authorization", &token).header("Content-Type", PROTOBUF);
                }
                for (key, value) in query {
                    request = request.query(key, value);
                }
                request.call()
            }
            (_, Body::Part(part)) => self.agent.put(url).header("Content-Type", "application/octet-stream").send(*part),
            (_, Body::Protobuf(bytes)) => self
                .agent
                .post(url)
                .header("Client-Version", PROTOCOL_VERSION)
                .header("Authorization", &token)
                .header("Content-Type", PROTOBUF)
                .send(bytes.as_slice()),
            (_, Body::None) => self.agent.post(url).header("Authorization", &token).send_empty(),
        }
        .map_err(transport)?;
        let status = response.status().as_u16();
        let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
        let content_type = header("content-type").unwrap_or_default();
        let etag = header("etag");
        let body = response.into_body().with_config().limit(REPLY_LIMIT).read_to_vec().map_err(transport)?;
        match status {
            200..=299 => Ok(Reply { content_type, etag, body }),
            401 | 403 if authorized => {
                Err(ApiError::Rejected { status, api_url: self.config.api_url.clone(), file: self.config.file.clone() })
            }
            426 => Err(ApiError::Upgrade(self.config.api_url.clone())),
            _ => Err(ApiError::Status {
                method,
                url: url.to_string(),
                status,
                body: String::from_utf8_lossy(&body).into_owned(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_the_cap() {
        let policy = RetryPolicy::default();
        let waits: Vec<u128> = (1..=6).map(|attempt| policy.wait(attempt).as_millis()).collect();
        assert_eq!(waits, [750, 1500, 3000, 6000, 10000, 10000]);
    }
}
