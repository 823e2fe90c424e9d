//! A smaller request, for a model that said the last one was too long for its context: the
//! memory keeps only its newest iteration, and images are left out except the target and
//! those of the last message (what the model is being asked about right now).

use viga_protocol::message::{ChatMessage, ContentPart};
use viga_provider::ModelRequest;

/// Said in place of every image left out.
pub(crate) const IMAGE_LEFT_OUT: &str =
    "[image left out: the request was too long for the model's context]";

/// The label of the target image, which is never left out: without it the model cannot
/// compare anything.
const TARGET_LABEL: &str = "target";

/// `request` with `memory` replaced by `shorter_memory` and older images left out; `None`
/// when neither changes anything, so sending it again would fail the same way.
pub(crate) fn shrink_request(
    request: &ModelRequest,
    memory: &str,
    shorter_memory: &str,
) -> Option<ModelRequest> {
    let mut smaller = request.clone();
    let mut changed = false;
    if shorter_memory.len() < memory.len() && !memory.is_empty() {
        for part in smaller
            .messages
            .iter_mut()
            .flat_map(|m| m.content.iter_mut())
        {
            if let ContentPart::Text { text } = part
                && text.contains(memory)
            {
                *text = text.replace(memory, shorter_memory);
                changed = true;
            }
        }
    }
    let older = smaller.messages.len().saturating_sub(1);
    for message in &mut smaller.messages[..older] {
        changed |= leave_out_images(message);
    }
    changed.then_some(smaller)
}

/// Replaces the message's images (the target's excepted) with a note; whether any was.
fn leave_out_images(message: &mut ChatMessage) -> bool {
    let mut changed = false;
    for part in &mut message.content {
        match part {
            ContentPart::Image { label, .. } if label.as_deref() != Some(TARGET_LABEL) => {
                *part = ContentPart::text(IMAGE_LEFT_OUT);
                changed = true;
            }
            ContentPart::ToolResult(result) if !result.images.is_empty() => {
                result.images.clear();
                result.text.push_str(&format!("\n{IMAGE_LEFT_OUT}"));
                changed = true;
            }
            _ => {}
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use viga_protocol::message::{ImageData, ToolResult};

    use super::*;

    fn image(label: &str) -> ContentPart {
        ContentPart::Image {
            image: ImageData::png(vec![1, 2, 3]),
            label: Some(label.to_owned()),
        }
    }

    #[test]
    fn the_memory_keeps_its_newest_iteration_and_old_images_go() {
        let request = ModelRequest::new(
            "system",
            vec![
                ChatMessage::user(vec![
                    ContentPart::text("Task"),
                    image("target"),
                    image("current, scene camera"),
                ]),
                ChatMessage::user(vec![ContentPart::ToolResult(ToolResult {
                    call_id: "1".into(),
                    text: "a view".into(),
                    images: vec![ImageData::png(vec![4])],
                    is_error: false,
                })]),
                ChatMessage::user(vec![
                    ContentPart::text("MEMORY 1 2 3\n\nWrite the program."),
                    image("latest view"),
                ]),
            ],
        );
        let smaller = shrink_request(&request, "MEMORY 1 2 3", "MEMORY 3").unwrap();
        assert_eq!(
            smaller.image_count(),
            2,
            "the target and the last message's image"
        );
        let last = &smaller.messages[2].content[0];
        assert!(
            matches!(last, ContentPart::Text { text } if text == "MEMORY 3\n\nWrite the program.")
        );
        assert!(matches!(&smaller.messages[1].content[0],
            ContentPart::ToolResult(result) if result.text.ends_with(IMAGE_LEFT_OUT)));
    }

    #[test]
    fn nothing_to_leave_out_means_no_second_try() {
        let request = ModelRequest::new(
            "system",
            vec![ChatMessage::user(vec![
                ContentPart::text("MEMORY 3"),
                image("target"),
            ])],
        );
        assert!(shrink_request(&request, "MEMORY 3", "MEMORY 3").is_none());
    }
}
