//! Length-prefixed JSON frames: a 4-byte big-endian length, then that many bytes of JSON.
//! Framing is what the popular Blender MCP add-on lacks (it re-parses a raw byte stream
//! until it decodes, and hangs on partial reads); here a reader always knows how much to read.

use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("connection closed")]
    Closed,
    #[error("connection closed in the middle of a frame")]
    Truncated,
    #[error("frame of {size} bytes exceeds the limit of {limit} bytes")]
    TooLarge { size: u64, limit: u32 },
    #[error("frame could not be encoded: {0}")]
    Encode(#[source] serde_json::Error),
    #[error("i/o error: {0}")]
    Io(#[source] std::io::Error),
}

/// Writes one frame.
pub async fn write_frame<W, T>(writer: &mut W, value: &T, limit: u32) -> Result<(), FrameError>
where
    W: AsyncWrite + Unpin,
    T: Serialize + ?Sized,
{
    let body = serde_json::to_vec(value).map_err(FrameError::Encode)?;
    let size = u32::try_from(body.len())
        .ok()
        .filter(|size| *size <= limit)
        .ok_or(FrameError::TooLarge {
            size: body.len() as u64,
            limit,
        })?;
    let mut frame = Vec::with_capacity(body.len() + 4);
    frame.extend_from_slice(&size.to_be_bytes());
    frame.extend_from_slice(&body);
    writer.write_all(&frame).await.map_err(FrameError::Io)?;
    writer.flush().await.map_err(FrameError::Io)
}

/// Reads one frame's bytes.
pub async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    limit: u32,
) -> Result<Vec<u8>, FrameError> {
    let mut header = [0u8; 4];
    match reader.read_exact(&mut header).await {
        Ok(_) => {}
        Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof => {
            return Err(FrameError::Closed);
        }
        Err(err) => return Err(FrameError::Io(err)),
    }
    let size = u32::from_be_bytes(header);
    if size > limit {
        return Err(FrameError::TooLarge {
            size: u64::from(size),
            limit,
        });
    }
    // Grown as bytes arrive, not allocated from the header: a peer that announces a large
    // frame and sends nothing costs no memory.
    let mut body = Vec::new();
    reader
        .take(u64::from(size))
        .read_to_end(&mut body)
        .await
        .map_err(FrameError::Io)?;
    if body.len() < size as usize {
        return Err(FrameError::Truncated);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn round_trip_and_limits() {
        let mut buffer = Vec::new();
        write_frame(&mut buffer, &serde_json::json!({"a": 1}), 1024)
            .await
            .unwrap();
        assert_eq!(&buffer[..4], &7u32.to_be_bytes());
        let body = read_frame(&mut buffer.as_slice(), 1024).await.unwrap();
        assert_eq!(body, br#"{"a":1}"#);
        assert!(matches!(
            read_frame(&mut buffer.as_slice(), 3).await,
            Err(FrameError::TooLarge { size: 7, limit: 3 })
        ));
        assert!(matches!(
            read_frame(&mut &buffer[..6], 1024).await,
            Err(FrameError::Truncated)
        ));
        assert!(matches!(
            read_frame(&mut &buffer[..0], 1024).await,
            Err(FrameError::Closed)
        ));
        let mut out = Vec::new();
        assert!(matches!(
            write_frame(&mut out, "too long", 4).await,
            Err(FrameError::TooLarge { .. })
        ));
    }
}
