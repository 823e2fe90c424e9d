mod anthropic;
mod config;
mod faults;
mod gemini;
mod openai;
mod scripted;
mod server;
mod support;
