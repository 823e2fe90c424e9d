//! Local telemetry of one run: request and step latency, success and failure counters, token
//! usage, and which replies were replayed from the response cache. It is written to the run folder as `telemetry.json` and never sent anywhere; the
//! user shares it only by exporting the file.

use serde::{Deserialize, Serialize};
use viga_protocol::gn::ActionType;
use viga_protocol::message::TokenUsage;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Telemetry {
    /// Every reply, from the model or the cache, in order.
    pub requests: Vec<RequestSample>,
    pub steps: Vec<StepSample>,
    pub counters: Counters,
    /// Summed over all requests; zero when the provider reports no usage.
    pub usage: TokenUsage,
    /// The docs index, when the model searched it: read from the cache or built.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub docs_index: Option<DocsLoad>,
}

/// How the run came by its docs index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DocsLoad {
    pub blender_version: String,
    pub nodes: usize,
    /// Built now rather than read from the cache.
    pub built: bool,
    pub took_ms: f64,
}

/// One reply: asked of the model, or replayed from the response cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestSample {
    pub round: u32,
    pub latency_ms: f64,
    pub usage: TokenUsage,
    /// Replayed from the response cache: no model call, no latency, no tokens.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepSample {
    pub step_id: String,
    pub action_type: ActionType,
    pub latency_ms: f64,
    pub ok: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Model calls made (replies replayed from the cache are not among them).
    pub requests: u32,
    /// Replies replayed from the response cache.
    #[serde(default)]
    pub cache_hits: u32,
    pub request_failures: u32,
    /// Replies refused by protocol validation before anything ran.
    pub protocol_errors: u32,
    pub context_requests: u32,
    /// Searches of the docs index (tool calls and `meta.search_node_docs` queries).
    #[serde(default)]
    pub doc_searches: u32,
    pub steps_succeeded: u32,
    pub steps_failed: u32,
    pub gate_passes: u32,
    pub gate_failures: u32,
}

impl Telemetry {
    pub fn request(&mut self, round: u32, latency_ms: f64, usage: TokenUsage) {
        self.counters.requests += 1;
        self.usage += usage;
        self.requests.push(RequestSample {
            round,
            latency_ms,
            usage,
            cached: false,
        });
    }

    pub fn cached_reply(&mut self, round: u32) {
        self.counters.cache_hits += 1;
        self.requests.push(RequestSample {
            round,
            latency_ms: 0.0,
            usage: TokenUsage::default(),
            cached: true,
        });
    }

    pub fn step(&mut self, step_id: &str, action_type: ActionType, latency_ms: f64, ok: bool) {
        if ok {
            self.counters.steps_succeeded += 1;
        } else {
            self.counters.steps_failed += 1;
        }
        self.steps.push(StepSample {
            step_id: step_id.to_owned(),
            action_type,
            latency_ms,
            ok,
        });
    }
}
