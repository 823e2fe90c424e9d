mod agent;
#[cfg(feature = "clip")]
mod clip;
mod layout;
mod mini;
mod search;
