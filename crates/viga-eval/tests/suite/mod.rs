mod agent;
#[cfg(feature = "clip")]
mod clip;
mod honesty;
mod layout;
mod mini;
mod search;
