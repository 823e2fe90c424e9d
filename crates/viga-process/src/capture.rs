//! Keeping a child's output within bounds. A process that reads a hostile document, or a
//! model's program, can write without end and without a line break; whatever it writes is
//! read as it comes (so the pipe never blocks the child) and only a bounded part is kept.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncReadExt as _};

use crate::confine::CONTAINED_MARKER;

/// The longest line an [`OutputTail`] keeps; the rest of a longer one is dropped.
const MAX_LINE_BYTES: usize = 4 * 1024;
const CHUNK_BYTES: usize = 16 * 1024;

/// The last lines of a long-lived process's output (its standard error), for the error that
/// says why it died; every line is also logged at debug level. A containment launcher's
/// report line is kept apart.
#[derive(Debug, Clone)]
pub struct OutputTail {
    shared: Arc<Mutex<TailState>>,
    /// Becomes true when the stream has ended.
    ended: tokio::sync::watch::Receiver<bool>,
}

#[derive(Debug, Default)]
struct TailState {
    lines: VecDeque<String>,
    contained: Option<String>,
}

impl OutputTail {
    /// Reads `output` to its end on a task of its own, keeping the last `keep` lines.
    pub fn follow<R>(output: R, name: String, keep: usize) -> Self
    where
        R: AsyncRead + Unpin + Send + 'static,
    {
        let (ended_tx, ended) = tokio::sync::watch::channel(false);
        let tail = Self {
            shared: Arc::default(),
            ended,
        };
        let shared = Arc::clone(&tail.shared);
        tokio::spawn(async move {
            let mut output = output;
            let mut splitter = LineSplitter::default();
            let mut chunk = vec![0u8; CHUNK_BYTES];
            while let Ok(read) = output.read(&mut chunk).await {
                if read == 0 {
                    break;
                }
                for line in splitter.push(&chunk[..read]) {
                    tracing::debug!(target: "viga_process::output", worker = %name, "{line}");
                    if let Ok(mut state) = shared.lock() {
                        state.keep(line, keep);
                    }
                }
            }
            if let Some(line) = splitter.finish()
                && let Ok(mut state) = shared.lock()
            {
                state.keep(line, keep);
            }
            let _ = ended_tx.send(true);
        });
        tail
    }

    /// The kept lines once the stream has ended (a process that died has said its last
    /// words), or as they are after `limit`.
    pub async fn last_words(&self, limit: std::time::Duration) -> String {
        let mut ended = self.ended.clone();
        let _ = tokio::time::timeout(limit, ended.wait_for(|ended| *ended)).await;
        self.text()
    }

    /// The kept lines, joined.
    pub fn text(&self) -> String {
        self.shared
            .lock()
            .map(|state| state.lines.iter().cloned().collect::<Vec<_>>().join("\n"))
            .unwrap_or_default()
    }

    /// The JSON a containment launcher reported (after [`CONTAINED_MARKER`]), if it wrote it
    /// to this stream.
    pub fn contained_report(&self) -> Option<String> {
        self.shared.lock().ok()?.contained.clone()
    }
}

impl TailState {
    fn keep(&mut self, line: String, keep: usize) {
        if self.contained.is_none()
            && let Some(report) = line.strip_prefix(CONTAINED_MARKER)
        {
            self.contained = Some(report.to_owned());
            return;
        }
        if self.lines.len() >= keep {
            self.lines.pop_front();
        }
        self.lines.push_back(line);
    }
}

/// Splits bytes into lines, each cut at [`MAX_LINE_BYTES`].
#[derive(Debug, Default)]
struct LineSplitter {
    pending: Vec<u8>,
    overflowed: bool,
}

impl LineSplitter {
    fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut lines = Vec::new();
        for piece in bytes.split_inclusive(|byte| *byte == b'\n') {
            let (body, ends) = match piece.strip_suffix(b"\n") {
                Some(body) => (body, true),
                None => (piece, false),
            };
            let room = MAX_LINE_BYTES.saturating_sub(self.pending.len());
            self.overflowed |= body.len() > room;
            self.pending
                .extend_from_slice(&body[..body.len().min(room)]);
            if ends {
                lines.push(self.take());
            }
        }
        lines
    }

    fn finish(&mut self) -> Option<String> {
        (!self.pending.is_empty() || self.overflowed).then(|| self.take())
    }

    fn take(&mut self) -> String {
        let mut line = String::from_utf8_lossy(&self.pending).into_owned();
        if line.ends_with('\r') {
            line.pop();
        }
        if std::mem::take(&mut self.overflowed) {
            line.push_str(" [cut]");
        }
        self.pending.clear();
        line
    }
}

/// The head and the tail of everything a stream carried, at most `limit` bytes in all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundedCapture {
    /// What was kept (lossy UTF-8); when cut, a line in the middle says how much was left
    /// out.
    pub text: String,
    /// How many bytes the stream carried.
    pub total_bytes: u64,
    /// How many of them were left out of [`Self::text`].
    pub left_out_bytes: u64,
}

impl BoundedCapture {
    /// Reads `stream` to its end, keeping its first and last `limit / 2` bytes.
    pub async fn read<R: AsyncRead + Unpin>(mut stream: R, limit: usize) -> Self {
        let half = limit / 2;
        let mut head = Vec::new();
        let mut tail: VecDeque<u8> = VecDeque::new();
        let mut total: u64 = 0;
        let mut chunk = vec![0u8; CHUNK_BYTES];
        while let Ok(read) = stream.read(&mut chunk).await {
            if read == 0 {
                break;
            }
            total += read as u64;
            let mut bytes = &chunk[..read];
            if head.len() < half {
                let taken = bytes.len().min(half - head.len());
                head.extend_from_slice(&bytes[..taken]);
                bytes = &bytes[taken..];
            }
            tail.extend(bytes);
            let over = tail.len().saturating_sub(half);
            tail.drain(..over);
        }
        let left_out = total - head.len() as u64 - tail.len() as u64;
        let mut text = String::from_utf8_lossy(&head).into_owned();
        if left_out > 0 {
            text.push_str(&format!("\n[… {left_out} bytes left out …]\n"));
        }
        text.push_str(&String::from_utf8_lossy(tail.make_contiguous()));
        Self {
            text,
            total_bytes: total,
            left_out_bytes: left_out,
        }
    }
}

/// Reads one message that ends with `delimiter` (a line, a NUL-terminated JSON message),
/// without the delimiter. `None` at the end of the stream (a partial last message is
/// dropped); a message longer than `limit` bytes is an error, found as soon as it is.
pub async fn read_message<R>(
    reader: &mut R,
    delimiter: u8,
    limit: usize,
) -> std::io::Result<Option<Vec<u8>>>
where
    R: tokio::io::AsyncBufRead + Unpin,
{
    use tokio::io::AsyncBufReadExt as _;
    let mut message = Vec::new();
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(None);
        }
        let end = available.iter().position(|byte| *byte == delimiter);
        let part = &available[..end.unwrap_or(available.len())];
        if message.len() + part.len() > limit {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("a message longer than {limit} bytes"),
            ));
        }
        message.extend_from_slice(part);
        let used = end.map_or(available.len(), |at| at + 1);
        reader.consume(used);
        if end.is_some() {
            return Ok(Some(message));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_are_cut_and_split_pieces_joined() {
        let mut splitter = LineSplitter::default();
        assert!(splitter.push(b"par").is_empty());
        assert_eq!(splitter.push(b"t one\r\ntwo\n"), ["part one", "two"]);
        let long = vec![b'x'; MAX_LINE_BYTES * 3];
        assert!(splitter.push(&long).is_empty());
        let lines = splitter.push(b"x\nlast");
        assert_eq!(lines.len(), 1);
        assert!(lines[0].ends_with(" [cut]"));
        assert_eq!(lines[0].len(), MAX_LINE_BYTES + " [cut]".len());
        assert_eq!(splitter.finish().as_deref(), Some("last"));
        assert_eq!(splitter.finish(), None);
    }

    #[tokio::test]
    async fn a_capture_keeps_head_and_tail() {
        let short = BoundedCapture::read(&b"hello\n"[..], 100).await;
        assert_eq!(short.text, "hello\n");
        assert_eq!(short.left_out_bytes, 0);
        let mut long = b"HEAD".to_vec();
        long.extend(vec![b'.'; 10_000]);
        long.extend(b"TAIL");
        let cut = BoundedCapture::read(&long[..], 100).await;
        assert_eq!(cut.total_bytes, 10_008);
        assert_eq!(cut.left_out_bytes, 9908);
        assert!(cut.text.starts_with("HEAD"), "{}", cut.text);
        assert!(cut.text.ends_with("TAIL"), "{}", cut.text);
        assert!(
            cut.text.contains("[… 9908 bytes left out …]"),
            "{}",
            cut.text
        );
    }

    #[tokio::test]
    async fn messages_are_split_and_bounded() {
        let mut input = tokio::io::BufReader::new(&b"{\"a\":1}\0second\0partial"[..]);
        assert_eq!(
            read_message(&mut input, 0, 100).await.unwrap().unwrap(),
            b"{\"a\":1}"
        );
        assert_eq!(
            read_message(&mut input, 0, 100).await.unwrap().unwrap(),
            b"second"
        );
        assert!(read_message(&mut input, 0, 100).await.unwrap().is_none());
        let mut long = tokio::io::BufReader::new(&b"0123456789\n"[..]);
        assert!(read_message(&mut long, b'\n', 5).await.is_err());
    }

    #[tokio::test]
    async fn a_tail_keeps_the_last_lines_and_the_launcher_report() {
        let output = format!("{CONTAINED_MARKER}{{\"policy\":\"auto\"}}\none\ntwo\nthree\n");
        let tail = OutputTail::follow(std::io::Cursor::new(output.into_bytes()), "t".into(), 2);
        let words = tail.last_words(std::time::Duration::from_secs(10)).await;
        assert_eq!(words, "two\nthree");
        assert_eq!(
            tail.contained_report().as_deref(),
            Some("{\"policy\":\"auto\"}")
        );
    }
}
