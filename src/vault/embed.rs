//! Placeholder: the embedding model wrapper lands in the next commit.
