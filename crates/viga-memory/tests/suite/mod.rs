mod context;
mod log;
mod memory;

use viga_memory::{Memory, MemoryConfig};
use viga_protocol::iteration::{
    ExecutionError, ExecutionResult, FailureClass, Feedback, IterationRecord, Timings,
};
use viga_protocol::message::TokenUsage;

/// A scene program of `lines` lines that differs from one iteration to the next.
pub(crate) fn program(index: u32, lines: usize) -> String {
    let mut code = String::from("import bpy\nbpy.ops.object.select_all(action='SELECT')\n");
    for line in 2..lines {
        code.push_str(&format!(
            "bpy.ops.mesh.primitive_cube_add(size={}, location=({line}, {index}, 0))\n",
            line % 4 + 1
        ));
    }
    code
}

/// A plain iteration: ran, critiqued, not accepted.
pub(crate) fn record(index: u32) -> IterationRecord {
    IterationRecord {
        index,
        plan: Some(format!("Step {index}: move the table under the window.")),
        code: program(index, 6),
        execution: ExecutionResult {
            stdout: String::new(),
            stderr: String::new(),
            error: None,
            duration_ms: 12.4,
        },
        feedback: Some(Feedback {
            visual_differences: vec![format!("the table is {index} m too far left")],
            suggestions: vec!["move the table 1 m to the right".to_owned()],
            accepted: false,
        }),
        retry_count: 0,
        failure: None,
        retry_errors: Vec::new(),
        generator_tool_calls: Vec::new(),
        render_ids: vec![format!("{index}-front")],
        timings: Timings::default(),
        usage: TokenUsage::default(),
    }
}

/// An iteration that needed fast retries and still failed.
pub(crate) fn failed_record(index: u32) -> IterationRecord {
    IterationRecord {
        execution: ExecutionResult {
            stdout: "Blender 5.0.1\nadding cubes\n".to_owned(),
            stderr: "Traceback (most recent call last):\n  File \"<viga>\", line 3\nNameError: name 'cube' is not defined\n".to_owned(),
            error: Some(ExecutionError {
                error_type: "NameError".to_owned(),
                message: "name 'cube' is not defined".to_owned(),
                traceback: "  File \"<viga>\", line 3, in <module>".to_owned(),
                line: Some(3),
            }),
            duration_ms: 12.0,
        },
        feedback: None,
        retry_count: 2,
        failure: Some(FailureClass::E1),
        retry_errors: vec!["SyntaxError at line 2".to_owned(); 2],
        ..record(index)
    }
}

pub(crate) fn memory(window: usize, budget_bytes: usize) -> Memory {
    Memory::new(MemoryConfig {
        window,
        budget_bytes,
    })
    .unwrap()
}
