"""Per-document resource limits for extraction: one hostile or absurd file fails alone, quickly.

A batch keeps its bytes in PostgreSQL, so a document that hangs extraction or eats the machine
hangs every rerun of its batch; these caps turn it into a per-document error instead. They are
settings (`ExtractionLimits`, built by the composition root from `seams.yaml`'s `extraction:`
section) with defaults that pass any real document we know of and stop the known attacks:

- `zip_*`: DOCX is a zip. Sizes and member counts are read from the zip's directory before
  anything is decompressed. The declared sizes bound the work: Python's `zipfile` (which
  python-docx reads through) never returns more than a member's declared size, and fails its CRC
  check if the data would go on, so a small DOCX declaring gigabytes of XML stops here at once.
- `chars_max`: extracted characters per document. The chunking stages hold per-character and
  per-candidate state (peak memory by document size: "Large documents" in the reliability docs),
  so this also bounds downstream memory until they stream.
- `seconds_max`: a wall-clock budget per document, checked cooperatively between pages,
  paragraphs and elements (no subprocess per document: extraction is pure Python/lxml and every
  loop that grows with the input checks it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields

from seams.errors import ConfigError

SETTINGS_SECTION = "extraction"


@dataclass(frozen=True)
class ExtractionLimits:
    """Caps per document (contract: field names are the `extraction.*` keys of seams.yaml)."""

    file_bytes_max: int = 100 * 2**20
    """Size of the source file as stored."""
    zip_members_max: int = 10_000
    """Members of a zip container (DOCX); Word writes a few dozen, plus one per image."""
    zip_uncompressed_bytes_max: int = 512 * 2**20
    """Sum of the declared uncompressed sizes of all members (XML, images, fonts)."""
    zip_xml_bytes_max: int = 32 * 2**20
    """Sum of the declared uncompressed sizes of the XML parts, which are parsed into memory:
    room for a Word document of a thousand pages."""
    chars_max: int = 10_000_000
    """Characters of extracted text (a few thousand pages)."""
    seconds_max: float = 120.0
    """Wall-clock seconds for one document's extraction."""

    def __post_init__(self) -> None:
        for spec in fields(self):
            value = getattr(self, spec.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ConfigError(
                    f"{SETTINGS_SECTION}.{spec.name}={value!r}: must be a positive number"
                )
            if spec.type == "int" and not isinstance(value, int):
                raise ConfigError(
                    f"{SETTINGS_SECTION}.{spec.name}={value!r}: must be a whole number"
                )

    @classmethod
    def from_settings(cls, values: dict[str, object]) -> ExtractionLimits:
        """Limits from the `extraction:` block of seams.yaml (unknown keys are errors)."""
        known = {spec.name for spec in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(
                f"{SETTINGS_SECTION}.{unknown[0]}: unknown limit; choose from "
                f"{', '.join(sorted(known))}"
            )
        return cls(**values)  # type: ignore[arg-type]

    def changed(self) -> tuple[str, ...]:
        """`name=value` of every limit that differs from its default, for code versions: the
        defaults add nothing, so a pipeline on defaults keeps its versions."""
        default = type(self)()
        return tuple(
            f"{spec.name}={getattr(self, spec.name)!r}"
            for spec in fields(self)
            if getattr(self, spec.name) != getattr(default, spec.name)
        )


class LimitExceeded(Exception):
    """A document went over one of `ExtractionLimits`; the message names the limit, its value,
    what to do about the document, and how to raise the limit."""

    def __init__(self, field: str, what: str, limit: str, advice: str) -> None:
        self.field = field
        key = f"{SETTINGS_SECTION}.{field}"
        super().__init__(
            f"{what}, over the limit {key} = {limit}; {advice}, or raise {key} in seams.yaml "
            "if the document is genuine"
        )


def size_text(n: int) -> str:
    """Bytes for messages: "1.1 GiB", "55.0 MiB", "812 bytes"."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


class Budget:
    """One document's running budget: the wall-clock deadline and the characters produced.

    Extractors call `check()` in every loop whose length grows with the input (pages,
    paragraphs, elements) and `add_chars()` as text accumulates; both raise `LimitExceeded`.
    """

    def __init__(self, limits: ExtractionLimits) -> None:
        self.limits = limits
        self.started = time.monotonic()
        self.deadline = self.started + limits.seconds_max
        self.chars = 0

    def check(self) -> None:
        if time.monotonic() > self.deadline:
            raise LimitExceeded(
                "seconds_max",
                f"extraction took longer than {self.limits.seconds_max:g} s",
                f"{self.limits.seconds_max:g} s",
                "split the document into smaller files",
            )

    def add_chars(self, count: int) -> None:
        self.chars += count
        self.check_chars(self.chars)

    def check_chars(self, total: int) -> None:
        if total > self.limits.chars_max:
            raise LimitExceeded(
                "chars_max",
                f"the extracted text has more than {self.limits.chars_max:,} characters",
                f"{self.limits.chars_max:,}",
                "split the document into smaller files",
            )
