"""The conformance suite's fixture tools and prompts (the reference "everything server" names).

They exercise general capabilities of the front that the product's own tools do not use yet:
content blocks other than text, prompts with embedded media, and inline progress over SSE.
``test_tool_with_logging`` and the sampling, elicitation and input-required fixtures are not
defined: the product offers neither MCP logging nor server-to-client requests (see the baselines).
``test_logging_tool`` is defined because the check that uses it asks only that the server send no
``notifications/message`` to a request without a log level, which holds for every call here.
"""

from __future__ import annotations

import asyncio
import base64
import io
import struct
import wave
import zlib
from collections.abc import Mapping

import msgspec

from front.mcp.prompts import PromptArg, PromptSpec, user_text
from front.mcp.protocol import (
    AudioContent, EmbeddedResource, ImageContent, PromptMessage, ResourceContents, TextContent,
)
from shared.auth.permissions import Permission
from shared.errors import ErrorCode, PylotaError
from shared.tools.context import ToolContext
from shared.tools.registry import READ_ONLY, ToolSpec

__all__ = ["TOOLS", "PROMPTS", "PROGRESS_STEPS"]

#: What test_tool_with_progress reports, of a total of 100 (the reference server's steps).
PROGRESS_STEPS = (0.0, 50.0, 100.0)


class NoArgs(msgspec.Struct, forbid_unknown_fields=True):
    """The fixtures take no arguments."""


def _png_1x1() -> str:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    raw = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)) \
        + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b"")
    return base64.b64encode(raw).decode()


def _wav_silence() -> str:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(b"\x00\x00" * 800)
    return base64.b64encode(buffer.getvalue()).decode()


PNG = _png_1x1()
WAV = _wav_silence()
RESOURCE = EmbeddedResource(resource=ResourceContents(
    uri="test://embedded-resource", mime_type="text/plain",
    text="This is an embedded resource content."))


async def simple_text(ctx: ToolContext, args: NoArgs) -> list[TextContent]:
    return [TextContent(text="This is a simple text response for testing.")]


async def image(ctx: ToolContext, args: NoArgs) -> list[ImageContent]:
    return [ImageContent(data=PNG, mime_type="image/png")]


async def audio(ctx: ToolContext, args: NoArgs) -> list[AudioContent]:
    return [AudioContent(data=WAV, mime_type="audio/wav")]


async def embedded(ctx: ToolContext, args: NoArgs) -> list[EmbeddedResource]:
    return [RESOURCE]


async def mixed(ctx: ToolContext, args: NoArgs) -> list[msgspec.Struct]:
    return [TextContent(text="Multiple content types test:"),
            ImageContent(data=PNG, mime_type="image/png"), RESOURCE]


async def with_progress(ctx: ToolContext, args: NoArgs) -> list[TextContent]:
    for step in PROGRESS_STEPS:
        await ctx.control.progress(step, 100.0, f"step {step:.0f}")
        await asyncio.sleep(0.05)
    return [TextContent(text="Progress test completed.")]


async def logging_tool(ctx: ToolContext, args: NoArgs) -> list[TextContent]:
    return [TextContent(text="No log messages: this server never sends notifications/message.")]


async def error_handling(ctx: ToolContext, args: NoArgs) -> list[TextContent]:
    raise PylotaError(ErrorCode.INVALID_REQUEST,
                      "This tool intentionally returns an error for testing.")


def _tool(name: str, description: str, handler) -> ToolSpec:  # type: ignore[no-untyped-def]
    return ToolSpec(name=name, title=name, description=description, args=NoArgs, result=None, permission=Permission.IDENTITIES_READ,
                    annotations=READ_ONLY, handler=handler)


TOOLS: tuple[ToolSpec, ...] = (
    _tool("test_simple_text", "Returns simple text content.", simple_text),
    _tool("test_image_content", "Returns a 1x1 PNG image.", image),
    _tool("test_audio_content", "Returns a short WAV clip.", audio),
    _tool("test_embedded_resource", "Returns an embedded text resource.", embedded),
    _tool("test_multiple_content_types", "Returns text, an image and a resource.", mixed),
    _tool("test_tool_with_progress", "Reports progress 0, 50, 100 of 100.", with_progress),
    _tool("test_error_handling", "Always fails with isError.", error_handling),
    _tool("test_logging_tool", "Would log if asked to; the server never is.", logging_tool),
)


def _with_arguments(args: Mapping[str, str]) -> list[PromptMessage]:
    return user_text(f"Prompt with arguments: arg1='{args['arg1']}', arg2='{args['arg2']}'")


def _with_resource(args: Mapping[str, str]) -> list[PromptMessage]:
    resource = EmbeddedResource(resource=ResourceContents(
        uri=args["resourceUri"], mime_type="text/plain",
        text="Embedded resource content for testing."))
    return [PromptMessage(role="user", content=resource),
            *user_text("Please process the embedded resource above.")]


def _with_image(args: Mapping[str, str]) -> list[PromptMessage]:
    return [PromptMessage(role="user", content=ImageContent(data=PNG, mime_type="image/png")),
            *user_text("Please analyze the image above.")]


PROMPTS: tuple[PromptSpec, ...] = (
    PromptSpec(name="test_simple_prompt", title="Simple prompt",
               description="A prompt with no arguments.", arguments=(),
               render=lambda args: user_text("This is a simple prompt for testing.")),
    PromptSpec(name="test_prompt_with_arguments", title="Prompt with arguments",
               description="A prompt with two required arguments.",
               arguments=(PromptArg("arg1", "First test argument", required=True),
                          PromptArg("arg2", "Second test argument", required=True)),
               render=_with_arguments),
    PromptSpec(name="test_prompt_with_embedded_resource", title="Prompt with a resource",
               description="A prompt that embeds a resource.",
               arguments=(PromptArg("resourceUri", "URI of the resource to embed",
                                    required=True),),
               render=_with_resource),
    PromptSpec(name="test_prompt_with_image", title="Prompt with an image",
               description="A prompt that carries an image.", arguments=(),
               render=_with_image),
)
