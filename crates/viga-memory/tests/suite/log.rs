//! The run log: never clobbered, read back exactly, robust to a kill mid-line.

use std::fs;
use std::io::Write;
use std::path::Path;

use viga_memory::{Memory, MemoryConfig, MemoryError, RunLog, iterations_in, read_run_log};
use viga_protocol::PROTOCOL_VERSION;
use viga_protocol::event::{RunEvent, StopReason};

use super::{failed_record, record};

fn started() -> RunEvent {
    RunEvent::RunStarted {
        run_id: "run-1".to_owned(),
        task: "recreate the living room".to_owned(),
        protocol_version: PROTOCOL_VERSION,
        resumed_from_iteration: None,
    }
}

fn finished(index: u32) -> RunEvent {
    let record = if index.is_multiple_of(2) {
        failed_record(index)
    } else {
        record(index)
    };
    RunEvent::IterationFinished {
        record: Box::new(record),
    }
}

/// A log with a start event and three iterations (seq 0..=6).
fn write_log(path: &Path) -> Vec<viga_protocol::event::TimedEvent> {
    let mut log = RunLog::create(path).unwrap();
    let mut written = vec![log.append(started()).unwrap()];
    for index in 1..=3 {
        written.push(log.append(RunEvent::IterationStarted { index }).unwrap());
        written.push(log.append(finished(index)).unwrap());
    }
    written
}

fn append_bytes(path: &Path, bytes: &[u8]) {
    fs::OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
}

#[test]
fn create_refuses_an_existing_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    fs::write(&path, "precious\n").unwrap();
    let err = RunLog::create(&path).unwrap_err();
    assert!(
        matches!(&err, MemoryError::Io { source, .. } if source.kind() == std::io::ErrorKind::AlreadyExists),
        "{err:?}"
    );
    assert!(err.to_string().contains("open_append"), "{err}");
    assert_eq!(fs::read_to_string(&path).unwrap(), "precious\n");
}

#[test]
fn appended_events_read_back_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    let written = write_log(&path);
    let seqs: Vec<u64> = written.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (0..7).collect::<Vec<_>>());
    assert!(written.iter().all(|e| e.unix_ms > 1_600_000_000_000));

    let contents = read_run_log(&path).unwrap();
    assert!(!contents.truncated_tail);
    assert_eq!(contents.events, written);
    let text = fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 7);
    assert!(text.ends_with('\n'));
}

#[test]
fn iterations_are_extracted_in_order_and_rebuild_the_memory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    write_log(&path);
    let events = read_run_log(&path).unwrap().events;
    let records = iterations_in(&events);
    assert_eq!(records, vec![record(1), failed_record(2), record(3)]);

    let config = MemoryConfig {
        window: 2,
        ..MemoryConfig::default()
    };
    let mut live = Memory::new(config).unwrap();
    for index in 1..=3 {
        let RunEvent::IterationFinished { record } = finished(index) else {
            unreachable!()
        };
        live.push(*record);
    }
    assert_eq!(Memory::rebuild(config, None, records).unwrap(), live);
}

#[test]
fn a_cut_off_last_line_is_ignored_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    let written = write_log(&path);
    append_bytes(&path, br#"{"seq":7,"unix_ms":1,"type":"iteration_sta"#);
    let contents = read_run_log(&path).unwrap();
    assert!(contents.truncated_tail);
    assert_eq!(contents.events, written);
}

#[test]
fn an_unreadable_last_line_with_its_newline_is_ignored_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    let written = write_log(&path);
    append_bytes(&path, b"\0\0\0\0\n");
    let contents = read_run_log(&path).unwrap();
    assert!(contents.truncated_tail);
    assert_eq!(contents.events, written);
}

#[test]
fn a_corrupt_middle_line_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    write_log(&path);
    let text = fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[2] = r#"{"seq":2,"unix_ms":1,"type":"iteration_finished"}"#;
    fs::write(&path, lines.join("\n") + "\n").unwrap();

    let err = read_run_log(&path).unwrap_err();
    assert!(
        matches!(&err, MemoryError::Corrupt { line: 3, .. }),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(message.contains("corrupt at line 3"), "{message}");
    assert!(
        message.contains("record"),
        "names the missing field: {message}"
    );
    // Opening to continue must not touch a log it cannot trust.
    assert!(RunLog::open_append(&path).is_err());
    assert_eq!(fs::read_to_string(&path).unwrap(), lines.join("\n") + "\n");
}

#[test]
fn a_sequence_that_goes_backwards_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    write_log(&path);
    append_bytes(
        &path,
        b"{\"seq\":3,\"unix_ms\":1,\"type\":\"iteration_started\",\"index\":9}\n",
    );
    let err = read_run_log(&path).unwrap_err();
    assert!(
        matches!(&err, MemoryError::Corrupt { line: 8, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("two processes"), "{err}");
}

#[test]
fn open_append_repairs_the_tail_and_continues_numbering() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    let mut written = write_log(&path);
    let clean_len = fs::metadata(&path).unwrap().len();
    append_bytes(&path, br#"{"seq":7,"unix_ms":17000"#);

    let mut log = RunLog::open_append(&path).unwrap();
    assert_eq!(log.path(), path);
    assert_eq!(
        fs::metadata(&path).unwrap().len(),
        clean_len,
        "tail cut off"
    );
    written.push(
        log.append(RunEvent::RunFinished {
            stop: StopReason::MaxIterations,
            iterations: 3,
        })
        .unwrap(),
    );
    assert_eq!(written.last().unwrap().seq, 7);

    let contents = read_run_log(&path).unwrap();
    assert!(!contents.truncated_tail);
    assert_eq!(contents.events, written);
}

#[test]
fn open_append_continues_an_empty_or_clean_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    drop(RunLog::create(&path).unwrap());
    let mut log = RunLog::open_append(&path).unwrap();
    assert_eq!(log.append(started()).unwrap().seq, 0);
    drop(log);
    let mut log = RunLog::open_append(&path).unwrap();
    assert_eq!(log.append(started()).unwrap().seq, 1);
    assert_eq!(read_run_log(&path).unwrap().events.len(), 2);

    let err = RunLog::open_append(&dir.path().join("missing.jsonl")).unwrap_err();
    assert!(err.to_string().contains("not found"), "{err}");
}

#[test]
fn an_event_that_would_not_read_back_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    let mut log = RunLog::create(&path).unwrap();
    log.append(started()).unwrap();
    let mut bad = record(1);
    bad.execution.duration_ms = f64::NAN;
    let err = log
        .append(RunEvent::IterationFinished {
            record: Box::new(bad),
        })
        .unwrap_err();
    assert!(err.to_string().contains("NaN"), "{err}");
    // Nothing was written, and numbering carries on where it was.
    assert_eq!(log.append(finished(1)).unwrap().seq, 1);
    let contents = read_run_log(&path).unwrap();
    assert_eq!(contents.events.len(), 2);
    assert!(!contents.truncated_tail);
}
