//! The docs index read from the installed Blender, its cache, and the model's retrieval tool
//! in a run (issue 36's acceptance: "which node distributes points on faces, and what are
//! its inputs", answered from the index of the installed Blender).

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};
use viga_gn::docs::{DocsCache, DocsSearch, SearchLimits};
use viga_gn::run::SEARCH_TOOL;
use viga_gn::{ExecutorRegistry, GnRun, GnRunConfig, PythonPolicy, RunState};
use viga_protocol::event::RunEvent;
use viga_protocol::message::ToolCall;
use viga_provider::scripted::{Expectation, Script, Turn};
use viga_provider::{FinishReason, ModelResponse, ScriptedProvider};

use super::{PLANE, fresh, on_blender};

const QUESTION: &str = "which node distributes points on faces, and what are its inputs";

/// Built from the installed Blender, the index answers the question with the node and its
/// inputs as that Blender makes them; a second load reads the cache, a corrupt cache file
/// is rebuilt with a warning, and the build leaves no node group behind.
#[test]
fn the_installed_blenders_index_names_the_node_that_distributes_points_on_faces() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let dir = tempfile::tempdir().unwrap();
        let cache = DocsCache::new(dir.path());
        let loaded = cache.load_or_build(&blender).await.unwrap();
        assert!(
            loaded.built && loaded.warnings.is_empty(),
            "{:?}",
            loaded.warnings
        );
        let size = std::fs::metadata(&loaded.file).unwrap().len();
        eprintln!(
            "docs index of Blender {}: {} node types, {} API types, built in {:.0} ms, {size} bytes",
            loaded.index.blender_version,
            loaded.index.nodes.len(),
            loaded.index.api_types.len(),
            loaded.took_ms
        );
        assert!(
            loaded.index.nodes.len() > 200,
            "{}",
            loaded.index.nodes.len()
        );
        assert!(
            loaded
                .index
                .api_types
                .iter()
                .any(|api| api.name == "NodesModifier")
        );
        let groups: Vec<String> = blender
            .call("baseline", &json!({}))
            .await
            .map(|baseline: Value| baseline["node_groups"].clone())
            .ok()
            .and_then(|groups| serde_json::from_value(groups).ok())
            .unwrap_or_default();
        assert!(
            groups.iter().all(|group| !group.contains("viga-docs")),
            "{groups:?}"
        );

        let node = loaded
            .index
            .node("GeometryNodeDistributePointsOnFaces")
            .unwrap()
            .clone();
        let search = DocsSearch::new(loaded.index.clone());
        let started = Instant::now();
        let answer = search.search(QUESTION, SearchLimits::default());
        eprintln!(
            "search: {:?} for {} chars",
            started.elapsed(),
            answer.text.len()
        );
        assert_eq!(
            answer.hits[0].name, "GeometryNodeDistributePointsOnFaces",
            "{}",
            answer.text
        );
        let inputs: Vec<&str> = node
            .inputs
            .iter()
            .map(|socket| socket.name.as_str())
            .collect();
        for wanted in [
            "Mesh",
            "Selection",
            "Distance Min",
            "Density Max",
            "Density",
            "Seed",
        ] {
            assert!(inputs.contains(&wanted), "{inputs:?}");
        }
        for expected in [
            "GeometryNodeDistributePointsOnFaces (\"Distribute Points on Faces\")",
            "inputs: Mesh [Geometry]; Selection [Bool, default true]; Distance Min [FloatDistance",
            "Density Max [Float, default 10.0, shown by another setting]",
            "Seed [Int, default 0]",
            "outputs: Points [Geometry]",
            "distribute_method (enum) one of RANDOM|POISSON, default RANDOM",
        ] {
            assert!(
                answer.text.contains(expected),
                "{expected:?} not in {}",
                answer.text
            );
        }

        let again = cache.load_or_build(&blender).await.unwrap();
        assert!(!again.built);
        assert_eq!(again.index, loaded.index);
        eprintln!("read from the cache in {:.1} ms", again.took_ms);
        std::fs::write(&loaded.file, b"{\"format\": 1, \"nodes\": [").unwrap();
        let rebuilt = cache.load_or_build(&blender).await.unwrap();
        assert!(rebuilt.built);
        assert!(
            rebuilt.warnings[0].contains("is not used"),
            "{:?}",
            rebuilt.warnings
        );
        assert_eq!(rebuilt.index, loaded.index);
    });
}

fn text_turn(reply: &Value, expect: Expectation) -> Turn {
    Turn {
        expect,
        response: ModelResponse::text_only(reply.to_string(), FinishReason::Stop),
        delay_ms: 0,
    }
}

/// The model calls the tool, reads the node's inputs from the result, and builds with
/// them; the search is a `ToolInvoked` event and counted. A model without tool calling asks
/// through `meta.search_node_docs` and gets the same answer as feedback.
#[test]
fn the_model_searches_the_docs_through_the_tool_and_through_meta() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let dir = tempfile::tempdir().unwrap();
        let mut call = ModelResponse::text_only("", FinishReason::ToolCalls);
        call.tool_calls.push(ToolCall {
            id: "c1".into(),
            name: SEARCH_TOOL.into(),
            arguments: json!({"query": QUESTION, "max_results": 2}),
        });
        let search_turn = Turn {
            expect: Expectation {
                tools_include: vec![SEARCH_TOOL.into()],
                system_contains: Some(SEARCH_TOOL.into()),
                ..Expectation::default()
            },
            response: call,
            delay_ms: 0,
        };
        let meta = json!({"version": 1, "steps": [], "done": false,
            "meta": {"search_node_docs": ["instance on points"]}});
        let build = json!({"version": 1, "done": true, "final_message": "scattered", "steps": [
        {"id": "t", "type": "GN_OPS", "payload": {"ops": [
            {"op": "ensure_target", "object": "Plane", "modifier": "GN"},
            {"op": "add_node", "id": "scatter", "bl_idname": "GeometryNodeDistributePointsOnFaces"},
            {"op": "set_input", "node": "scatter", "socket": "Density", "value": 20},
            {"op": "link", "from_node": "Group Input", "from_socket": "Geometry", "to_node": "scatter", "to_socket": "Mesh"},
            {"op": "link", "from_node": "scatter", "from_socket": "Points", "to_node": "Group Output", "to_socket": "Geometry"}
        ]}}]});
        let expect = |text: &str| Expectation {
            last_message_contains: Some(text.to_owned()),
            ..Expectation::default()
        };
        let provider = Arc::new(ScriptedProvider::new(
            "scripted:docs",
            Script {
                description: String::new(),
                turns: vec![
                    search_turn,
                    text_turn(&meta, expect("Density [Float, default 10.0]")),
                    text_turn(
                        &build,
                        expect("GeometryNodeInstanceOnPoints (\"Instance on Points\")"),
                    ),
                ],
            },
        ));
        let mut config = GnRunConfig::new("scatter points on the plane");
        config.object = Some("Plane".into());
        config.docs = Some(DocsCache::new(dir.path()));
        let mut run = GnRun::new(
            config,
            provider,
            blender.clone(),
            ExecutorRegistry::with_defaults(PythonPolicy::safe()),
        )
        .start();
        let mut searches = Vec::new();
        while let Some(event) = run.next_event().await {
            if let RunEvent::ToolInvoked {
                tool, ok, summary, ..
            } = event.event
            {
                searches.push((tool, ok, summary));
            }
        }
        let outcome = run.wait().await.unwrap();
        assert_eq!(outcome.state, RunState::Done, "{:?}", outcome.problem());
        assert_eq!(outcome.rounds, 2);
        assert_eq!(outcome.telemetry.counters.doc_searches, 2);
        assert!(
            outcome
                .telemetry
                .docs_index
                .as_ref()
                .is_some_and(|docs| docs.built)
        );
        assert_eq!(searches.len(), 2, "{searches:?}");
        assert!(
            searches
                .iter()
                .all(|(tool, ok, _)| tool == SEARCH_TOOL && *ok)
        );
        assert!(
            searches[0]
                .2
                .contains("GeometryNodeDistributePointsOnFaces"),
            "{searches:?}"
        );
    });
}

fn search_call(id: &str, expect: Expectation) -> Turn {
    let mut call = ModelResponse::text_only("", FinishReason::ToolCalls);
    call.tool_calls.push(ToolCall {
        id: id.into(),
        name: SEARCH_TOOL.into(),
        arguments: json!({"query": "set position"}),
    });
    Turn {
        expect,
        response: call,
        delay_ms: 0,
    }
}

/// Searches are bounded: past the run's allowance a search is answered with why it did not
/// run (and the tool is no longer offered), and a fourth tool turn in one round is refused
/// like a reply that is not one, costing the round.
#[test]
fn searches_past_the_allowance_and_tool_turns_past_the_round_are_refused() {
    on_blender(|blender| async move {
        fresh(&blender, PLANE).await;
        let dir = tempfile::tempdir().unwrap();
        let expect = |text: &str| Expectation {
            last_message_contains: Some(text.to_owned()),
            ..Expectation::default()
        };
        let done = json!({"version": 1, "done": true, "final_message": "target", "steps": [
            {"id": "t", "type": "GN_OPS", "payload": {"ops": [
                {"op": "ensure_target", "object": "Plane", "modifier": "GN"}]}}]});
        let turns = vec![
            search_call("c1", Expectation::default()),
            search_call("c2", expect("GeometryNodeSetPosition")),
            search_call(
                "c3",
                expect("no searches are left in this run (it allows 1)"),
            ),
            search_call("c4", expect("no searches are left")),
            text_turn(&done, expect("again after 3 searches this round")),
        ];
        let provider = Arc::new(ScriptedProvider::new(
            "scripted:bounded",
            Script {
                description: String::new(),
                turns,
            },
        ));
        let mut config = GnRunConfig::new("move the points");
        config.object = Some("Plane".into());
        config.docs = Some(DocsCache::new(dir.path()));
        config.max_doc_searches = 1;
        let run = GnRun::new(
            config,
            provider,
            blender.clone(),
            ExecutorRegistry::with_defaults(PythonPolicy::safe()),
        )
        .start();
        let outcome = run.wait().await.unwrap();
        assert_eq!(outcome.state, RunState::Done, "{:?}", outcome.problem());
        assert_eq!(outcome.rounds, 2);
        assert_eq!(outcome.telemetry.counters.doc_searches, 1);
        assert_eq!(outcome.telemetry.counters.protocol_errors, 1);
    });
}
