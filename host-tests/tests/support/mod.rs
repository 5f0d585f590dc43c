//! Support shared by the edge tests; each test file uses part of it.
#![allow(dead_code)]

pub mod edge_client;
pub mod openapi;
pub mod spin;
