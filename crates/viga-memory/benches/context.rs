//! Context size stays flat over a long run (Tail_L), and what building it costs. Prints a
//! Markdown table.
//!
//! `cargo bench -p viga-memory --bench context`. Environment: `VIGA_BENCH_CALLS` (default
//! 1000), the number of timed `context_block` calls.

use std::hint::black_box;
use std::time::{Duration, Instant};

use viga_memory::{Memory, MemoryConfig};
use viga_protocol::iteration::{
    ExecutionError, ExecutionResult, FailureClass, Feedback, IterationRecord, Timings,
};
use viga_protocol::message::TokenUsage;

const ITERATIONS: u32 = 50;

/// A scene program of about 60 lines, as a generator writes it: the whole scene each time,
/// with numbers that move from one iteration to the next.
fn program(index: u32) -> String {
    let shift = f64::from(index) * 0.05;
    let mut code = String::from(
        "import bpy\nimport math\n\n# Start from an empty scene.\nbpy.ops.object.select_all(action='SELECT')\nbpy.ops.object.delete()\n\n",
    );
    code.push_str(&format!(
        "def material(name, rgba):\n    mat = bpy.data.materials.new(name)\n    mat.use_nodes = True\n    bsdf = mat.node_tree.nodes['Principled BSDF']\n    bsdf.inputs['Base Color'].default_value = rgba\n    bsdf.inputs['Roughness'].default_value = {:.2}\n    return mat\n\n",
        0.4 + shift / 10.0
    ));
    for (n, name) in ["floor", "table", "chair", "lamp", "shelf", "rug"]
        .iter()
        .enumerate()
    {
        let n = n as f64;
        code.push_str(&format!(
            "bpy.ops.mesh.primitive_cube_add(size=1, location=({:.2}, {:.2}, {:.2}))\n{name} = bpy.context.object\n{name}.name = '{name}'\n{name}.scale = ({:.2}, {:.2}, {:.2})\n{name}.rotation_euler = (0, 0, math.radians({:.1}))\n{name}.data.materials.append(material('{name}_mat', (0.{}, 0.5, 0.3, 1)))\n\n",
            n * 1.3 - 3.0 + shift,
            1.0 - n * 0.4,
            n * 0.2,
            1.0 + n * 0.1,
            0.8 + shift,
            0.5,
            n * 15.0 + f64::from(index),
            n as u32 + 1,
        ));
    }
    code.push_str(&format!(
        "bpy.ops.object.light_add(type='SUN', location=(4, -4, 6))\nbpy.context.object.data.energy = {:.1}\nbpy.ops.object.camera_add(location=(7, -7, 5), rotation=(1.1, 0, 0.785))\nbpy.context.scene.camera = bpy.context.object\n",
        3.0 + shift
    ));
    code
}

fn iteration(index: u32) -> IterationRecord {
    let failed = index.is_multiple_of(5);
    IterationRecord {
        index,
        plan: Some(format!(
            "Iteration {index}: the table sits too far left and the lamp is too dim. Move the table 0.3 m right, raise the lamp energy, and rotate the chair to face the table."
        )),
        code: program(index),
        execution: ExecutionResult {
            stdout: "Blender 5.0.1\nscene rebuilt: 8 objects\n".to_owned(),
            stderr: "Warning: material 'table_mat' already exists, renamed to 'table_mat.001'\nWarning: material 'lamp_mat' already exists, renamed to 'lamp_mat.001'\nWarning: 2 unused node groups removed on save\n".to_owned(),
            error: failed.then(|| ExecutionError {
                error_type: "KeyError".to_owned(),
                message: "bpy_prop_collection[key]: key \"Principled BSDF\" not found".to_owned(),
                traceback: "  File \"<viga>\", line 12, in material".to_owned(),
                line: Some(12),
            }),
            duration_ms: 38.0 + f64::from(index % 7),
        },
        feedback: Some(Feedback {
            visual_differences: vec![
                "The table is about 0.3 m left of where the target has it.".to_owned(),
                "The lamp is much dimmer than in the target; the back wall is nearly black.".to_owned(),
                "The chair faces the camera; in the target it faces the table.".to_owned(),
            ],
            suggestions: vec![
                "Move the table +0.3 on X.".to_owned(),
                "Raise the sun energy to about 5.".to_owned(),
                "Rotate the chair about Z by 90 degrees.".to_owned(),
            ],
            accepted: false,
        }),
        retry_count: if failed { 2 } else { u32::from(index.is_multiple_of(3)) },
        failure: failed.then_some(FailureClass::E1),
        retry_errors: Vec::new(),
        generator_tool_calls: Vec::new(),
        render_ids: vec![format!("{index}-front"), format!("{index}-top")],
        timings: Timings::default(),
        usage: TokenUsage::default(),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let calls: usize = std::env::var("VIGA_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let config = MemoryConfig::default();
    let mut memory = Memory::new(config)?;
    let mut all_bytes = 0;
    let mut at_first_eviction = 0;
    for index in 1..=ITERATIONS {
        memory.push(iteration(index));
        all_bytes += Memory::rebuild(
            MemoryConfig {
                window: 1,
                budget_bytes: usize::MAX,
            },
            None,
            [iteration(index)],
        )?
        .context_block()
        .len();
        if index as usize == config.window + 1 {
            at_first_eviction = memory.context_block().len();
        }
    }
    let at_end = memory.context_block().len();

    let mut samples: Vec<Duration> = (0..calls)
        .map(|_| {
            let started = Instant::now();
            black_box(memory.context_block());
            started.elapsed()
        })
        .collect();
    let (median, p99) = median_p99(&mut samples);

    // The same window under a budget it does not fit, so every call shrinks it.
    let tight = Memory::rebuild(
        MemoryConfig {
            budget_bytes: 4_000,
            ..config
        },
        None,
        memory.recent().cloned(),
    )?;
    let tight_len = tight.context_block().len();
    let mut samples: Vec<Duration> = (0..calls)
        .map(|_| {
            let started = Instant::now();
            black_box(tight.context_block());
            started.elapsed()
        })
        .collect();
    let (tight_median, _) = median_p99(&mut samples);

    let window = config.window;
    let ratio = at_end as f64 / at_first_eviction as f64;
    println!(
        "L = {window}, budget_bytes = {}, {ITERATIONS} iterations of a {}-line program\n",
        config.budget_bytes,
        program(1).lines().count()
    );
    println!("| measurement | value |");
    println!("|---|---|");
    println!(
        "| `context_block().len()` at iteration {} (L+1) | {at_first_eviction} B |",
        window + 1
    );
    println!("| `context_block().len()` at iteration {ITERATIONS} | {at_end} B |");
    println!("| ratio (target: at most 1.05x) | **{ratio:.3}x** |");
    println!("| all {ITERATIONS} iterations, no window, for contrast | {all_bytes} B |");
    println!(
        "| `context_block` time, median of {calls} calls | {:.1} µs |",
        median.as_secs_f64() * 1e6
    );
    println!(
        "| `context_block` time, p99 | {:.1} µs |",
        p99.as_secs_f64() * 1e6
    );
    println!(
        "| `context_block` time, median, budget 4000 B (shrinks to {tight_len} B) | {:.1} µs |",
        tight_median.as_secs_f64() * 1e6
    );
    Ok(())
}

fn median_p99(samples: &mut [Duration]) -> (Duration, Duration) {
    samples.sort();
    (
        samples[samples.len() / 2],
        samples[(samples.len() - 1) * 99 / 100],
    )
}
