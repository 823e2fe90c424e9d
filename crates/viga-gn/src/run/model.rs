//! Talking to the model: the system prompt and the opening message, asking (or replaying an
//! identical earlier request from the response cache), and reading a reply against the
//! step protocol.

use std::ops::ControlFlow::{self, Break, Continue};
use std::time::Instant;

use serde_json::Value;
use viga_core::conversation::{EarlierTurn, StartFrom, earlier_turns_text};
use viga_protocol::event::ModelRole;
use viga_protocol::gn::GnResponse;
use viga_provider::{ModelRequest, ModelResponse, Provider, ResponseFormat};

use crate::GnError;
use crate::cache::ResponseCache;
use crate::context::SliceKind;
use crate::executor::ReplySchema;

use super::{Answer, Conversation, Ending, GnRun, SYSTEM_PROMPT, Session};

impl GnRun {
    /// The next reply: replayed from the cache when an identical request was answered
    /// before, else asked of the model (a cancel abandons that call at once).
    pub(super) async fn ask(
        &self,
        conversation: &Conversation<'_>,
        round: u32,
        session: &mut Session,
    ) -> ControlFlow<Ending, Answer> {
        let mut request = ModelRequest::for_role(
            ModelRole::GnAssistant,
            conversation.system.as_str(),
            session.messages.clone(),
        );
        request.max_tokens = self.config.max_tokens;
        request.response_format = Some(ResponseFormat {
            name: "GnResponse".to_owned(),
            schema: conversation.replies.schema().clone(),
        });
        if self.offers_search(session) {
            request.tools = vec![super::search::search_tool()];
        }
        let key = self.cache_key(conversation.provider, &request, session);
        if let Some(response) = self.replay(key.as_deref(), round, session) {
            return Continue(Answer {
                response,
                store_under: None,
            });
        }
        let response = self
            .call_model(conversation.provider, &request, round, session)
            .await?;
        Continue(Answer {
            response,
            store_under: key,
        })
    }

    /// The cache key of a request, when the run has a cache.
    fn cache_key(
        &self,
        provider: &dyn Provider,
        request: &ModelRequest,
        session: &mut Session,
    ) -> Option<String> {
        self.config.cache.as_ref()?;
        match ResponseCache::key(provider.name(), provider.model(), request) {
            Ok(key) => Some(key),
            Err(err) => {
                session
                    .recorder
                    .warn(format!("the request cannot be cached: {err}"));
                None
            }
        }
    }

    /// The stored reply for `key`; an entry that cannot be used is a warning and a miss.
    fn replay(
        &self,
        key: Option<&str>,
        round: u32,
        session: &mut Session,
    ) -> Option<ModelResponse> {
        let (cache, key) = (self.config.cache.as_ref()?, key?);
        match cache.load(key) {
            Ok(Some(cached)) => {
                session.rounds = round + 1;
                session.recorder.reply_replayed(round, &cached);
                Some(cached.response)
            }
            Ok(None) => None,
            Err(err) => {
                session.recorder.warn(format!(
                    "the cached reply cannot be used, asking the model: {err}"
                ));
                None
            }
        }
    }

    /// Asks the model, racing the call against a cancel, and records the reply.
    async fn call_model(
        &self,
        provider: &dyn Provider,
        request: &ModelRequest,
        round: u32,
        session: &mut Session,
    ) -> ControlFlow<Ending, ModelResponse> {
        let started = Instant::now();
        let answer = session
            .recorder
            .link
            .ask_model(provider, request, round, ModelRole::GnAssistant)
            .await;
        let response = match answer {
            Err(cancelled) => return Break(cancelled.into()),
            Ok(Err(err)) => {
                session.recorder.telemetry.counters.request_failures += 1;
                let err = GnError::from(err);
                return Break(Ending::Error(err.to_string(), err.kind()));
            }
            Ok(Ok(response)) => response,
        };
        session.rounds = round + 1;
        if response.structured_output_fallback && !session.told_of_fallback {
            // Said once: the run goes on, every reply still checked against the protocol.
            session.told_of_fallback = true;
            session.recorder.warn(
                "the model server refused structured output; the step protocol's schema goes in the prompt and every reply is checked here".to_owned(),
            );
        }
        let latency = if response.latency.is_zero() {
            started.elapsed()
        } else {
            response.latency
        };
        session.recorder.model_called(round, latency, &response);
        Continue(response)
    }

    /// Stores a reply that passed validation under its request's key.
    pub(super) fn keep_in_cache(
        &self,
        provider: &dyn Provider,
        answer: &Answer,
        session: &mut Session,
    ) {
        let (Some(cache), Some(key)) = (&self.config.cache, &answer.store_under) else {
            return;
        };
        if let Err(err) = cache.store(key, provider.name(), provider.model(), &answer.response) {
            session
                .recorder
                .warn(format!("the reply was not cached: {err}"));
        }
    }
}

/// The system prompt: the protocol, what the docs tool does when the run has docs, and the
/// reply schema (the registry's, so registered action types are in it).
pub(super) fn system_prompt(schema: &Value, docs: bool) -> String {
    let docs = if docs { super::search::DOCS_PROMPT } else { "" };
    format!("{SYSTEM_PROMPT}{docs}\n## JSON Schema of your reply\n\n{schema}\n")
}

pub(super) fn first_message(
    request: &str,
    object: Option<&str>,
    snapshot: &str,
    conversation: &[EarlierTurn],
    starts_from: StartFrom,
) -> String {
    let target = object.unwrap_or("(the active object)");
    let earlier = earlier_turns_text(conversation, starts_from)
        .map(|text| format!("{text}\n\n"))
        .unwrap_or_default();
    format!("{earlier}Request: {request}\nObject: {target}\nScene (JSON): {snapshot}")
}

/// Parses a reply: an optional Markdown fence around one JSON object, validated against
/// the built-in step protocol; `meta.request_context` names the context slices the model
/// wants.
pub fn parse_reply(text: &str) -> Result<(GnResponse, Vec<SliceKind>), String> {
    parse_reply_with(text, &ReplySchema::built_in())
}

/// [`parse_reply`] against a registry's reply schema
/// ([`crate::ExecutorRegistry::reply_schema`]), so its own action types validate.
pub fn parse_reply_with(
    text: &str,
    replies: &ReplySchema,
) -> Result<(GnResponse, Vec<SliceKind>), String> {
    let body = strip_fence(text);
    let reply = replies.parse(body).map_err(|err| err.to_string())?;
    let slices = match reply.meta.get("request_context") {
        None => Vec::new(),
        Some(value) => serde_json::from_value::<Vec<SliceKind>>(value.clone()).map_err(|_| {
            let names: Vec<&str> = SliceKind::ALL.iter().map(|k| k.name()).collect();
            format!(
                "at /meta/request_context (enum): expected a list of slice names from {names:?}"
            )
        })?,
    };
    Ok((reply, slices))
}

/// The docs searches a reply asks for in `meta.search_node_docs`: one query or a list.
pub fn searches_asked(reply: &GnResponse) -> Result<Vec<String>, String> {
    match reply.meta.get(super::SEARCH_META) {
        None => Ok(Vec::new()),
        Some(Value::String(query)) => Ok(vec![query.clone()]),
        Some(value) => serde_json::from_value::<Vec<String>>(value.clone()).map_err(|_| {
            format!(
                "at /meta/{} (type): expected a query or a list of queries (strings)",
                super::SEARCH_META
            )
        }),
    }
}

fn strip_fence(text: &str) -> &str {
    let trimmed = text.trim();
    let Some(rest) = trimmed.strip_prefix("```") else {
        return trimmed;
    };
    let body = rest.split_once('\n').map_or("", |(_, body)| body);
    body.trim_end().strip_suffix("```").unwrap_or(body).trim()
}
