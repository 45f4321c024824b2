"""Zip containers (DOCX) checked from their directory before anything is decompressed.

The member count comes from the End Of Central Directory record (22 bytes at the end) before
`zipfile` parses the directory, so a zip declaring millions of members costs nothing; the sizes
come from the parsed directory. Declared sizes are what `zipfile` will ever produce per member
(see `seams.extraction.limits`), so checking them bounds decompression.
"""

from __future__ import annotations

import io
import struct
import zipfile

from seams.extraction.limits import ExtractionLimits, LimitExceeded, size_text

_EOCD = struct.Struct("<4s4H2LH")
_EOCD_SIGNATURE = b"PK\x05\x06"
_ZIP64_LOCATOR = struct.Struct("<4sLQL")
_ZIP64_LOCATOR_SIGNATURE = b"PK\x06\x07"
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")
_ZIP64_EOCD_SIGNATURE = b"PK\x06\x06"
_MAX_COMMENT = 0xFFFF
# A central-directory entry is 46 bytes plus its name, extra field and comment; allowing 1 KiB
# per member on average bounds the directory `zipfile` would parse into memory.
_DIRECTORY_BYTES_PER_MEMBER = 1024
_XML_SUFFIXES = (".xml", ".rels", ".vml")


def declared_directory(content: bytes) -> tuple[int, int] | None:
    """(members, central directory bytes) from the End Of Central Directory record (ZIP64 too),
    or None when there is none (not a zip, or a truncated one: `zipfile` reports it)."""
    start = content.rfind(_EOCD_SIGNATURE, max(0, len(content) - _EOCD.size - _MAX_COMMENT))
    if start < 0 or start + _EOCD.size > len(content):
        return None
    _, _, _, _, members, directory_size, _, _ = _EOCD.unpack_from(content, start)
    if members != 0xFFFF and directory_size != 0xFFFFFFFF:
        return members, directory_size
    locator = start - _ZIP64_LOCATOR.size
    if locator < 0 or content[locator : locator + 4] != _ZIP64_LOCATOR_SIGNATURE:
        return members, directory_size
    _, _, offset, _ = _ZIP64_LOCATOR.unpack_from(content, locator)
    if offset + _ZIP64_EOCD.size > len(content) or content[offset : offset + 4] != (
        _ZIP64_EOCD_SIGNATURE
    ):
        return members, directory_size
    fields = _ZIP64_EOCD.unpack_from(content, offset)
    return fields[7], fields[8]


def check_zip(content: bytes, limits: ExtractionLimits) -> None:
    """Raise `LimitExceeded` when the zip declares too many members or too many bytes."""
    declared = declared_directory(content)
    if declared is not None:
        members, directory_size = declared
        _check_members(members, limits)
        if directory_size > limits.zip_members_max * _DIRECTORY_BYTES_PER_MEMBER:
            raise LimitExceeded(
                "zip_members_max",
                f"the zip directory is {size_text(directory_size)}, room for more than "
                f"{limits.zip_members_max:,} members",
                f"{limits.zip_members_max:,}",
                "this is not a document Word writes; re-save it in Word or LibreOffice",
            )
    try:
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            infos = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return  # corrupt: the extractor reports it as such
    _check_members(len(infos), limits)
    total = sum(info.file_size for info in infos)
    xml = sum(info.file_size for info in infos if info.filename.lower().endswith(_XML_SUFFIXES))
    for field, what, size, advice in (
        ("zip_uncompressed_bytes_max", "the zip container", total,
         "a zip bomb, or a document full of media: remove large images or split it"),
        ("zip_xml_bytes_max", "the document's XML parts", xml,
         "split the document into smaller files"),
    ):  # fmt: skip
        limit = getattr(limits, field)
        if size > limit:
            unpacked = f"{what} unpacks to {size_text(size)} (from {size_text(len(content))})"
            raise LimitExceeded(field, unpacked, size_text(limit), advice)


def _check_members(members: int, limits: ExtractionLimits) -> None:
    if members > limits.zip_members_max:
        raise LimitExceeded(
            "zip_members_max",
            f"the zip container has {members:,} members",
            f"{limits.zip_members_max:,}",
            "this is not a document Word writes; re-save it in Word or LibreOffice",
        )
