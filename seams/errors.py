"""The one error hierarchy of Seams.

It lives in `chunking/` because that is the bottom layer: resources, assets and the CLI import it
from here. Messages name the bad field, file or value and say what to do about it.
"""


class SeamsError(Exception):
    """Base of every error Seams raises on purpose."""


class ConfigError(SeamsError, ValueError):
    """A configuration value is invalid; the message names the field and the allowed range."""


class InputError(SeamsError, ValueError):
    """A document or argument cannot be processed; the message names it."""


class EmbeddingError(SeamsError, RuntimeError):
    """The embedding model is missing, corrupt or failed during inference."""


class StorageError(SeamsError, RuntimeError):
    """PostgreSQL is unreachable, misconfigured, or a write could not complete."""
