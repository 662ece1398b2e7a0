"""The zip directory check that runs before any zip-based format (DOCX, XLSX, PPTX, ODT) is
opened by its library.

It reads only the central directory, never a member: the declared sizes are enough, because
``zipfile`` stops each member at its declared size (and then fails its CRC), so a member cannot
expand past what the directory says. Pure: no I/O; runs inside the sandbox.
"""

from __future__ import annotations

import io
import zipfile

from shared.extract.limits import Limits
from shared.extract.outcome import Reason

__all__ = ["check_zip"]


def check_zip(content: bytes, limits: Limits) -> Reason | None:
    """The limit ``content`` (a zip file) goes over, or None when it is within all of them.

    Returns:
        ``corrupt`` when there is no readable directory; ``too_many_members`` past
        ``limits.max_zip_members``; ``uncompressed_size`` when the members declare more than
        ``limits.max_uncompressed_bytes`` together; ``compression_ratio`` when a member of at
        least ``limits.ratio_floor_bytes`` expands more than ``limits.max_compression_ratio``
        times.
    """
    try:
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError):
        return Reason.CORRUPT
    if len(members) > limits.max_zip_members:
        return Reason.TOO_MANY_MEMBERS
    if sum(m.file_size for m in members) > limits.max_uncompressed_bytes:
        return Reason.UNCOMPRESSED_SIZE
    for member in members:
        if member.file_size >= limits.ratio_floor_bytes and \
                member.file_size > limits.max_compression_ratio * max(member.compress_size, 1):
            return Reason.COMPRESSION_RATIO
    return None
