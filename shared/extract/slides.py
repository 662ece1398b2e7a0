"""Text of a PPTX (PresentationML), opened with python-pptx. A slide is a page.

A slide's page holds the text of its shapes in the order the slide lists them (a title usually
first): text frames, tables (a row per line, cells separated by tabs) and the shapes inside
groups, then the slide's speaker notes. Charts and pictures have no text here. Pure: no I/O; runs
inside the sandbox, after the zip directory check.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

import pptx
from pptx.shapes.shapetree import SlideShapes

__all__ = ["pptx_pages"]


def pptx_pages(content: bytes, max_pages: int) -> list[str] | None:
    """One page per slide of a PPTX; None when it has more than ``max_pages`` slides.

    Raises:
        KeyError, ValueError, zipfile.BadZipFile, pptx.exc.PackageNotFoundError: not a
            readable PPTX (from python-pptx).
    """
    slides = list(pptx.Presentation(io.BytesIO(content)).slides)
    if len(slides) > max_pages:
        return None
    pages = []
    for slide in slides:
        lines = list(_shape_lines(slide.shapes))
        if slide.has_notes_slide:
            frame = slide.notes_slide.notes_text_frame
            if frame is not None and frame.text.strip():
                lines.append(frame.text.strip())
        # python-pptx gives a line break inside a paragraph as a vertical tab
        pages.append("\n".join(lines).replace("\v", "\n"))
    return pages


def _shape_lines(shapes: SlideShapes) -> Iterator[str]:
    for shape in shapes:
        if shape.shape_type == pptx.enum.shapes.MSO_SHAPE_TYPE.GROUP:
            yield from _shape_lines(shape.shapes)
        elif getattr(shape, "has_table", False):
            for row in shape.table.rows:
                yield "\t".join(" ".join(cell.text.split()) for cell in row.cells).rstrip("\t")
        elif shape.has_text_frame and shape.text_frame.text.strip():
            yield shape.text_frame.text.strip()
