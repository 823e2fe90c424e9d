//! A deck's structure as python-pptx reads it: slides, shapes, text with its fonts, colours
//! and positions. The verifier reads it as text ([`DeckStructure::to_text`]). Read from a
//! model's deck by the warm helper, which cuts every text and list to a bound.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// English Metric Units per inch (python-pptx and OOXML lengths).
const EMU_PER_INCH: f64 = 914_400.0;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeckStructure {
    /// Slide size in EMU.
    pub slide_width: i64,
    pub slide_height: i64,
    /// Slides in the deck; only the first ones may be in [`Self::slides`].
    pub slide_count: usize,
    pub slides: Vec<SlideStructure>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlideStructure {
    /// 1-based.
    pub number: usize,
    pub layout: Option<String>,
    /// The slide's own solid background (`#RRGGBB` or `theme:NAME`), when it has one.
    pub background: Option<String>,
    pub shapes: Vec<ShapeStructure>,
    /// Shapes past the bound, not listed.
    pub omitted_shapes: usize,
    pub notes: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShapeStructure {
    pub id: Option<u32>,
    pub name: Option<String>,
    /// python-pptx's shape type (`TEXT_BOX`, `PICTURE`, `AUTO_SHAPE`, `PLACEHOLDER`, …).
    pub kind: String,
    /// Position and size in EMU; absent where python-pptx cannot say (an inherited
    /// placeholder).
    pub left: Option<i64>,
    pub top: Option<i64>,
    pub width: Option<i64>,
    pub height: Option<i64>,
    pub rotation: f64,
    pub placeholder: Option<String>,
    pub fill: Option<String>,
    pub line: Option<String>,
    pub text: Vec<ParagraphStructure>,
    /// Cell texts, row by row.
    pub table: Option<Vec<Vec<String>>>,
    pub image: Option<ImageStructure>,
    /// A group's shapes.
    pub children: Vec<ShapeStructure>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParagraphStructure {
    pub text: Option<String>,
    pub level: u32,
    pub alignment: Option<String>,
    pub runs: Vec<RunStructure>,
}

/// A run of text with its own font. `None` means inherited (from the placeholder, layout or
/// theme), not "off".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunStructure {
    pub text: String,
    pub font: Option<String>,
    pub size_pt: Option<f64>,
    pub bold: Option<bool>,
    pub italic: Option<bool>,
    pub underline: Option<bool>,
    pub color: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageStructure {
    pub content_type: Option<String>,
    pub bytes: u64,
}

impl DeckStructure {
    /// One line per shape, indented by group, positions in inches and as a share of the
    /// slide, then the shape's text with its fonts.
    pub fn to_text(&self) -> String {
        let mut text = format!(
            "Deck: {} slide(s), {:.2} x {:.2} in\n",
            self.slide_count,
            inches(self.slide_width),
            inches(self.slide_height)
        );
        for slide in &self.slides {
            let _ = write!(text, "\nSlide {}", slide.number);
            if let Some(layout) = &slide.layout {
                let _ = write!(text, " (layout {layout:?})");
            }
            if let Some(background) = &slide.background {
                let _ = write!(text, ", background {background}");
            }
            text.push('\n');
            for shape in &slide.shapes {
                self.describe_shape(&mut text, shape, 1);
            }
            if slide.omitted_shapes > 0 {
                let _ = writeln!(
                    text,
                    "  … {} more shape(s) not listed",
                    slide.omitted_shapes
                );
            }
            if let Some(notes) = slide.notes.as_deref().filter(|notes| !notes.is_empty()) {
                let _ = writeln!(text, "  notes: {notes:?}");
            }
        }
        let listed = self.slides.len();
        if listed < self.slide_count {
            let _ = writeln!(
                text,
                "\n… slides {} to {} not listed",
                listed + 1,
                self.slide_count
            );
        }
        text
    }

    fn describe_shape(&self, text: &mut String, shape: &ShapeStructure, depth: usize) {
        let indent = "  ".repeat(depth);
        let _ = write!(text, "{indent}- {}", shape.kind);
        if let Some(name) = &shape.name {
            let _ = write!(text, " {name:?}");
        }
        if let Some(placeholder) = &shape.placeholder {
            let _ = write!(text, " [placeholder {placeholder}]");
        }
        if let (Some(left), Some(top), Some(width), Some(height)) =
            (shape.left, shape.top, shape.width, shape.height)
        {
            let _ = write!(
                text,
                " at ({:.2}, {:.2}) in, size {:.2} x {:.2} in ({:.0}%, {:.0}% of the slide; {:.0}% x {:.0}%)",
                inches(left),
                inches(top),
                inches(width),
                inches(height),
                share(left, self.slide_width),
                share(top, self.slide_height),
                share(width, self.slide_width),
                share(height, self.slide_height),
            );
        }
        if shape.rotation != 0.0 {
            let _ = write!(text, ", rotated {:.0}°", shape.rotation);
        }
        if let Some(fill) = &shape.fill {
            let _ = write!(text, ", fill {fill}");
        }
        if let Some(line) = &shape.line {
            let _ = write!(text, ", line {line}");
        }
        if let Some(image) = &shape.image {
            let _ = write!(
                text,
                ", image {} ({} bytes)",
                image.content_type.as_deref().unwrap_or("of unknown type"),
                image.bytes
            );
        }
        text.push('\n');
        for paragraph in &shape.text {
            let Some(words) = paragraph.text.as_deref().filter(|words| !words.is_empty()) else {
                continue;
            };
            let _ = write!(text, "{indent}    text {words:?}");
            if paragraph.level > 0 {
                let _ = write!(text, " (level {})", paragraph.level);
            }
            if let Some(alignment) = &paragraph.alignment {
                let _ = write!(text, " aligned {alignment}");
            }
            text.push('\n');
            for run in paragraph.runs.iter().filter(|run| run.has_own_format()) {
                let _ = writeln!(text, "{indent}      run {:?}: {}", run.text, run.format());
            }
        }
        if let Some(rows) = &shape.table {
            for row in rows {
                let _ = writeln!(text, "{indent}    row {row:?}");
            }
        }
        for child in &shape.children {
            self.describe_shape(text, child, depth + 1);
        }
    }
}

impl RunStructure {
    fn has_own_format(&self) -> bool {
        self.font.is_some()
            || self.size_pt.is_some()
            || self.bold.is_some()
            || self.italic.is_some()
            || self.underline.is_some()
            || self.color.is_some()
    }

    fn format(&self) -> String {
        let mut parts = Vec::new();
        if let Some(font) = &self.font {
            parts.push(font.clone());
        }
        if let Some(size) = self.size_pt {
            parts.push(format!("{size} pt"));
        }
        for (flag, name) in [
            (self.bold, "bold"),
            (self.italic, "italic"),
            (self.underline, "underlined"),
        ] {
            match flag {
                Some(true) => parts.push(name.to_owned()),
                Some(false) => parts.push(format!("not {name}")),
                None => {}
            }
        }
        if let Some(color) = &self.color {
            parts.push(color.clone());
        }
        parts.join(", ")
    }
}

fn inches(emu: i64) -> f64 {
    emu as f64 / EMU_PER_INCH
}

fn share(part: i64, whole: i64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// One slide as AutoPresent's reference-based evaluator reads it (SlideBench): its
/// top-level shapes with a text frame and its pictures, in order, with positions and sizes as
/// shares of the slide; and its own background when that is a solid RGB colour.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlideBlocks {
    pub blocks: Vec<Block>,
    /// The slide's own solid RGB background; `None` when it follows the master's or is not
    /// a solid RGB colour.
    pub background: Option<[u8; 3]>,
    /// Slides in the deck.
    pub slide_count: usize,
}

/// A text shape or a picture.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Block {
    #[serde(flatten)]
    pub content: BlockContent,
    /// Left, top, width and height as shares of the slide's width and height.
    pub left: f64,
    pub top: f64,
    pub width: f64,
    pub height: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BlockContent {
    /// A shape with a text frame (a text box, a placeholder, an auto shape): its whole text
    /// (paragraphs joined by line breaks) and its fill.
    Text { text: String, fill: Fill },
    /// A picture, known by the SHA-1 of its image.
    Image { image_sha1: Option<String> },
}

/// A shape's fill, as SlideBench's colour score compares it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fill {
    /// `solid`, `background` (no fill), `inherited` (none given) or another kind (`gradient`,
    /// `patterned`, `picture`, `group`).
    #[serde(rename = "type")]
    pub kind: String,
    /// A solid fill's RGB colour.
    #[serde(default)]
    pub rgb: Option<[u8; 3]>,
    /// A solid fill's theme colour.
    #[serde(default)]
    pub theme: Option<String>,
}
