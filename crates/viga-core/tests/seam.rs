//! The domain seam, proved from outside the crate: a domain written here on the public API
//! alone (no Blender, no renderer) runs the loop, is resumed from its run folder, and gets a
//! report that describes it and shows its own section, through the kind a front end registers.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use viga_contain::ContainedWorkers;
use viga_core::domain::{
    Domain, ProgramFormat, TargetView, ToolRole, ViewRender, WorkerFault, WorkerWatch,
};
use viga_core::{CoreError, DomainKind, DomainKinds, RecordedDomain, RunConfig, RunFolder};
use viga_protocol::event::StopReason;
use viga_protocol::iteration::ExecutionResult;
use viga_protocol::message::ToolSpec;
use viga_provider::{Provider, ScriptedProvider};
use viga_sandbox::ContainmentPolicy;
use viga_skills::{ToolError, ToolOutput};

/// Programs are lines of a poem; the result is the last poem, kept as `final.txt`.
#[derive(Debug, Default)]
struct Poems {
    watch: WorkerWatch,
    poem: Mutex<String>,
}

#[async_trait::async_trait]
impl Domain for Poems {
    fn name(&self) -> &str {
        "poems"
    }
    fn program_format(&self) -> ProgramFormat {
        ProgramFormat::new("text", "the whole poem")
    }
    fn watch(&self) -> &WorkerWatch {
        &self.watch
    }
    fn settings(&self) -> Value {
        json!({"metre": "free"})
    }
    async fn execute(
        &self,
        program: &str,
        _limit: Duration,
    ) -> Result<ExecutionResult, WorkerFault> {
        *self.poem.lock().unwrap() = program.to_owned();
        Ok(ExecutionResult::default())
    }
    async fn render_view(
        &self,
        _target: &TargetView,
        _width: u32,
        _height: u32,
    ) -> Result<ViewRender, WorkerFault> {
        Ok(ViewRender::Unavailable("poems are not pictures".to_owned()))
    }
    async fn overview(&self) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(self.poem.lock().unwrap().clone()))
    }
    fn tools(&self, _role: ToolRole) -> Vec<ToolSpec> {
        Vec::new()
    }
    async fn call_tool(
        &self,
        _role: ToolRole,
        name: &str,
        _arguments: Value,
    ) -> Result<ToolOutput, ToolError> {
        Err(ToolError::Recoverable(format!("no tool {name}")))
    }
    async fn save_result(
        &self,
        program: &str,
        _limit: Duration,
        folder: &Path,
    ) -> Result<Vec<PathBuf>, WorkerFault> {
        let path = folder.join("final.txt");
        std::fs::write(&path, program).map_err(|err| WorkerFault::other(err.to_string()))?;
        Ok(vec![path])
    }
}

/// The poems domain as run folders know it: its line in the report and a section of its own.
#[derive(Debug)]
struct PoemsKind;

#[async_trait::async_trait]
impl DomainKind for PoemsKind {
    fn name(&self) -> &'static str {
        "poems"
    }
    fn describe(&self, recorded: &RecordedDomain, _has_target: bool) -> String {
        format!(
            "poems in {} metre",
            recorded.settings["metre"].as_str().unwrap_or("?")
        )
    }
    fn report_sections(&self, folder: &RunFolder) -> String {
        let poem = std::fs::read_to_string(folder.root().join("final.txt")).unwrap_or_default();
        format!("<section><h2>The poem</h2><pre>{poem}</pre></section>")
    }
    async fn reopen(
        &self,
        _run_folder: &Path,
        _contained: &ContainedWorkers,
        _provider: Arc<dyn Provider>,
    ) -> Result<Arc<dyn Domain>, CoreError> {
        Ok(Arc::new(Poems::default()))
    }
}

fn provider(turns: Value) -> Arc<ScriptedProvider> {
    let script = serde_json::from_value(json!({"description": "poems", "turns": turns})).unwrap();
    Arc::new(ScriptedProvider::new("scripted:poems", script))
}

fn poem(text: &str) -> Value {
    json!({"response": {"text": format!("```text\n{text}\n```"), "finish_reason": "stop"}})
}

fn verdict(accepted: bool) -> Value {
    json!({"response": {"text": "", "finish_reason": "tool_calls", "tool_calls": [{"id": "v",
        "name": "end_process", "arguments": {"visual_differences": [], "suggestions": ["rhyme"],
        "accepted": accepted}}]}})
}

#[tokio::test]
async fn a_domain_built_on_the_public_api_runs_resumes_and_reports() {
    let output = tempfile::tempdir().unwrap();
    let mut config = RunConfig::new("a poem about the sea");
    config.plan_each_iteration = false;
    config.max_iterations = 1;
    let first = provider(json!([poem("the sea"), verdict(false)]));
    let run = viga_core::start(config, first, Arc::new(Poems::default()), output.path()).unwrap();
    let outcome = run.wait().await.unwrap();
    assert_eq!(outcome.stop, StopReason::MaxIterations);
    let folder = outcome.folder;
    let (_, recorded) = RunFolder::open(&folder).unwrap().read_args().unwrap();
    assert_eq!(recorded.name, "poems");

    let second = provider(json!([poem("the sea, the sea"), verdict(true)]));
    let kinds = DomainKinds::new().with(Arc::new(PoemsKind));
    let nothing_contained = ContainedWorkers::new(ContainmentPolicy::Off, Vec::new());
    let domain = kinds
        .reopen(&folder, &nothing_contained, second.clone())
        .await
        .unwrap();
    let resumed = viga_core::resume(&folder, second, domain, Some(2)).unwrap();
    let outcome = resumed.wait().await.unwrap();
    assert_eq!(outcome.stop, StopReason::Accepted);
    assert_eq!(outcome.iterations, 2);
    assert_eq!(
        std::fs::read_to_string(folder.join("final.txt")).unwrap(),
        "the sea, the sea\n"
    );

    let html = viga_core::report::render_html(&folder, &kinds).unwrap();
    assert!(
        html.contains("poems in free metre"),
        "the kind describes the run"
    );
    assert!(
        html.contains("<h2>The poem</h2><pre>the sea, the sea"),
        "its own section"
    );
    assert_eq!(html.matches("<h2>Iteration ").count(), 2);
    // A viga that does not know the domain still reports the run, and says so, and refuses
    // to resume it naming what it knows.
    let unknown = viga_core::report::render_html(&folder, &DomainKinds::new()).unwrap();
    assert!(unknown.contains("poems: a domain this build of viga does not know"));
    let third = provider(json!([]));
    let refused = DomainKinds::new()
        .reopen(&folder, &nothing_contained, third)
        .await
        .err()
        .unwrap();
    assert!(refused.to_string().contains("does not know"), "{refused}");
}
