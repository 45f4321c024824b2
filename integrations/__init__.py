"""Seams inside the RAG frameworks people already use: optional extras, imported lazily.

- `seams.integrations.langchain.SeamsTextSplitter` (`pip install "seams-chunking[langchain]"`):
  a LangChain `TextSplitter` (`split_text`, `split_documents`, `create_documents`).
- `seams.integrations.llama_index.SeamsNodeParser` (`pip install "seams-chunking[llama-index]"`): a
  LlamaIndex `NodeParser`, usable in an `IngestionPipeline`.

Both call `seams.chunk_text` with the same config, embedder and token counter a direct call
would use (`seams.integrations.chunker`), so their chunk ids and offsets are `chunk_text`'s.
Neither `import seams` nor `import seams.integrations` imports LangChain or LlamaIndex: only
importing the adapter module itself does, and it says which extra to install when missing.
"""

from seams.integrations.chunker import CHUNK_METADATA_KEYS, PACKAGED_MODEL

__all__ = ["CHUNK_METADATA_KEYS", "PACKAGED_MODEL"]
