pub mod vault;
