//! The model's retrieval tool: `search_node_docs` searches the docs index of the run's own
//! Blender ([`crate::docs`]), offered as a tool and, for models without tool calling, as
//! `meta.search_node_docs` in a reply. The index is read from its cache (or built) on the
//! first search, so a run that never searches never touches it. Searches are bounded per
//! run (`GnRunConfig::max_doc_searches`) and tool turns per round; each one is a typed
//! `ToolInvoked` event in the run's log.

use std::ops::ControlFlow::{self, Break, Continue};
use std::sync::Arc;
use std::time::Instant;

use serde::Deserialize;
use serde_json::{Value, json};
use viga_protocol::event::RunEvent;
use viga_protocol::message::{ChatMessage, ContentPart, ToolCall, ToolResult, ToolSpec};

use crate::GnError;
use crate::docs::{DocsSearch, SearchLimits};

use super::{Answer, Conversation, Ending, GnRun, Session};

/// The tool's name, as the model calls it.
pub const SEARCH_TOOL: &str = "search_node_docs";
/// The meta key a reply asks for searches with, when the model does not call tools.
pub const SEARCH_META: &str = "search_node_docs";
/// Tool turns (model calls answered with search results) within one round.
const TOOL_TURNS_PER_ROUND: u32 = 3;
/// Hits a call may ask for at most.
const MAX_HITS: usize = 10;

/// What the system prompt says of the docs, when the run has them.
pub(super) const DOCS_PROMPT: &str = "\n\
To look up a node type or the Python API, call the tool `search_node_docs` with a query \
(\"which node distributes points on faces\", \"GeometryNodeSetPosition\", \"NodeTree links\"); \
it searches the docs of the Blender this run uses: every Geometry Nodes node type with its \
inputs and outputs (names, socket types, defaults) and settings, and the Python API types a \
Geometry Nodes program uses. Without tool calling, send no steps and \
\"meta\": {\"search_node_docs\": [\"query\", ...]}. Searches per run are limited.\n";

/// The docs of a run: not looked at yet, at hand, or unavailable (why).
#[derive(Default)]
pub(super) enum Docs {
    #[default]
    NotLoaded,
    Ready(Arc<DocsSearch>),
    Unavailable(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArguments {
    query: String,
    #[serde(default)]
    max_results: Option<usize>,
}

/// The tool as the model is offered it.
pub(super) fn search_tool() -> ToolSpec {
    ToolSpec {
        name: SEARCH_TOOL.to_owned(),
        description: "Search the docs of the Blender this run uses: every Geometry Nodes node type (bl_idname, label, description, inputs and outputs with socket types and defaults, settings) and the Python API types a Geometry Nodes program uses. Answers the best matches, ranked.".to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What you look for, in words or by name."},
                "max_results": {"type": "integer", "minimum": 1, "maximum": MAX_HITS, "description": "At most this many matches (default 5)."}
            },
            "required": ["query"],
            "additionalProperties": false
        }),
    }
}

impl GnRun {
    /// Whether the next request offers the tool: the run has docs, and searches are left.
    pub(super) fn offers_search(&self, session: &Session) -> bool {
        self.config.docs.is_some()
            && session.doc_searches < self.config.max_doc_searches
            && !matches!(session.docs, Docs::Unavailable(_))
    }

    /// The round's reply, after answering the searches the model called the tool for (at
    /// most [`TOOL_TURNS_PER_ROUND`] turns; a call after them is refused, as a reply that
    /// is not one).
    pub(super) async fn answer_after_searches(
        &self,
        conversation: &Conversation<'_>,
        round: u32,
        session: &mut Session,
    ) -> ControlFlow<Ending, Result<Answer, String>> {
        let mut turn = 0;
        loop {
            let mut answer = self.ask(conversation, round, session).await?;
            let offered = self.offers_search(session);
            answer.response = viga_core::written_calls::with_tool_call_from_text(
                answer.response,
                |name| offered && name == SEARCH_TOOL,
                round,
                turn,
            );
            if answer.response.tool_calls.is_empty() {
                return Continue(Ok(answer));
            }
            if turn >= TOOL_TURNS_PER_ROUND {
                // The calls stay in the conversation as what the model said, so the refusal
                // answers them and the roles keep alternating.
                let called = format!("(called {SEARCH_TOOL} again)");
                session
                    .messages
                    .push(ChatMessage::assistant(vec![ContentPart::text(called)]));
                return Continue(Err(format!(
                    "you called {SEARCH_TOOL} again after {TOOL_TURNS_PER_ROUND} searches this round; answer with one JSON object now"
                )));
            }
            let calls = answer.response.tool_calls.clone();
            let mut results = Vec::new();
            for call in &calls {
                results.push(self.answer_call(round, call, session).await?);
            }
            let mut said: Vec<ContentPart> = Vec::new();
            if !answer.response.text.trim().is_empty() {
                said.push(ContentPart::text(answer.response.text.clone()));
            }
            said.extend(calls.into_iter().map(ContentPart::ToolCall));
            session.messages.push(ChatMessage::assistant(said));
            session.messages.push(ChatMessage::user(results));
            turn += 1;
        }
    }

    /// One tool call, answered.
    async fn answer_call(
        &self,
        round: u32,
        call: &ToolCall,
        session: &mut Session,
    ) -> ControlFlow<Ending, ContentPart> {
        let result = if call.name != SEARCH_TOOL {
            Err(format!(
                "there is no tool named {:?}; the one tool is {SEARCH_TOOL}",
                call.name
            ))
        } else {
            match serde_json::from_value::<SearchArguments>(call.arguments.clone()) {
                Ok(arguments) => {
                    let limits = SearchLimits {
                        max_hits: arguments.max_results.unwrap_or(5).clamp(1, MAX_HITS),
                        ..self.config.search_limits
                    };
                    self.search(round, &arguments.query, limits, session)
                        .await?
                }
                Err(err) => Err(format!(
                    "{SEARCH_TOOL} takes {{\"query\": \"...\", \"max_results\": 5}}: {err}"
                )),
            }
        };
        let (text, is_error) = match result {
            Ok(text) => (text, false),
            Err(why) => (why, true),
        };
        Continue(ContentPart::ToolResult(ToolResult {
            call_id: call.id.clone(),
            text,
            images: Vec::new(),
            is_error,
        }))
    }

    /// The searches a reply asked for in its meta, as lines of feedback.
    pub(super) async fn meta_searches(
        &self,
        round: u32,
        queries: Vec<String>,
        feedback: &mut Vec<String>,
        session: &mut Session,
    ) -> ControlFlow<Ending> {
        for query in queries {
            match self
                .search(round, &query, self.config.search_limits, session)
                .await?
            {
                Ok(text) => feedback.push(text),
                Err(why) => feedback.push(format!("Search {query:?} was not run: {why}")),
            }
        }
        Continue(())
    }

    /// One search, counted against the run's searches and recorded as a `ToolInvoked`
    /// event: its text, or why it could not run.
    async fn search(
        &self,
        round: u32,
        query: &str,
        limits: SearchLimits,
        session: &mut Session,
    ) -> ControlFlow<Ending, Result<String, String>> {
        let arguments = json!({"query": query, "max_results": limits.max_hits});
        let result = if session.doc_searches >= self.config.max_doc_searches {
            Err(format!(
                "no searches are left in this run (it allows {}); answer with what you know",
                self.config.max_doc_searches
            ))
        } else if query.trim().is_empty() {
            Err("the query is empty; say what you look for".to_owned())
        } else {
            session.doc_searches += 1;
            session.recorder.telemetry.counters.doc_searches += 1;
            self.docs(session).await?.map(|docs| {
                let started = Instant::now();
                let answer = docs.search(query, limits);
                let took_ms = started.elapsed().as_secs_f64() * 1000.0;
                (answer, took_ms)
            })
        };
        let (ok, summary, result, text) = match result {
            Ok((answer, took_ms)) => {
                let names: Vec<&str> = answer.hits.iter().map(|hit| hit.name.as_str()).collect();
                let summary = format!(
                    "{} hits in {took_ms:.2} ms: {}",
                    names.len(),
                    names.join(", ")
                );
                let detail =
                    json!({"hits": answer.hits, "left_out": answer.left_out, "took_ms": took_ms});
                (true, summary, detail, Ok(answer.text))
            }
            Err(why) => (false, why.clone(), Value::String(why.clone()), Err(why)),
        };
        session.recorder.emit(RunEvent::ToolInvoked {
            index: round,
            tool: SEARCH_TOOL.to_owned(),
            ok,
            summary,
            arguments: Some(arguments),
            result: Some(result),
        });
        Continue(text)
    }

    /// The docs index, read or built on first use. A failure to build it leaves the run
    /// without docs (the model hears why); only a lost Blender ends the run.
    async fn docs(
        &self,
        session: &mut Session,
    ) -> ControlFlow<Ending, Result<Arc<DocsSearch>, String>> {
        match &session.docs {
            Docs::Ready(docs) => return Continue(Ok(Arc::clone(docs))),
            Docs::Unavailable(why) => return Continue(Err(why.clone())),
            Docs::NotLoaded => {}
        }
        let Some(cache) = &self.config.docs else {
            return Continue(Err("this run has no docs index".to_owned()));
        };
        match cache.load_or_build(&self.blender).await {
            Ok(loaded) => {
                for warning in &loaded.warnings {
                    session.recorder.warn(warning.clone());
                }
                session.recorder.telemetry.docs_index = Some(crate::telemetry::DocsLoad {
                    blender_version: loaded.index.blender_version.clone(),
                    nodes: loaded.index.nodes.len(),
                    built: loaded.built,
                    took_ms: loaded.took_ms,
                });
                let docs = Arc::new(DocsSearch::new(loaded.index));
                session.docs = Docs::Ready(Arc::clone(&docs));
                Continue(Ok(docs))
            }
            Err(err @ GnError::Blender { .. }) => {
                Break(Ending::failed("cannot read the docs", &err))
            }
            Err(err) => {
                let why = format!("the docs index could not be read from Blender: {err}");
                session.recorder.warn(why.clone());
                session.docs = Docs::Unavailable(why.clone());
                Continue(Err(why))
            }
        }
    }
}
