mod layout;
mod mini;
