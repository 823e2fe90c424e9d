//! viga's end-to-end tests, one module per area; they drive the real `viga` binary
//! (`CARGO_BIN_EXE_viga`) and real Blender, LibreOffice and Chromium. One test binary, so the
//! workspace links one executable for all of them.

mod agent;
mod assets;
mod attach;
mod containment;
mod eval_blenderbench;
mod eval_flat;
mod eval_shards;
mod faults;
mod flat_modes;
mod follow_up;
mod gateway;
mod generator_tools_flag;
mod gn_attacks;
mod gn_presets;
mod keys;
mod kill_and_resume;
mod limits;
mod mcp_stdio;
mod modes;
mod old_runs;
mod panel;
mod paths;
mod replies;
mod resume_untrusted;
mod search_generator;
mod server;
mod through_mcp;
