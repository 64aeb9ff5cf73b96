-- Semantic recall for learnings: one embedding per learning, of its pattern and context,
-- by the vault's model. Written in the transaction that records the learning when the
-- model is available, else backfilled later (on search, or `cairn learnings reindex`).
-- Other processes catch up by `id`, a watermark that only grows (a backfill inserts old
-- learnings with new ids). Never edit once shipped; add a new numbered file.

CREATE TABLE learning_embeddings (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,  -- catch-up order; never reused
    learning_seq    INTEGER NOT NULL UNIQUE REFERENCES learnings(seq),
    model           TEXT NOT NULL,                      -- model id, e.g. all-MiniLM-L6-v2-onnx-int8
    embedding       BLOB NOT NULL                       -- little-endian f32 × dimension, unit length
);
