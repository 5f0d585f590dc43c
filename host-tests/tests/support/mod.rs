pub mod openapi;
pub mod spin;
