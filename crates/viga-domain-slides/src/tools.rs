//! The slides domain's tools: look at one slide, zoom into a region of one, read a slide's
//! structure as text. They work on the deck the last program saved.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use viga_protocol::ProtocolType;
use viga_protocol::message::ImageData;
use viga_skills::registry::{parameters_of, parse_arguments};
use viga_skills::{CapturedRender, Tool, ToolError, ToolOutput};
use viga_slides::{Region, SlidesError};

use super::{NO_DECK_YET, SlidesDomain, tool_error};
use viga_core::CoreError;
use viga_core::domain::RoleTools;
use viga_core::renderer::{elapsed_ms, picture};

/// The generator's tools and the verifier's.
pub(super) fn registries() -> Result<RoleTools<SlidesDomain>, CoreError> {
    RoleTools::of(
        vec![Arc::new(ReadSlideStructure), Arc::new(ShowSlide)],
        vec![
            Arc::new(ShowSlide),
            Arc::new(ZoomSlide),
            Arc::new(ReadSlideStructure),
        ],
    )
    .map_err(|err| CoreError::Tool(err.to_string()))
}

/// `show_slide`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShowSlideArgs {
    /// The slide's number, 1 for the first.
    #[schemars(range(min = 1))]
    pub slide: usize,
}

impl ProtocolType for ShowSlideArgs {
    const NAME: &'static str = "ShowSlideArgs";
}

/// `zoom_slide`'s arguments: a region in fractions of the slide's width and height.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ZoomSlideArgs {
    /// The slide's number, 1 for the first.
    #[schemars(range(min = 1))]
    pub slide: usize,
    /// Left edge of the region, 0 (slide's left) to 1.
    #[schemars(range(min = 0.0, max = 1.0))]
    pub x: f64,
    /// Top edge of the region, 0 (slide's top) to 1.
    #[schemars(range(min = 0.0, max = 1.0))]
    pub y: f64,
    /// Width of the region as a share of the slide's width (0.5: half of it).
    #[schemars(range(min = 0.01, max = 1.0))]
    pub width: f64,
    /// Height of the region as a share of the slide's height.
    #[schemars(range(min = 0.01, max = 1.0))]
    pub height: f64,
}

impl ProtocolType for ZoomSlideArgs {
    const NAME: &'static str = "ZoomSlideArgs";
}

/// `read_slide_structure`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadStructureArgs {
    /// Only this slide (1 for the first); every slide when left out.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub slide: Option<usize>,
}

impl ProtocolType for ReadStructureArgs {
    const NAME: &'static str = "ReadStructureArgs";
}

/// A renderer's refusal (no such slide, a region outside it) in words for the model; a
/// lost renderer reported to the watch first.
fn refused_or_lost(domain: &SlidesDomain, err: SlidesError) -> ToolError {
    match err {
        SlidesError::Refused { .. } | SlidesError::BadRequest(_) => {
            ToolError::Recoverable(err.to_string())
        }
        err => tool_error(domain.fault(err)),
    }
}

/// What `read` finds in the current deck; a renderer error in words for the model.
async fn on_the_deck<'a, T, F>(
    domain: &SlidesDomain,
    deck: Option<&'a viga_slides::Deck>,
    read: impl FnOnce(&'a viga_slides::Deck) -> F,
) -> Result<T, ToolError>
where
    F: Future<Output = Result<T, SlidesError>>,
{
    let Some(deck) = deck else {
        return Err(ToolError::Recoverable(NO_DECK_YET.to_owned()));
    };
    let found = read(deck)
        .await
        .map_err(|err| refused_or_lost(domain, err))?;
    domain.watch.answered();
    Ok(found)
}

fn one_picture(
    view: String,
    png: Vec<u8>,
    width: u32,
    height: u32,
    ms: f64,
    text: String,
) -> ToolOutput {
    ToolOutput {
        text,
        images: vec![ImageData::png(png.clone())],
        renders: vec![CapturedRender {
            picture: picture(png, width, height, ms),
            view,
            file: None,
        }],
        ..ToolOutput::default()
    }
}

struct ShowSlide;

#[async_trait]
impl Tool<SlidesDomain> for ShowSlide {
    fn name(&self) -> &str {
        "show_slide"
    }

    fn description(&self) -> &str {
        "Look at one slide of the current deck as a picture."
    }

    fn parameters(&self) -> Value {
        parameters_of::<ShowSlideArgs>()
    }

    async fn invoke(
        &self,
        domain: &SlidesDomain,
        arguments: Value,
    ) -> Result<ToolOutput, ToolError> {
        let args: ShowSlideArgs = parse_arguments(self.name(), arguments)?;
        match domain
            .slide_picture(args.slide, domain.settings.view_width)
            .await
            .map_err(tool_error)?
        {
            Ok((png, width, height, ms)) => Ok(one_picture(
                format!("slide{}", args.slide),
                png,
                width,
                height,
                ms,
                format!("Slide {}:", args.slide),
            )),
            Err(why) => Err(ToolError::Recoverable(why)),
        }
    }
}

struct ZoomSlide;

#[async_trait]
impl Tool<SlidesDomain> for ZoomSlide {
    fn name(&self) -> &str {
        "zoom_slide"
    }

    fn description(&self) -> &str {
        "Zoom into a region of one slide: x, y, width and height are fractions of the slide (0.5, 0, 0.5, 0.5 is its top right quarter), shown enlarged to read small text and check alignment and colours."
    }

    fn parameters(&self) -> Value {
        parameters_of::<ZoomSlideArgs>()
    }

    async fn invoke(
        &self,
        domain: &SlidesDomain,
        arguments: Value,
    ) -> Result<ToolOutput, ToolError> {
        let args: ZoomSlideArgs = parse_arguments(self.name(), arguments)?;
        let region = Region {
            x: args.x,
            y: args.y,
            width: args.width,
            height: args.height,
        };
        let started = Instant::now();
        let deck = domain.deck.lock().await;
        let zoomed = on_the_deck(domain, deck.as_ref(), |deck| {
            domain
                .worker
                .render_region(deck, args.slide, region, domain.settings.view_width)
        })
        .await?;
        Ok(one_picture(
            format!("slide{}-zoom", args.slide),
            zoomed.png,
            zoomed.width,
            zoomed.height,
            elapsed_ms(started),
            format!(
                "Slide {}, the region from ({:.2}, {:.2}) of {:.2} x {:.2} of the slide, enlarged:",
                args.slide, args.x, args.y, args.width, args.height
            ),
        ))
    }
}

struct ReadSlideStructure;

#[async_trait]
impl Tool<SlidesDomain> for ReadSlideStructure {
    fn name(&self) -> &str {
        "read_slide_structure"
    }

    fn description(&self) -> &str {
        "Read the current deck (or one slide of it) as text: slide size, each shape's kind, name, position and size (inches and share of the slide), fill and line colours, and its text with fonts, sizes and colours (None means inherited)."
    }

    fn parameters(&self) -> Value {
        parameters_of::<ReadStructureArgs>()
    }

    async fn invoke(
        &self,
        domain: &SlidesDomain,
        arguments: Value,
    ) -> Result<ToolOutput, ToolError> {
        let args: ReadStructureArgs = parse_arguments(self.name(), arguments)?;
        let deck = domain.deck.lock().await;
        let mut structure =
            on_the_deck(domain, deck.as_ref(), |deck| domain.worker.structure(deck)).await?;
        if let Some(number) = args.slide {
            if number > structure.slide_count {
                return Err(ToolError::Recoverable(format!(
                    "there is no slide {number}: the deck has {}",
                    structure.slide_count
                )));
            }
            structure.slides.retain(|slide| slide.number == number);
            if structure.slides.is_empty() {
                return Err(ToolError::Recoverable(format!(
                    "slide {number} is past the slides described (the first {})",
                    structure.slide_count.min(50)
                )));
            }
        }
        Ok(ToolOutput::text(structure.to_text()))
    }
}
