mod agent;
mod layout;
mod mini;
mod search;
