//! A domain for the core's unit tests: programs are text, the result is the last one.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use viga_protocol::iteration::ExecutionResult;
use viga_protocol::message::ToolSpec;
use viga_sandbox::ContainmentStatus;
use viga_skills::{ToolError, ToolOutput};

use crate::domain::{
    Domain, ProgramFormat, TargetView, ToolRole, ViewRender, WorkerFault, WorkerWatch,
};

#[derive(Debug, Default)]
pub(crate) struct Notes {
    watch: WorkerWatch,
    text: Mutex<String>,
    /// What the domain says its worker runs under.
    pub(crate) containment: Option<ContainmentStatus>,
}

#[async_trait]
impl Domain for Notes {
    fn name(&self) -> &str {
        "notes"
    }
    fn program_format(&self) -> ProgramFormat {
        ProgramFormat::new("text", "the whole note")
    }
    fn watch(&self) -> &WorkerWatch {
        &self.watch
    }
    fn containment(&self) -> Option<ContainmentStatus> {
        self.containment.clone()
    }
    async fn execute(
        &self,
        program: &str,
        _limit: Duration,
    ) -> Result<ExecutionResult, WorkerFault> {
        *self.text.lock().unwrap() = program.to_owned();
        Ok(ExecutionResult::default())
    }
    async fn render_view(
        &self,
        _target: &TargetView,
        _width: u32,
        _height: u32,
    ) -> Result<ViewRender, WorkerFault> {
        Ok(ViewRender::Unavailable("notes have no pictures".to_owned()))
    }
    async fn overview(&self) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(self.text.lock().unwrap().clone()))
    }
    fn tools(&self, role: ToolRole) -> Vec<ToolSpec> {
        match role {
            ToolRole::Generator => vec![ToolSpec {
                name: "read_notes".to_owned(),
                description: "Read the note.".to_owned(),
                parameters: serde_json::json!({"type": "object"}),
            }],
            ToolRole::Verifier => Vec::new(),
        }
    }
    async fn call_tool(
        &self,
        _role: ToolRole,
        _name: &str,
        _arguments: Value,
    ) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(self.text.lock().unwrap().clone()))
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
