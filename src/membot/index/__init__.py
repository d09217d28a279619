"""Search by scope: exact vector search and BM25 held in memory per scope, and approximate
(HNSW) nomination for a large shared scope."""
