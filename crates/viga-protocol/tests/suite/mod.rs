mod bad_input;
mod fuzz;
mod round_trip;
mod schemas;
