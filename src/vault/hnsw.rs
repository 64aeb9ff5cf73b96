//! Placeholder: the vector index lands in a later commit.
