//! # viga-slides
//!
//! Slides as a place for viga's loop to work: the program is Python using python-pptx, the
//! "render" is a picture of each slide.
//!
//! **Owns:** running what [`locate`] finds (viga-locate's rules for a Python with python-pptx
//! and LibreOffice, re-exported); running a
//! program in a fresh Python with a time limit ([`SlideWorker::run_program`]: the program
//! saves its deck to the file `VIGA_DECK_PATH` names, `deck.pptx` in its working folder);
//! rendering every slide, one slide or a zoomed region of one in a warm LibreOffice
//! ([`SlideWorker::render`], [`SlideWorker::render_slide`], [`SlideWorker::render_region`]);
//! reading a deck's structure ([`SlideWorker::structure`], [`DeckStructure::to_text`]).
//! LibreOffice runs inside a supervised helper process through LibreOfficeKit (no listener
//! socket), killed with its process group and restarted when it hangs or dies.
//!
//! **Must not:** know about models, prompts or the loop; depend on viga-blender.

#![warn(clippy::too_many_lines)] // no library function over 80 lines: clippy.toml sets the threshold

pub use viga_locate::office as locate;
mod office;
mod program;
mod structure;
mod worker;

pub use locate::SlideTools;
pub use program::{DECK_FILE, DECK_PATH_ENV, ProgramError, ProgramRun, ProgramStatus};
pub use structure::{
    Block, BlockContent, DeckStructure, Fill, ImageStructure, ParagraphStructure, RunStructure,
    ShapeStructure, SlideBlocks, SlideStructure,
};
pub use viga_locate::NotFound;
pub use viga_process::{Confinement, LostReason, Recovery, WorkerLost};
pub use worker::{
    Deck, DeckRender, MAX_PROGRAM_BYTES, MAX_RENDER_WIDTH, ProgramResult, Region, SlideImage,
    SlideWorker, SlidesConfig, SlidesError,
};
