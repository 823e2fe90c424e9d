mod bad_input;
mod round_trip;
mod schemas;
