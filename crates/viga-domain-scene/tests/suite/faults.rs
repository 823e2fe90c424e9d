//! Faults cost nothing: Blender killed (SIGKILL) in every phase of a run, a restart that fails
//! once, and a model that finds a request too long; the run completes as scripted. Only a
//! restart that fails twice in a row stops it. Real Blender throughout.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use viga_blender::{
    BlenderCommands as _, BlenderLauncher, BlenderTransport, TransportError, Worker, WorkerConfig,
    locate,
};
use viga_protocol::bridge::{BridgeCommand, RenderEngine, RenderRequest, RenderSpec, SceneReset};
use viga_protocol::event::{FailureKind, ModelRole, RunEvent, StopReason};
use viga_protocol::iteration::FailureClass;
use viga_protocol::message::ContentPart;
use viga_provider::{ModelRequest, ModelResponse, Provider, ProviderError};
use viga_testkit::blender::FaultPlan;
use viga_testkit::{BLENDER_TEST_LIMIT, within};

use super::{config, provider, scene, scene_with, text, verdict};

const SCENE: &str = "import bpy
bpy.ops.mesh.primitive_cube_add(size=2, location=(0, 0, 1))
bpy.context.object.name = 'Crate'
bpy.ops.object.camera_add(location=(6, -6, 4), rotation=(1.1, 0, 0.785))
bpy.context.scene.camera = bpy.context.object
";

/// What the test does to Blender just before a call reaches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// SIGKILL the worker process: the supervisor restarts it.
    Kill,
    /// SIGKILL it and make the restart fail (Blender exits at once); the next call finds
    /// Blender startable again, until `BreakForGood`.
    KillAndBreakOnce,
    /// SIGKILL it, and every restart from now on fails.
    KillAndBreakForGood,
}

/// Passes calls to a real worker, doing a [`Fault`] before chosen ones: the n-th call of a
/// command (counting every call that goes through, the loop's re-runs included).
struct Saboteur {
    worker: Arc<Worker>,
    plan: FaultPlan<Fault>,
    /// While this file exists, Blender exits as soon as it is started (see `breakable`).
    broken_flag: PathBuf,
    break_once: Mutex<bool>,
    done: AtomicUsize,
}

impl Saboteur {
    fn new(worker: Arc<Worker>, broken_flag: PathBuf) -> Self {
        Self {
            worker,
            plan: FaultPlan::new(),
            broken_flag,
            break_once: Mutex::new(false),
            done: AtomicUsize::new(0),
        }
    }

    fn on(mut self, command: &'static str, nth: usize, fault: Fault) -> Self {
        self.plan = self.plan.on(command, nth, fault);
        self
    }

    /// The worker's current process: `hello().pid` names only the first one, and the
    /// supervisor starts a new process after every loss.
    async fn kill_worker(&self) {
        let probe = self
            .worker
            .execute("import os\nprint(os.getpid())", None, None)
            .await
            .unwrap();
        let pid = probe.stdout.trim().to_owned();
        let killed = std::process::Command::new("kill")
            .args(["-KILL", &pid])
            .status()
            .unwrap();
        assert!(killed.success(), "kill -KILL {pid}");
    }
}

#[async_trait]
impl BlenderTransport for Saboteur {
    async fn call(
        &self,
        command: BridgeCommand,
        timeout: Option<Duration>,
    ) -> Result<Value, TransportError> {
        let fault = self.plan.next(command.name());
        if std::mem::take(&mut *self.break_once.lock().unwrap()) {
            // The failed restart happened during the sabotaged call: Blender starts again.
            std::fs::remove_file(&self.broken_flag).unwrap();
        }
        if let Some(fault) = fault {
            if fault != Fault::Kill {
                std::fs::write(&self.broken_flag, "").unwrap();
                *self.break_once.lock().unwrap() = fault == Fault::KillAndBreakOnce;
            }
            self.kill_worker().await;
            self.done.fetch_add(1, Ordering::SeqCst);
        }
        self.worker.call(command, timeout).await
    }

    fn describe(&self) -> String {
        self.worker.describe()
    }

    fn shared_folder(&self) -> Option<&viga_blender::ScratchFolder> {
        self.worker.shared_folder()
    }

    async fn distrust(&self, why: &str) -> viga_blender::Recovery {
        self.worker.distrust(why).await
    }
}

/// A worker whose Blender refuses to start while `flag` exists: the real launcher behind a
/// shell script that exits first when told to.
async fn breakable_worker(dir: &Path) -> (Arc<Worker>, PathBuf) {
    let flag = dir.join("blender-is-broken");
    let script = dir.join("blender-or-not.sh");
    let (real, wrap): (PathBuf, fn(PathBuf) -> BlenderLauncher) = match locate().unwrap() {
        BlenderLauncher::PythonModule { python } => {
            (python, |python| BlenderLauncher::PythonModule { python })
        }
        BlenderLauncher::Binary { blender } => {
            (blender, |blender| BlenderLauncher::Binary { blender })
        }
    };
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nif [ -e '{}' ]; then echo 'broken on purpose' >&2; exit 3; fi\nexec '{}' \"$@\"\n",
            flag.display(),
            real.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let worker = Worker::start(WorkerConfig::new(wrap(script)))
        .await
        .unwrap();
    (Arc::new(worker), flag)
}

/// The goal scene rendered by the scene camera, as the run's target.
async fn target_of(worker: &Worker, dir: &Path) -> PathBuf {
    let ran = worker
        .execute(SCENE, Some(SceneReset::Factory), None)
        .await
        .unwrap();
    assert!(ran.succeeded(), "{ran:?}");
    let spec = RenderSpec {
        engine: RenderEngine::Workbench,
        width: 48,
        height: 48,
        samples: None,
    };
    let request = RenderRequest {
        camera: None,
        pose: None,
        spec,
        output_path: None,
    };
    let goal = worker.render(request, None).await.unwrap();
    let path = dir.join("goal.png");
    std::fs::write(&path, &goal.image.data).unwrap();
    path
}

fn code() -> Value {
    super::code(SCENE)
}

fn tool_turn(name: &str, arguments: Value, expect: Value) -> Value {
    json!({"expect": expect, "response": {"text": "Let me look.", "tool_calls": [
        {"id": "t", "name": name, "arguments": arguments}
    ], "finish_reason": "tool_calls"}})
}

fn restarted_note() -> Value {
    json!({"last_message_contains": "Blender was restarted meanwhile"})
}

async fn drain(mut handle: viga_core::RunHandle) -> (Vec<RunEvent>, viga_core::RunOutcome) {
    let mut events = Vec::new();
    while let Some(event) = handle.next_event().await {
        events.push(event.event);
    }
    (events, handle.wait().await.unwrap())
}

/// Sabotage in every phase. Calls, in order: iteration 1 execute 1, scene_info 1, render 1
/// (scoring), render_framed_views 1, render 2 (set_camera). Iteration 2: execute 2 (killed;
/// the program runs again: 3), scene_info 2, render 3 (killed; rebuild: execute 4; again:
/// scene_info 3, render 4), render_framed_views 2 (killed, and the restart fails once;
/// rebuild: execute 5; again: 3), render 5 (investigate; killed; rebuild: execute 6; again:
/// render 6). Iteration 3: execute 7, scene_info 4 (killed; rebuild: execute 8; again: 5,
/// render 7), render_framed_views 4. The final scene: execute 9, save_blend 1 (killed;
/// again: execute 10, save_blend 2).
fn in_every_phase(worker: Arc<Worker>, broken_flag: PathBuf) -> Saboteur {
    Saboteur::new(worker, broken_flag)
        .on("execute", 2, Fault::Kill)
        .on("render", 3, Fault::Kill)
        .on("render_framed_views", 2, Fault::KillAndBreakOnce)
        .on("render", 5, Fault::Kill)
        .on("scene_info", 4, Fault::Kill)
        .on("save_blend", 1, Fault::Kill)
}

/// Three iterations: rejected after a look, rejected after a look (whose result says the
/// scene was rebuilt), accepted by a call written as JSON text.
fn three_iterations() -> Vec<Value> {
    let accept_as_text = json!({"name": "end_process", "arguments": {
        "visual_differences": [], "suggestions": [], "accepted": true}});
    vec![
        text("1. a crate and a camera"),
        code(),
        tool_turn("set_camera", json!({"location": [5, -5, 3]}), json!({})),
        verdict(false),
        text("2. the same, bigger"),
        code(),
        tool_turn(
            "investigate",
            json!({"instruction": "rotate left"}),
            json!({}),
        ),
        json!({"expect": restarted_note(), "response": {"text": "", "tool_calls": [
            {"id": "v", "name": "end_process", "arguments": {
                "visual_differences": ["small"], "suggestions": ["bigger"], "accepted": false}}
        ], "finish_reason": "tool_calls"}}),
        text("3. keep it"),
        code(),
        // A local model's habit: the call written as JSON text, fenced.
        text(&format!("```json\n{accept_as_text}\n```")),
    ]
}

#[tokio::test]
async fn blender_killed_in_every_phase_costs_nothing_but_time() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let dir = tempfile::tempdir().unwrap();
        let (worker, flag) = breakable_worker(dir.path()).await;
        let target = target_of(&worker, dir.path()).await;
        let saboteur = Arc::new(in_every_phase(Arc::clone(&worker), flag));
        let model = provider(three_iterations());
        let mut settings = config(3);
        settings.targets = vec![viga_core::TargetSpec::picture(target)];
        let output = dir.path().join("output");
        let (events, outcome) = drain(
            viga_core::start(
                settings,
                model.clone(),
                scene_with(saboteur.clone(), super::scene_settings(), true),
                &output,
            )
            .unwrap(),
        )
        .await;
        assert_eq!(
            (outcome.stop.clone(), outcome.iterations),
            (StopReason::Accepted, 3),
            "{events:#?}"
        );
        assert_eq!(
            saboteur.done.load(Ordering::SeqCst),
            6,
            "every fault happened"
        );
        assert_eq!(model.turns_used(), 11, "no model call was repeated");
        let records: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                RunEvent::IterationFinished { record } => Some(record.as_ref().clone()),
                _ => None,
            })
            .collect();
        assert_eq!(
            records
                .iter()
                .map(|r| (r.index, r.failure, r.retry_count))
                .collect::<Vec<_>>(),
            [
                (1, Some(FailureClass::E3), 0),
                (2, Some(FailureClass::E3), 0),
                (3, None, 0)
            ]
        );
        for record in &records {
            assert!(
                record
                    .render_ids
                    .iter()
                    .any(|id| id.ends_with("target-default.png")),
                "iteration {} was scored: {:?}",
                record.index,
                record.render_ids
            );
        }
        let restarts = events
            .iter()
            .filter(|e| matches!(e, RunEvent::WorkerRestarted { .. }))
            .count();
        assert!(restarts >= 6, "{restarts} restarts announced");
        assert!(outcome.folder.join("final.blend").is_file());
        assert!(worker.restarts() >= 7, "six kills and one failed restart");
    })
    .await;
}

#[tokio::test]
async fn a_restart_that_fails_twice_in_a_row_stops_the_run_saying_so() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let dir = tempfile::tempdir().unwrap();
        let (worker, flag) = breakable_worker(dir.path()).await;
        let saboteur = Arc::new(Saboteur::new(Arc::clone(&worker), flag).on(
            "render_framed_views",
            1,
            Fault::KillAndBreakForGood,
        ));
        let model = provider(vec![text("plan"), super::code(super::GOOD_CODE)]);
        let output = dir.path().join("output");
        let (events, outcome) =
            drain(viga_core::start(config(2), model, scene(saboteur), &output).unwrap()).await;
        let StopReason::Failed { message, kind } = &outcome.stop else {
            panic!("{:?}", outcome.stop);
        };
        assert_eq!(*kind, FailureKind::WorkerUnavailable);
        assert!(
            message.contains("could not be restarted twice in a row")
                && message.contains("viga doctor")
                && message.contains("exit status: 3"),
            "{message}"
        );
        assert_eq!(outcome.iterations, 0);
        assert!(matches!(
            events.last(),
            Some(RunEvent::RunFinished {
                stop: StopReason::Failed { .. },
                ..
            })
        ));
    })
    .await;
}

/// Finds the requests `too_long` says are too long; answers the others from the script.
/// Keeps the role and cap of every request.
struct SmallContext {
    script: Arc<viga_provider::ScriptedProvider>,
    too_long: fn(&ModelRequest) -> bool,
    refused: AtomicUsize,
    seen: Mutex<Vec<(ModelRole, u32)>>,
}

impl SmallContext {
    fn new(turns: Vec<Value>, too_long: fn(&ModelRequest) -> bool) -> Arc<Self> {
        Arc::new(Self {
            script: provider(turns),
            too_long,
            refused: AtomicUsize::new(0),
            seen: Mutex::new(Vec::new()),
        })
    }
}

fn memory_iterations_in(request: &ModelRequest) -> usize {
    request
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .map(|part| match part {
            ContentPart::Text { text } => text.matches("## Iteration ").count(),
            _ => 0,
        })
        .sum()
}

#[async_trait]
impl Provider for SmallContext {
    fn name(&self) -> &str {
        "small-context"
    }
    fn model(&self) -> &str {
        "small-context"
    }
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        self.seen
            .lock()
            .unwrap()
            .push((request.role.unwrap(), request.max_tokens));
        if (self.too_long)(request) {
            self.refused.fetch_add(1, Ordering::SeqCst);
            return Err(ProviderError::ContextTooLong {
                provider: "small-context".into(),
                message: "This model's maximum context length is 8192 tokens".into(),
            });
        }
        self.script.complete(request).await
    }
}

#[tokio::test]
async fn a_request_too_long_for_the_model_is_sent_once_more_smaller() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let output = tempfile::tempdir().unwrap();
        let look = |expect: Value| {
            tool_turn("set_camera", json!({"location": [4, -4, 3]}), expect)
        };
        let turns = vec![
            text("plan 1"),
            super::code(super::GOOD_CODE),
            verdict(false),
            text("plan 2"),
            super::code(super::GOOD_CODE),
            verdict(false),
            // Iteration 3: the memory holds two iterations, so plan and program are asked
            // again with the newest only.
            json!({"expect": {"last_message_contains": "## Iteration 2"}, "response": {"text": "plan 3", "finish_reason": "stop"}}),
            super::code(super::GOOD_CODE),
            // The verifier's looks add images until its third turn is too long: it is asked
            // again without the older ones.
            look(json!({})),
            look(json!({})),
            json!({"expect": {"any_message_contains": viga_images_left_out()}, "response": {"text": "", "tool_calls": [
                {"id": "v", "name": "end_process", "arguments": {
                    "visual_differences": [], "suggestions": [], "accepted": true}}
            ], "finish_reason": "tool_calls"}}),
        ];
        let model = SmallContext::new(turns, |request| {
            memory_iterations_in(request) > 1 || request.image_count() > 2
        });
        let mut settings = config(3);
        settings.verifier_max_tokens = 700;
        let (events, outcome) = drain(
            viga_core::start(settings, model.clone(), scene(super::blender().await), output.path())
                .unwrap(),
        )
        .await;
        assert_eq!(
            (outcome.stop.clone(), outcome.iterations),
            (StopReason::Accepted, 3),
            "{events:#?}"
        );
        assert_eq!(model.refused.load(Ordering::SeqCst), 3, "plan, program, verifier");
        let warnings = events
            .iter()
            .filter(|e| matches!(e, RunEvent::Warning { message } if message.contains("too long for the model")))
            .count();
        assert_eq!(warnings, 3);
        // Every request carried its role's output cap.
        for (role, cap) in model.seen.lock().unwrap().iter() {
            let expected = match role {
                ModelRole::Planner => 1024,
                ModelRole::Verifier => 700,
                _ => 4096,
            };
            assert_eq!(*cap, expected, "{role:?}");
        }
    })
    .await;
}

fn viga_images_left_out() -> &'static str {
    "[image left out: the request was too long"
}

#[tokio::test]
async fn a_request_still_too_long_when_smaller_stops_the_run_as_a_context_overflow() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let output = tempfile::tempdir().unwrap();
        let turns = vec![
            text("plan"),
            super::code(super::GOOD_CODE),
            tool_turn("set_camera", json!({"location": [4, -4, 3]}), json!({})),
        ];
        // The verifier's second turn is too long however small it gets.
        let model = SmallContext::new(turns, |request| {
            request.role == Some(ModelRole::Verifier) && request.messages.len() > 1
        });
        let (_, outcome) = drain(
            viga_core::start(
                config(1),
                model.clone(),
                scene(super::blender().await),
                output.path(),
            )
            .unwrap(),
        )
        .await;
        let StopReason::Failed { message, kind } = &outcome.stop else {
            panic!("{:?}", outcome.stop);
        };
        assert_eq!(*kind, FailureKind::ContextOverflow, "{message}");
        assert!(message.contains("maximum context length"), "{message}");
        assert_eq!(
            model.refused.load(Ordering::SeqCst),
            2,
            "asked once more, then gave up"
        );
    })
    .await;
}
