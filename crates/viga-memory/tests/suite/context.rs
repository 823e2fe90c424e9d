//! The context block: its format, and that it always fits its budget.

use viga_memory::Memory;
use viga_protocol::iteration::{Feedback, IterationRecord};

use super::{failed_record, memory, program, record};

fn block(records: &[IterationRecord], budget_bytes: usize) -> String {
    let mut memory = memory(records.len().max(1), budget_bytes);
    for record in records {
        memory.push(record.clone());
    }
    memory.context_block()
}

/// Iteration 3 ran and was critiqued, 4 failed after two fast retries, 5 ran with output.
fn three_iterations() -> Vec<IterationRecord> {
    let mut fifth = record(5);
    fifth.execution.stdout = "added 4 cubes\n".to_owned();
    fifth.execution.duration_ms = 8.6;
    fifth.retry_count = 1;
    fifth.feedback = Some(Feedback {
        visual_differences: vec![
            "the lamp is missing".to_owned(),
            "the rug is blue, the target's is red;\nit is also too small".to_owned(),
        ],
        suggestions: Vec::new(),
        accepted: false,
    });
    vec![record(3), failed_record(4), fifth]
}

#[test]
fn context_block_format() {
    insta::assert_snapshot!(block(&three_iterations(), 12_000));
}

#[test]
fn context_block_under_a_tight_budget() {
    let mut records = three_iterations();
    for record in &mut records {
        record.code = program(record.index, 30);
        record.execution.stderr = "Warning: ".repeat(40);
    }
    // Older programs cut, then the oldest iteration dropped and the stderr of the next capped.
    for (name, budget) in [("code_cut", 4_000), ("iteration_dropped", 3_000)] {
        let text = block(&records, budget);
        assert!(text.len() <= budget);
        insta::assert_snapshot!(name, text);
    }
}

#[test]
fn an_empty_memory_has_an_empty_block() {
    assert_eq!(memory(3, 12_000).context_block(), "");
}

#[test]
fn the_block_is_deterministic_and_oldest_first() {
    let memory = Memory::rebuild(Default::default(), None, three_iterations()).unwrap();
    let text = memory.context_block();
    assert_eq!(text, memory.context_block());
    let positions: Vec<usize> = (3..=5)
        .map(|i| text.find(&format!("## Iteration {i}")).unwrap())
        .collect();
    assert!(positions.is_sorted(), "{positions:?}");
}

/// Records that stress the fitting: huge programs, one enormous line, multi-byte text
/// everywhere, backtick runs, long feedback, empty fields, silly numbers.
fn nasty_sets() -> Vec<Vec<IterationRecord>> {
    let huge_code: Vec<_> = (1..=3)
        .map(|i| IterationRecord {
            code: program(i, 2_000),
            ..failed_record(i)
        })
        .collect();
    let one_line = vec![IterationRecord {
        code: format!("name = '{}'", "é".repeat(60_000)),
        ..record(1)
    }];
    let wide = "漢字😀é ".repeat(300);
    let multibyte: Vec<_> = (1..=4)
        .map(|i| {
            let mut r = failed_record(i);
            r.plan = Some(wide.clone());
            r.code = format!("# {wide}\n").repeat(20);
            r.execution.stdout = wide.clone();
            r.execution.stderr = wide.clone();
            r.execution.error.as_mut().unwrap().message = wide.clone();
            r.feedback = Some(Feedback {
                visual_differences: vec![wide.clone(); 5],
                suggestions: vec![wide.clone(); 5],
                accepted: true,
            });
            r
        })
        .collect();
    let backticks: Vec<_> = (1..=2)
        .map(|i| IterationRecord {
            code: format!("s = '''\n{}\n'''\n", "`".repeat(500)).repeat(10),
            execution: viga_protocol::iteration::ExecutionResult {
                stdout: "```\n".repeat(200),
                ..record(i).execution
            },
            ..record(i)
        })
        .collect();
    let long_feedback: Vec<_> = (1..=3)
        .map(|i| IterationRecord {
            feedback: Some(Feedback {
                visual_differences: (0..200).map(|n| format!("difference {n}")).collect(),
                suggestions: (0..200).map(|n| format!("suggestion {n}")).collect(),
                accepted: false,
            }),
            ..record(i)
        })
        .collect();
    let bare = vec![IterationRecord {
        index: u32::MAX,
        plan: None,
        code: String::new(),
        feedback: None,
        retry_count: u32::MAX,
        ..failed_record(1)
    }];
    let silly_duration = vec![IterationRecord {
        execution: viga_protocol::iteration::ExecutionResult {
            duration_ms: 1e300,
            ..record(1).execution
        },
        ..record(1)
    }];
    vec![
        three_iterations(),
        huge_code,
        one_line,
        multibyte,
        backticks,
        long_feedback,
        bare,
        silly_duration,
    ]
}

#[test]
fn the_block_never_exceeds_the_budget() {
    let budgets: Vec<usize> = (256..1_200)
        .step_by(7)
        .chain((1_200..20_000).step_by(613))
        .chain([40_000, 100_000, 1_000_000])
        .collect();
    for (set, records) in nasty_sets().iter().enumerate() {
        let newest = records.last().unwrap().index;
        let full = block(records, usize::MAX);
        for &budget in &budgets {
            let text = block(records, budget);
            assert!(
                text.len() <= budget,
                "set {set}, budget {budget}: {} bytes",
                text.len()
            );
            if full.len() <= budget {
                assert_eq!(text, full, "set {set}: cut although the whole block fits");
            }
            assert!(
                text.contains(&format!("## Iteration {newest}")),
                "set {set}, budget {budget}: the newest iteration's header is gone:\n{text}"
            );
        }
    }
}

/// Three iterations of 80-line programs; returns (block, start of the newest's section).
fn split_newest(budget: usize) -> (String, usize) {
    let records: Vec<_> = (1..=3)
        .map(|i| IterationRecord {
            code: program(i, 80),
            ..record(i)
        })
        .collect();
    let text = block(&records, budget);
    let start = text.find("## Iteration 3").unwrap();
    (text, start)
}

#[test]
fn the_newest_iteration_survives_best() {
    let whole_code = program(3, 80);
    let whole_code = whole_code.trim_end();
    let full_len = split_newest(usize::MAX).0.len();
    for budget in (256..full_len).step_by(11) {
        let (text, start) = split_newest(budget);
        let (older, newest) = text.split_at(start);
        if newest.contains("lines omitted]") {
            // The newest program is cut only when it is all that is left.
            assert!(
                !older.contains("## Iteration"),
                "budget {budget}: newest code cut while older iterations remain:\n{text}"
            );
        }
        if older.contains(&program(2, 80)) {
            assert!(newest.contains(whole_code), "budget {budget}");
        }
    }
    // Just under the full size, only the oldest program is cut.
    let (text, start) = split_newest(full_len - 100);
    assert!(text[start..].contains(whole_code));
    assert!(text.contains(program(2, 80).trim_end()));
    assert!(!text.contains(program(1, 80).trim_end()));
    assert!(text.contains("lines omitted]"));
}

#[test]
fn dropped_iterations_leave_one_line() {
    let records: Vec<_> = (1..=3)
        .map(|i| IterationRecord {
            code: program(i, 80),
            ..record(i)
        })
        .collect();
    let newest_alone = block(&records[2..], usize::MAX);
    let line = "[2 earlier iterations omitted]\n";
    let budget = line.len() + 1 + newest_alone.len();
    assert_eq!(
        block(&records, budget),
        format!("{line}\n{newest_alone}"),
        "with room for the newest iteration alone, it is shown whole"
    );
}
