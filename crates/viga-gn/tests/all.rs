//! viga-gn on real Blender: one test binary with its own harness, so all tests share one
//! warm worker and the worker is shut down when they are done.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;

fn main() -> std::process::ExitCode {
    suite::main()
}
