mod attached;
mod context;
mod docs;
mod e2e;
mod gates;
mod node_tree;
mod ops;
mod presets;
mod python;
mod run;
mod structured_output;

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::runtime::Runtime;
use tokio::sync::Mutex;
use viga_blender::{BlenderCommands as _, Worker, WorkerConfig, locate};
use viga_gn::{ExecContext, ExecutorRegistry, GnBlender, GnError, PythonPolicy, StepOutcome};
use viga_protocol::bridge::SceneReset;
use viga_protocol::gn::GnStep;

/// The longest one test may take. A passing test takes seconds; the margin is for slow CI
/// machines. A hung Blender fails its test with a message instead of hanging the run.
const TEST_TIMEOUT: Duration = Duration::from_secs(120);

/// One warm Blender shared by every test in this binary, so the suite pays for one start
/// instead of one per test.
struct SharedWorker {
    /// A worker's socket, pipes and stderr reader belong to the runtime that started it, and
    /// libtest runs each test on a thread of its own: so every test runs on this runtime,
    /// which lives as long as the process.
    runtime: Runtime,
    /// Locked for a whole test, since every test owns the scene. Empty until the first test
    /// starts Blender, and again after a test timed out (that Blender may still be busy).
    worker: Mutex<Option<Arc<Worker>>>,
}

/// Never dropped (statics are not): when the test process exits, the bridge notices its
/// parent is gone and Blender exits too.
static SHARED: OnceLock<SharedWorker> = OnceLock::new();

/// Runs one test on the shared Blender, alone and within [`TEST_TIMEOUT`]. A test that
/// needs a clean scene resets it first ([`fresh`]): the previous test left its own.
pub(crate) fn on_blender<Test, Body>(test: Test)
where
    Test: FnOnce(GnBlender) -> Body,
    Body: Future<Output = ()>,
{
    let shared = SHARED.get_or_init(|| SharedWorker {
        runtime: tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap(),
        worker: Mutex::new(None),
    });
    shared.runtime.block_on(async {
        let mut slot = shared.worker.lock().await;
        let worker = match slot.as_ref() {
            Some(worker) => worker.clone(),
            // Bounded by the worker's own startup timeout.
            None => slot.insert(Arc::new(start_worker().await)).clone(),
        };
        let finished = tokio::time::timeout(TEST_TIMEOUT, test(GnBlender::new(worker))).await;
        if finished.is_err() {
            // Blender may still be working on the abandoned call. The test's handles went with
            // it, so dropping this one kills that Blender, and the next test starts a fresh one.
            *slot = None;
            panic!("the test did not finish within {TEST_TIMEOUT:?}: Blender or the test hung");
        }
    });
}

async fn start_worker() -> Worker {
    // The error's own words say how to install Blender; its Debug form would not.
    let launcher = locate().unwrap_or_else(|err| panic!("{err}"));
    Worker::start(WorkerConfig::new(launcher)).await.unwrap()
}

pub(crate) const PLANE: &str =
    "import bpy\nbpy.ops.mesh.primitive_plane_add(size=4.0)\nbpy.context.object.name = 'Plane'\n";

/// Resets the scene to an empty factory scene and runs `setup` in it.
pub(crate) async fn fresh(blender: &GnBlender, setup: &str) {
    let result = blender
        .transport()
        .execute(setup, Some(SceneReset::Factory), None)
        .await
        .unwrap();
    assert!(result.succeeded(), "{result:?}");
}

/// Runs raw Blender Python (a stand-in for the user or a stray script editing the scene).
pub(crate) async fn raw(blender: &GnBlender, code: &str) {
    let result = blender.transport().execute(code, None, None).await.unwrap();
    assert!(result.succeeded(), "{result:?}");
}

pub(crate) fn step(value: Value) -> GnStep {
    serde_json::from_value(value).unwrap()
}

pub(crate) fn ops_step(id: &str, ops: Value) -> GnStep {
    step(json!({"id": id, "type": "GN_OPS", "payload": {"ops": ops}}))
}

pub(crate) async fn apply(
    blender: &GnBlender,
    context: &mut ExecContext,
    step: &GnStep,
) -> Result<StepOutcome, GnError> {
    ExecutorRegistry::with_defaults(PythonPolicy::safe())
        .execute(blender, context, step)
        .await
}

/// The declared state of the Plane's tree, as the node_tree_ir slice reports it.
pub(crate) async fn tree_ir(blender: &GnBlender, modifier: &str) -> Value {
    blender
        .call(
            "context_slice",
            &json!({"kind": "node_tree_ir", "object": "Plane", "modifier": modifier, "max_items": 100}),
        )
        .await
        .unwrap()
}

/// The "changed" flags of a GN_OPS outcome, in op order.
pub(crate) fn changed_flags(outcome: &StepOutcome) -> Vec<bool> {
    outcome
        .detail
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["changed"].as_bool().unwrap())
        .collect()
}
