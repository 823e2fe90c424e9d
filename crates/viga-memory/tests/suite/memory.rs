//! Tail_L over iterations: eviction, the anchor, rebuilding, configuration.

use viga_memory::{Memory, MemoryConfig, MemoryError};
use viga_protocol::message::{ChatMessage, ContentPart, ImageData};

use super::{failed_record, memory, record};

fn indices(memory: &Memory) -> Vec<u32> {
    memory.recent().map(|r| r.index).collect()
}

fn anchor() -> ChatMessage {
    ChatMessage::user(vec![
        ContentPart::text("Recreate this living room. Plan: walls, table, lamp."),
        ContentPart::Image {
            image: ImageData::png(vec![0x89, b'P', b'N', b'G']),
            label: Some("target".to_owned()),
        },
    ])
}

#[test]
fn keeps_the_last_window_iterations_and_counts_all() {
    let mut memory = memory(3, 12_000);
    assert_eq!(memory.total_iterations(), 0);
    assert!(memory.last().is_none());
    for index in 1..=10 {
        memory.push(record(index));
    }
    assert_eq!(indices(&memory), [8, 9, 10]);
    assert_eq!(memory.total_iterations(), 10);
    assert_eq!(memory.last().map(|r| r.index), Some(10));
    assert_eq!(memory.recent().len(), 3);
}

#[test]
fn a_window_of_one_keeps_only_the_newest() {
    let mut memory = memory(1, 12_000);
    for index in 1..=4 {
        memory.push(record(index));
    }
    assert_eq!(indices(&memory), [4]);
}

/// The reference system counts chat messages, so an iteration with many tool calls or fast
/// retries pushes others out. Here one record is one iteration, however it came about.
#[test]
fn fast_retries_do_not_take_window_slots() {
    let mut memory = memory(3, 12_000);
    memory.push(record(1));
    memory.push(failed_record(2));
    memory.push(failed_record(3));
    assert_eq!(indices(&memory), [1, 2, 3]);
    memory.push(record(4));
    assert_eq!(indices(&memory), [2, 3, 4]);
}

#[test]
fn the_anchor_survives_every_eviction() {
    let mut memory = memory(2, 12_000);
    assert!(memory.anchor().is_none());
    memory.set_anchor(anchor());
    for index in 1..=25 {
        memory.push(record(index));
        assert_eq!(memory.anchor(), Some(&anchor()));
    }
    assert_eq!(indices(&memory), [24, 25]);
}

#[test]
fn rebuild_equals_pushing_in_order() {
    let config = MemoryConfig {
        window: 3,
        budget_bytes: 2_000,
    };
    let records: Vec<_> = (1..=7_u32)
        .map(|i| {
            if i.is_multiple_of(3) {
                failed_record(i)
            } else {
                record(i)
            }
        })
        .collect();
    let mut pushed = Memory::new(config).unwrap();
    pushed.set_anchor(anchor());
    for record in records.clone() {
        pushed.push(record);
    }
    let rebuilt = Memory::rebuild(config, Some(anchor()), records).unwrap();
    assert_eq!(rebuilt, pushed);
    assert_eq!(rebuilt.total_iterations(), 7);
    assert_eq!(rebuilt.context_block(), pushed.context_block());
    assert_eq!(rebuilt.config(), &config);
}

#[test]
fn unusable_configurations_say_what_to_do() {
    let err = Memory::new(MemoryConfig {
        window: 0,
        ..MemoryConfig::default()
    })
    .unwrap_err();
    assert!(matches!(err, MemoryError::Config(_)));
    assert!(
        err.to_string().contains("set window (L) to 1 or more"),
        "{err}"
    );

    let err = Memory::rebuild(
        MemoryConfig {
            budget_bytes: 255,
            ..MemoryConfig::default()
        },
        None,
        Vec::new(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("budget_bytes is 255"), "{err}");
    assert!(err.to_string().contains("at least 256"), "{err}");

    assert_eq!(
        MemoryConfig::default(),
        MemoryConfig {
            window: 3,
            budget_bytes: 12_000
        }
    );
    assert!(
        Memory::new(MemoryConfig {
            window: usize::MAX,
            budget_bytes: 256
        })
        .is_ok(),
        "a huge window is valid and must not allocate up front"
    );
}
