mod context;
mod e2e;
mod gates;
mod node_tree;
mod ops;
mod presets;
mod python;
mod run;

use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;

use serde_json::{Value, json};
use viga_blender::{BlenderCommands as _, Worker, WorkerConfig, locate};
use viga_gn::{ExecContext, ExecutorRegistry, GnBlender, GnError, PythonPolicy, StepOutcome};
use viga_protocol::bridge::SceneReset;
use viga_protocol::gn::GnStep;

/// Every test, by name. The list is the harness's, not libtest's: all tests share one
/// Blender worker that is shut down at the end (a worker in a static would outlive the test
/// process, since statics are never dropped).
const TESTS: &[(&str, TestFn)] = tests![
    context::the_snapshot_is_deterministic_and_names_what_the_spec_lists,
    context::slices_shrink_their_lists_to_fit_the_budget,
    e2e::every_manifest_case_passes,
    gates::a_new_target_passes_every_gate,
    gates::single_group_output_fails_then_passes,
    gates::output_connected_fails_then_passes,
    gates::no_modifier_error_fails_then_passes,
    gates::no_unexpected_new_modifier_fails_then_passes,
    gates::no_unexpected_new_node_group_fails_then_passes,
    gates::gates_that_are_not_required_only_warn,
    node_tree::reapplying_the_same_tree_changes_nothing,
    node_tree::a_changed_declaration_updates_only_what_differs,
    node_tree::simulation_and_repeat_zones_are_paired,
    node_tree::node_tree_errors_name_the_node,
    ops::ops_apply_in_order_and_a_second_application_changes_nothing,
    ops::unlink_remove_node_and_cleanup_unused,
    ops::ensure_single_group_io_repairs_a_group,
    ops::set_input_resolves_datablocks_by_name,
    ops::op_errors_say_what_is_wrong,
    presets::a_preset_applies_the_same_tree_again,
    python::safe_mode_refuses_every_escape_before_running_anything,
    python::safe_mode_runs_ordinary_snippets,
    python::trusted_mode_runs_what_safe_mode_refuses,
    run::a_good_reply_runs_to_done_and_writes_the_run_folder,
    run::an_invalid_reply_goes_back_to_the_model_before_anything_runs,
    run::failed_gates_send_the_report_back_and_the_run_retries,
    run::a_failing_step_ends_the_run_in_error_with_the_partial_log,
    run::the_model_can_ask_for_context_slices,
    run::running_out_of_rounds_is_an_error,
    run::a_cancelled_run_stops_before_applying,
    run::registered_executors_replace_the_defaults,
];

type TestFn = fn(GnBlender) -> Pin<Box<dyn Future<Output = ()> + Send>>;

macro_rules! tests {
    ($($module:ident :: $name:ident),* $(,)?) => {
        &[$((
            concat!(stringify!($module), "::", stringify!($name)),
            (|blender| Box::pin($module::$name(blender))) as TestFn,
        )),*]
    };
}
use tests;

/// Runs the tests whose names contain the first non-flag argument (all without one), one
/// after the other since they all own the scene; `--list` lists them like libtest does.
pub(crate) fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let filter = args
        .iter()
        .find(|a| !a.starts_with('-'))
        .cloned()
        .unwrap_or_default();
    let selected: Vec<_> = TESTS
        .iter()
        .filter(|(name, _)| name.contains(&filter))
        .collect();
    if args.iter().any(|a| a == "--list") {
        for (name, _) in &selected {
            println!("{name}: test");
        }
        return ExitCode::SUCCESS;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let failed = runtime.block_on(async {
        let launcher = match locate() {
            Ok(launcher) => launcher,
            Err(err) => panic!("{err}"),
        };
        let worker = Arc::new(Worker::start(WorkerConfig::new(launcher)).await.unwrap());
        let blender = GnBlender::new(worker.clone());
        println!("\nrunning {} tests on one Blender worker", selected.len());
        let mut failed = Vec::new();
        for (name, test) in &selected {
            // A task per test: a panic fails that test and the next one still runs.
            match tokio::spawn(test(blender.clone())).await {
                Ok(()) => println!("test {name} ... ok"),
                Err(_) => {
                    println!("test {name} ... FAILED");
                    failed.push(*name);
                }
            }
        }
        drop(blender);
        if let Ok(worker) = Arc::try_unwrap(worker) {
            worker.shutdown().await;
        }
        failed
    });
    // The closing line in libtest's own format, so CI's test counting reads it.
    let passed = selected.len() - failed.len();
    let filtered = TESTS.len() - selected.len();
    let verdict = if failed.is_empty() { "ok" } else { "FAILED" };
    println!(
        "\ntest result: {verdict}. {passed} passed; {} failed; 0 ignored; 0 measured; {filtered} filtered out",
        failed.len()
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        println!("failed: {}", failed.join(", "));
        ExitCode::FAILURE
    }
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
