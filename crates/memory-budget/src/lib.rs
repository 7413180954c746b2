//! placeholder: memory-budget
