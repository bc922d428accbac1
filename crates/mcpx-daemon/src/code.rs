//! Code mode (issue 21): TypeScript declarations generated from the tools' schemas, so a
//! script calls tools as typed async functions.

pub mod names;
pub mod schema_ts;
pub mod types;

pub use types::{Declarations, NameMapping, ServerTools, declarations};
