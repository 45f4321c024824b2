"""What `seams export` can write: its file formats and how many rows it moves at a time.

Apart from the export's SQL (`export_rows`) and writers (`export_files`), so the command line
can offer them without importing a database driver or pyarrow.
"""

from __future__ import annotations

from typing import Literal

ExportFormat = Literal["parquet", "jsonl"]
FORMATS: tuple[ExportFormat, ...] = ("parquet", "jsonl")
DEFAULT_BATCH_ROWS = 1000
