mod agent;
mod clip;
mod layout;
mod mini;
mod search;
