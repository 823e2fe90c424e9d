//! The page domain's tools: a screenshot in a window of another size, the page scrolled,
//! the boxes of the elements a selector matches and their computed styles. They look at the
//! page the last program loaded.

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use viga_protocol::ProtocolType;
use viga_protocol::message::ImageData;
use viga_skills::registry::{parameters_of, parse_arguments};
use viga_skills::{Tool, ToolError, ToolOutput};
use viga_web::{Shot, Viewport, WebError};

use super::{NO_PAGE_YET, PageDomain, check_viewport, label, tool_error};
use viga_core::CoreError;
use viga_core::domain::RoleTools;

/// The generator's tools and the verifier's.
pub(super) fn registries() -> Result<RoleTools<PageDomain>, CoreError> {
    RoleTools::of(
        vec![Arc::new(ElementBoxes), Arc::new(ComputedStyles)],
        vec![
            Arc::new(ScreenshotAt),
            Arc::new(ScrollPage),
            Arc::new(ElementBoxes),
            Arc::new(ComputedStyles),
        ],
    )
    .map_err(|err| CoreError::Tool(err.to_string()))
}

/// `screenshot_at`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScreenshotArgs {
    /// The window's width in CSS pixels (390 for a phone, 768 for a tablet).
    #[schemars(range(min = 1, max = 4096))]
    pub width: u32,
    /// The window's height in CSS pixels.
    #[schemars(range(min = 1, max = 4096))]
    pub height: u32,
    /// The whole page's height, not only the window.
    #[serde(default)]
    pub full_page: bool,
}

impl ProtocolType for ScreenshotArgs {
    const NAME: &'static str = "ScreenshotArgs";
}

/// `scroll_page`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScrollArgs {
    /// How far down to scroll, in CSS pixels from the top of the page.
    #[schemars(range(min = 0.0))]
    pub y: f64,
    /// How far right, in CSS pixels from the left (0 when left out).
    #[serde(default)]
    #[schemars(range(min = 0.0))]
    pub x: f64,
}

impl ProtocolType for ScrollArgs {
    const NAME: &'static str = "ScrollArgs";
}

/// The arguments of `element_boxes` and `computed_styles`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ElementsArgs {
    /// A CSS selector, e.g. `h1`, `.card`, `#total`, `nav a`.
    pub selector: String,
    /// The CSS properties to read (`computed_styles` only; a common set when left out).
    #[serde(default)]
    pub properties: Vec<String>,
}

impl ProtocolType for ElementsArgs {
    const NAME: &'static str = "ElementsArgs";
}

/// A browser's refusal (a bad selector, a window too big) in words for the model; a lost
/// page reported to the watch first.
fn refused_or_lost(domain: &PageDomain, err: WebError) -> ToolError {
    match err {
        WebError::BadRequest(_) | WebError::Refused(_) => ToolError::Recoverable(err.to_string()),
        err => tool_error(domain.fault(err, None)),
    }
}

/// What `query` finds on the loaded page; a browser error in words for the model.
async fn on_the_page<T>(
    domain: &PageDomain,
    query: impl Future<Output = Result<T, WebError>>,
) -> Result<T, ToolError> {
    if !domain.is_loaded() {
        return Err(ToolError::Recoverable(NO_PAGE_YET.to_owned()));
    }
    let found = query.await.map_err(|err| refused_or_lost(domain, err))?;
    domain.watch.answered();
    Ok(found)
}

/// `<tag id="…"`, as the tools name an element.
fn element_tag(tag: &str, id: Option<&str>) -> String {
    format!(
        "<{tag}{}",
        id.map(|id| format!(" id={id:?}")).unwrap_or_default()
    )
}

async fn screenshot(
    domain: &PageDomain,
    view: String,
    shot: Shot,
    text: String,
) -> Result<ToolOutput, ToolError> {
    let render = domain
        .shoot(&view, shot)
        .await
        .map_err(tool_error)?
        .map_err(ToolError::Recoverable)?;
    Ok(ToolOutput {
        text,
        images: vec![ImageData::png(render.picture.image.data.clone())],
        renders: vec![render],
        ..ToolOutput::default()
    })
}

struct ScreenshotAt;

#[async_trait]
impl Tool<PageDomain> for ScreenshotAt {
    fn name(&self) -> &str {
        "screenshot_at"
    }

    fn description(&self) -> &str {
        "Show the page in a browser window of another size (e.g. 390x844 for a phone), scrolled to the top, optionally the whole page's height: how the layout responds."
    }

    fn parameters(&self) -> Value {
        parameters_of::<ScreenshotArgs>()
    }

    async fn invoke(&self, domain: &PageDomain, arguments: Value) -> Result<ToolOutput, ToolError> {
        let args: ScreenshotArgs = parse_arguments(self.name(), arguments)?;
        let viewport = check_viewport(Viewport {
            width: args.width,
            height: args.height,
        })
        .map_err(ToolError::Recoverable)?;
        let shot = Shot {
            viewport: Some(viewport),
            scroll: Some((0.0, 0.0)),
            full_page: args.full_page,
        };
        let whole = if args.full_page {
            ", the whole page"
        } else {
            ""
        };
        screenshot(
            domain,
            format!("window-{}", label(viewport)),
            shot,
            format!("The page in a {} window{whole}:", label(viewport)),
        )
        .await
    }
}

struct ScrollPage;

#[async_trait]
impl Tool<PageDomain> for ScrollPage {
    fn name(&self) -> &str {
        "scroll_page"
    }

    fn description(&self) -> &str {
        "Show the page in the run's window scrolled to a point (y pixels down from the top): what lies below the first screen."
    }

    fn parameters(&self) -> Value {
        parameters_of::<ScrollArgs>()
    }

    async fn invoke(&self, domain: &PageDomain, arguments: Value) -> Result<ToolOutput, ToolError> {
        let args: ScrollArgs = parse_arguments(self.name(), arguments)?;
        if !(args.x.is_finite() && args.y.is_finite()) {
            return Err(ToolError::Recoverable(
                "scroll to finite coordinates".to_owned(),
            ));
        }
        let viewport = domain.settings.viewport;
        let shot = Shot {
            viewport: Some(viewport),
            scroll: Some((args.x, args.y)),
            full_page: false,
        };
        screenshot(
            domain,
            format!("scrolled-{:.0}", args.y),
            shot,
            format!(
                "The page in its {} window scrolled to ({:.0}, {:.0}) (a page shorter than that stops at its end):",
                label(viewport),
                args.x,
                args.y
            ),
        )
        .await
    }
}

struct ElementBoxes;

#[async_trait]
impl Tool<PageDomain> for ElementBoxes {
    fn name(&self) -> &str {
        "element_boxes"
    }

    fn description(&self) -> &str {
        "The boxes (x, y, width, height in CSS pixels from the page's top left) and the start of the text of the elements a CSS selector matches: exact positions and sizes."
    }

    fn parameters(&self) -> Value {
        parameters_of::<ElementsArgs>()
    }

    async fn invoke(&self, domain: &PageDomain, arguments: Value) -> Result<ToolOutput, ToolError> {
        let args: ElementsArgs = parse_arguments(self.name(), arguments)?;
        let matched = on_the_page(domain, domain.worker.element_boxes(&args.selector)).await?;
        let mut text = format!(
            "{} element(s) match {:?}{}:\n",
            matched.count,
            args.selector,
            if matched.count > matched.elements.len() {
                format!(" (the first {} listed)", matched.elements.len())
            } else {
                String::new()
            }
        );
        for element in &matched.elements {
            text.push_str(&format!(
                "- {}{}> x={:.0} y={:.0} w={:.0} h={:.0} text={:?}\n",
                element_tag(&element.tag, element.id.as_deref()),
                element
                    .classes
                    .as_deref()
                    .map(|classes| format!(" class={classes:?}"))
                    .unwrap_or_default(),
                element.x,
                element.y,
                element.width,
                element.height,
                element.text
            ));
        }
        Ok(ToolOutput::text(text))
    }
}

struct ComputedStyles;

#[async_trait]
impl Tool<PageDomain> for ComputedStyles {
    fn name(&self) -> &str {
        "computed_styles"
    }

    fn description(&self) -> &str {
        "The computed CSS of the elements a selector matches: the properties named (color, font-size, background-color, ...) or a common set of layout, colour and font properties."
    }

    fn parameters(&self) -> Value {
        parameters_of::<ElementsArgs>()
    }

    async fn invoke(&self, domain: &PageDomain, arguments: Value) -> Result<ToolOutput, ToolError> {
        let args: ElementsArgs = parse_arguments(self.name(), arguments)?;
        let properties: Vec<&str> = args.properties.iter().map(String::as_str).collect();
        let matched = on_the_page(
            domain,
            domain.worker.computed_styles(&args.selector, &properties),
        )
        .await?;
        let mut text = format!("{} element(s) match {:?}:\n", matched.count, args.selector);
        for element in &matched.elements {
            let styles: Vec<String> = element
                .styles
                .iter()
                .map(|(name, value)| format!("{name}: {value}"))
                .collect();
            text.push_str(&format!(
                "- {}> {}\n",
                element_tag(&element.tag, element.id.as_deref()),
                styles.join("; ")
            ));
        }
        Ok(ToolOutput::text(text))
    }
}
