//! The frame reader over arbitrary bytes: any input is a frame, a clean error, never a panic,
//! and never more memory than the bytes that arrived.

use proptest::prelude::*;
use viga_blender::frame::{FrameError, read_frame};

fn read(bytes: &[u8], limit: u32) -> Result<Vec<u8>, FrameError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(read_frame(&mut &bytes[..], limit))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_are_a_frame_or_an_error(bytes in prop::collection::vec(any::<u8>(), 0..64), limit in 0u32..48) {
        match read(&bytes, limit) {
            Ok(body) => {
                let announced = u32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize;
                prop_assert_eq!(body.len(), announced);
                prop_assert!(announced <= limit as usize);
                prop_assert_eq!(&body[..], &bytes[4..4 + announced]);
            }
            Err(FrameError::Closed) => prop_assert!(bytes.len() < 4),
            Err(FrameError::TooLarge { limit: refused, .. }) => prop_assert_eq!(refused, limit),
            Err(FrameError::Truncated) => prop_assert!(bytes.len() >= 4),
            Err(other) => prop_assert!(false, "unexpected error: {other}"),
        }
    }
}

#[test]
fn a_huge_announced_frame_that_never_comes_is_truncated() {
    let header = u32::MAX.to_be_bytes();
    assert!(matches!(
        read(&header, u32::MAX),
        Err(FrameError::Truncated)
    ));
}
