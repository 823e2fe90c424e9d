//! # viga-web
//!
//! Web pages as a place for viga's loop to work: the program is an HTML document with its
//! CSS, the "render" is a screenshot.
//!
//! **Owns:** running the Chromium [`locate`] finds (viga-locate's rules, re-exported); one warm headless Chromium per worker, driven
//! through the DevTools protocol over a pipe (no port, no Node) ([`WebWorker`]): load a
//! document at a window size, screenshot it at other sizes, scrolled or whole, read element
//! boxes and computed styles; the page reaches no network: its document is served from
//! memory and every other request is refused and reported ([`PageReport`]). A page that
//! never finishes loading, or a script that never ends, is stopped at its limit: its tab is
//! closed, or Chromium is killed with its process group and restarted.
//!
//! **Must not:** know about models, prompts or the loop; depend on viga-blender.

#![warn(clippy::too_many_lines)] // no library function over 80 lines: clippy.toml sets the threshold

mod browser;
mod cdp;
pub use viga_locate::chromium as locate;
mod page;
mod worker;

pub use page::{
    ElementBox, ElementStyle, LoadReport, Matched, PageReport, RefusedRequest, Screenshot, Shot,
    Viewport,
};
pub use viga_locate::NotFound;
pub use viga_process::{Confinement, LostReason, Recovery, WorkerLost};
pub use worker::{
    DEFAULT_STYLE_PROPERTIES, MAX_ELEMENTS, MAX_SHOT_HEIGHT, MAX_VIEWPORT, WebConfig, WebError,
    WebWorker,
};
