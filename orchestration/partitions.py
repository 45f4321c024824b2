"""The partitioning of every per-batch asset: one dynamic partition per document batch."""

from dagster import DynamicPartitionsDefinition

document_batches = DynamicPartitionsDefinition(name="document_batches")
