//! MCP 2026-07-28's multi-round-trip requests, for Airlock's own questions.
//! A 2026-07-28 request has no session to send `elicitation/create` on:
//! when a call needs its user's permission and its client can be asked (it
//! declares form elicitation in the request's `_meta`), the call stops
//! before its tool runs and is answered with an `input_required` result
//! carrying the question (`inputRequests`) and a `requestState`. The
//! client asks its user and sends the call again with the answer
//! (`inputResponses`) and the state; the call then runs with that answer,
//! on this replica or another.
//!
//! The state is sealed (HMAC-SHA256, rmcp's `RequestStateCodec`) with a key
//! the replicas share through the context store
//! ([`Contexts::shared_secret`]), bound to the caller, the tool and its
//! arguments, for ten minutes: an answer counts for the question it was
//! given to, in the call that asked it, from the caller who was asked. It
//! carries the answers of earlier rounds, so a call asked twice (its tool's
//! changed code, then its permission) keeps the first answer.

use crate::asking;
use airlock_host::context_store::Contexts;
use airlock_host::{PermissionAnswer, PermissionPrompter, PermissionRequest};
use async_trait::async_trait;
use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, ElicitRequest, ElicitRequestParams, ElicitResult, InputRequest,
    InputRequiredResult, RequestStateCodec, RequestStateError, SealOptions,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// The key of Airlock's question in `inputRequests` and of its answer in
/// `inputResponses`.
pub(crate) const QUESTION: &str = "airlock/question";

/// How long a client has to answer and send the call again.
const STATE_TTL: Duration = Duration::from_secs(600);

/// The name of the sealing key in the context store.
const SECRET: &str = "request-state";

/// The sealing key, read from the context store when first needed.
#[derive(Default)]
pub(crate) struct StateKey(tokio::sync::Mutex<Option<RequestStateCodec>>);

impl StateKey {
    /// The codec, read anew from the store when `renew`.
    async fn codec(
        &self,
        contexts: &Contexts,
        renew: bool,
    ) -> Result<RequestStateCodec, ErrorData> {
        let mut held = self.0.lock().await;
        if let (Some(codec), false) = (held.as_ref(), renew) {
            return Ok(codec.clone());
        }
        let secret = contexts.shared_secret(SECRET).await.map_err(|e| {
            ErrorData::internal_error(format!("no key to seal the request state with: {e}"), None)
        })?;
        let codec = RequestStateCodec::try_new(secret.to_vec())
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        *held = Some(codec.clone());
        Ok(codec)
    }

    /// Opens a state this server sealed for `binding`; a key another
    /// replica made at the same time is read before the state is refused.
    async fn open(
        &self,
        contexts: &Contexts,
        sealed: &str,
        binding: &[u8],
    ) -> Result<State, ErrorData> {
        let mut renew = false;
        loop {
            let codec = self.codec(contexts, renew).await?;
            let why = match codec.open_json_with::<State>(sealed, binding) {
                Ok(state) => return Ok(state),
                Err(RequestStateError::Expired) => format!(
                    "the requestState expired (an answer is taken for {} s after the question)",
                    STATE_TTL.as_secs()
                ),
                Err(_) if !renew => {
                    renew = true;
                    continue;
                }
                Err(_) => "the requestState is not one this server gave for this call (it was \
                           changed, or given for another tool, input or caller)"
                    .to_string(),
            };
            return Err(ErrorData::invalid_params(
                format!("{why}; send the call again without requestState and inputResponses"),
                None,
            ));
        }
    }

    /// Seals `state` for `binding`.
    async fn seal(
        &self,
        contexts: &Contexts,
        state: &State,
        binding: &[u8],
    ) -> Result<String, ErrorData> {
        let options = SealOptions::new().associated_data(binding).ttl(STATE_TTL);
        self.codec(contexts, false)
            .await?
            .seal_json_with(state, &options)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }
}

/// What travels in `requestState`.
#[derive(Default, Serialize, Deserialize)]
struct State {
    /// The answers given, by the digest of their question.
    #[serde(default)]
    answers: BTreeMap<String, ElicitResult>,
    /// The digest of the question the retry answers.
    #[serde(default)]
    asked: Option<String>,
}

/// One round of a call: the answers it has, and the question it stopped
/// at, if any. It is the call's permission prompter.
pub(crate) struct Round {
    answers: BTreeMap<String, ElicitResult>,
    binding: Vec<u8>,
    asked: Mutex<Option<(String, ElicitRequestParams)>>,
    stopped: Notify,
}

impl Round {
    /// The round `request` starts: the answers its `requestState` and
    /// `inputResponses` carry (none on a first request), for the call
    /// `owner` (an authenticated caller's key) makes.
    pub(crate) async fn open(
        key: &StateKey,
        contexts: &Contexts,
        request: &CallToolRequestParams,
        owner: Option<&str>,
    ) -> Result<Arc<Round>, ErrorData> {
        let binding = binding(owner, request);
        let mut answers = BTreeMap::new();
        if let Some(sealed) = &request.request_state {
            let state = key.open(contexts, sealed, &binding).await?;
            answers = state.answers;
            if let Some(asked) = state.asked {
                let answer = request
                    .input_responses
                    .as_ref()
                    .and_then(|responses| responses.get(QUESTION))
                    .ok_or_else(|| {
                        ErrorData::invalid_params(
                            format!("inputResponses[\"{QUESTION}\"] is missing: it answers the question this call was given"),
                            None,
                        )
                    })?;
                let answer =
                    serde_json::from_value::<ElicitResult>(answer.clone()).map_err(|e| {
                        ErrorData::invalid_params(
                            format!(
                                "inputResponses[\"{QUESTION}\"] is not an elicitation result: {e}"
                            ),
                            None,
                        )
                    })?;
                answers.insert(asked, answer);
            }
        }
        Ok(Arc::new(Round {
            answers,
            binding,
            asked: Mutex::default(),
            stopped: Notify::new(),
        }))
    }

    /// Returns once the call asked a question this round has no answer to
    /// (the call then waits for ever: it is to be cancelled).
    pub(crate) async fn stopped(&self) {
        self.stopped.notified().await;
    }

    /// The `input_required` result for the question the call stopped at,
    /// or `None` when it stopped at none.
    pub(crate) async fn input_required(
        &self,
        key: &StateKey,
        contexts: &Contexts,
    ) -> Result<Option<InputRequiredResult>, ErrorData> {
        let Some((digest, form)) = crate::lock(&self.asked).take() else {
            return Ok(None);
        };
        let state = State {
            answers: self.answers.clone(),
            asked: Some(digest),
        };
        let sealed = key.seal(contexts, &state, &self.binding).await?;
        let question = InputRequest::Elicitation(ElicitRequest::new(form));
        Ok(Some(InputRequiredResult::new(
            Some(BTreeMap::from([(QUESTION.to_string(), question)])),
            Some(sealed),
        )))
    }

    /// The answer to the question with `digest`, if this round has one.
    pub(crate) fn answered(&self, digest: &str) -> Option<&ElicitResult> {
        self.answers.get(digest)
    }

    /// Stops the call at the question with `digest`, asked by `form`.
    pub(crate) fn stop(&self, digest: String, form: ElicitRequestParams) {
        *crate::lock(&self.asked) = Some((digest, form));
        self.stopped.notify_one();
    }

    /// The answer to the question with `digest`, or the stop at it.
    async fn answer_or_stop(&self, digest: String, form: ElicitRequestParams) -> ElicitResult {
        if let Some(answer) = self.answered(&digest) {
            return answer.clone();
        }
        self.stop(digest, form);
        std::future::pending().await
    }
}

#[async_trait]
impl PermissionPrompter for Round {
    async fn ask(&self, request: &PermissionRequest) -> PermissionAnswer {
        let question = serde_json::json!([
            "permission",
            request.tool_name,
            request.input,
            request.reason
        ]);
        let answer = self
            .answer_or_stop(digest(&question), asking::permission_form(request))
            .await;
        asking::permission_answer(&request.tool_name, Ok(answer))
    }
}

/// What a state is bound to: the caller, the tool and its arguments.
fn binding(owner: Option<&str>, request: &CallToolRequestParams) -> Vec<u8> {
    let arguments = serde_json::to_vec(&request.arguments).unwrap_or_default();
    let mut binding = Vec::new();
    for part in [owner.unwrap_or("").as_bytes(), request.name.as_bytes()] {
        binding.extend_from_slice(&(part.len() as u64).to_le_bytes());
        binding.extend_from_slice(part);
    }
    binding.extend_from_slice(blake3::hash(&arguments).as_bytes());
    binding
}

/// A question's digest: its kind and everything it shows the user.
pub(crate) fn digest(question: &serde_json::Value) -> String {
    let bytes = serde_json::to_vec(question).unwrap_or_default();
    blake3::hash(&bytes).to_hex()[..32].to_string()
}
