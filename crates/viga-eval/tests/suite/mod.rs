mod agent;
mod layout;
mod mini;
