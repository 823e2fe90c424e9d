//! Pulling the program out of a model's answer: the first fenced block of the domain's
//! language wins (seed 000); an answer without one is a format failure (E2).

/// The first fenced code block tagged `python`/`py` or untagged; `None` when there is none.
pub fn first_python_block(text: &str) -> Option<String> {
    first_block(text, &["python", "py", "python3"])
}

/// The first fenced code block tagged with one of `tags` (compared without case) or
/// untagged; `None` when there is none or it is empty.
pub(crate) fn first_block(text: &str, tags: &[&str]) -> Option<String> {
    first_block_and_end(text, tags).map(|(code, _)| code)
}

/// [`first_block`] and whether its closing fence was written (an answer cut off by the
/// token limit can end inside its block).
pub(crate) fn first_block_and_end(text: &str, tags: &[&str]) -> Option<(String, bool)> {
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        let Some(info) = trimmed.strip_prefix("```") else {
            continue;
        };
        let fence_indent = line.len() - trimmed.len();
        let language = info.trim().to_ascii_lowercase();
        let wanted =
            language.is_empty() || tags.iter().any(|tag| tag.eq_ignore_ascii_case(&language));
        let mut body = Vec::new();
        let mut closed = false;
        for inner in lines.by_ref() {
            if inner.trim_start().starts_with("```") {
                closed = true;
                break;
            }
            // Strip the fence's own indentation (blocks inside list items).
            body.push(
                inner
                    .get(fence_indent..)
                    .filter(|_| inner.starts_with(&line[..fence_indent]))
                    .unwrap_or(inner),
            );
        }
        if wanted {
            let code = body.join("\n");
            // An unterminated block still counts (answers cut off by the token limit), but an
            // empty one does not.
            if !code.trim().is_empty() && (closed || !body.is_empty()) {
                return Some((code + "\n", closed));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{first_block, first_python_block};

    #[test]
    fn cases() {
        let cases: &[(&str, Option<&str>)] = &[
            ("```python\nimport bpy\n```", Some("import bpy\n")),
            (
                "Here:\n```py\nx = 1\n```\nand\n```python\ny = 2\n```",
                Some("x = 1\n"),
            ),
            ("```\nprint(1)\n```", Some("print(1)\n")),
            ("```json\n{}\n```\n```python\nz = 3\n```", Some("z = 3\n")),
            ("I would add a cube to the scene.", None),
            ("```python\n```", None),
            (
                "```python\nimport bpy\nbpy.ops.mesh.primitive_cube_add(",
                Some("import bpy\nbpy.ops.mesh.primitive_cube_add(\n"),
            ),
            (
                "1. Code:\n   ```python\n   a = 1\n   if a:\n       b = 2\n   ```",
                Some("a = 1\nif a:\n    b = 2\n"),
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(first_python_block(text).as_deref(), *expected, "{text:?}");
        }
    }

    #[test]
    fn other_languages() {
        let page = "```css\nbody {}\n```\n```HTML\n<p>hi</p>\n```";
        assert_eq!(first_block(page, &["html"]).as_deref(), Some("<p>hi</p>\n"));
        assert_eq!(first_block(page, &["python"]), None);
    }
}
