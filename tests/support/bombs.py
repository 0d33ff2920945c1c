"""A compression bomb: 1,436 bytes of ``Content-Encoding: gzip, gzip`` that decode to ~700 MB
(a JSON-RPC message answer whose text is 700 MiB of spaces), built once with zlib and kept here."""

from __future__ import annotations

import base64

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

GZIP_GZIP_BOMB = base64.b64decode(
    "H4sIAKbPEmsC/+3cv4sXBBjH8S93qIeoQbOYIA3pohQKccgFCpL/QeBtDiLIOTUcUjkJ/kCcPFRw0xK9WiQR6RRsaRERh7um0kND"
    "hE4XKzzR/gjh+369pmf+jM/w/uj42OCtkdFnv32x+s7EmhX3rux5uPvB49/nPv158+fHvlq4//3Gl0undo/fnT736JszHz/f/+TS"
    "3+s/Wbew77PDN3fN79j2eOmvxT17xw8dufrHzN4Dszcm/7v+5/zD8bX7rh28+s+NX3+6sPjh05fL51/8uzC76e7KAQAAADBMvv1g"
    "emrju+vR8vzYDwAAAMCw2/zs9nfvfgGnlw9uumwPAAAAGHo/rlo18vYXMPF69uRFcwAAAMDQu7Nh/f8Fgle/bD9qDgAAABh6qwUD"
    "AAAAIEUwAAAAAGIEAwAAAKBFMAAAAABaBAMAAACgRTAAAAAAYgQDAAAAoEUwAAAAAFoEAwAAAKBFMAAAAABiBAMAAACgRTAAAAAA"
    "WgQDAAAAoEUwAAAAAGIEAwAAAKBFMAAAAABaBAMAAACgRTAAAAAAYgQDAAAAoEUwAAAAAFoEAwAAAKBFMAAAAABiBAMAAACgRTAA"
    "AAAAWgQDAAAAoEUwAAAAAGIEAwAAAKBFMAAAAABaBAMAAACgRTAAAAAAYgQDAAAAoEUwAAAAAFoEAwAAAKBFMAAAAABiBAMAAACg"
    "RTAAAAAAWgQDAAAAoEUwAAAAAGIEAwAAAKBFMAAAAABaBAMAAACgRTAAAAAAYgQDAAAAoEUwAAAAAFoEAwAAAKBFMAAAAABiBAMA"
    "AACgRTAAAAAAWgQDAAAAoEUwAAAAAGIEAwAAAKBFMAAAAABaBAMAAACgRTAAAAAAYgQDAAAAoEUwAAAAAFoEAwAAAKBFMAAAAABi"
    "BAMAAACgRTAAAAAAWgQDAAAAoEUwAAAAAGIEAwAAAKBFMAAAAABaBAMAAACgRTAAAAAAYgQDAAAAoEUwAAAAAFoEAwAAAKBFMAAA"
    "AABiBAMAAACgRTAAAAAAWgQDAAAAoEUwAAAAAGIEAwAAAKBFMAAAAABaBAMAAACgRTAAAAAAYgQDAAAAoEUwAAAAAFoEAwAAAKBF"
    "MAAAAABiBAMAAACgRTAAAAAAWgQDAAAAoEUwAAAAAGIEAwAAAKBFMAAAAABaBAMAAACgRTAAAAAAYgQDAAAAoEUwAAAAAFoEAwAA"
    "AKBFMAAAAABiBAMAAACgRTAAAAAAWgQDAAAAoEUwAAAAAGIEAwAAAKBFMAAAAABaBAMAAACgRTAAAAAAYgQDAAAAoEUwAAAAAFoE"
    "AwAAAKBFMAAAAABiBAMAAACgRTAAAAAAWgQDAAAAoEUwAAAAAGIEAwAAAKBFMAAAAABaBAMAAACgRTAAAAAAYgQDAAAAoEUwAAAA"
    "AFoEAwAAAKBFMAAAAABiBAMAAACgRTAAAAAAWgQDAAAAoEUwAAAAAGIEAwAAAKBFMAAAAABaBAMAAACgRTAAAAAAYgQDAAAAoEUw"
    "AAAAAFoEAwAAAKBFMAAAAABiBAMAAACgRTAAAAAAWgQDAAAAoEUwAAAAAGIEAwAAAKBFMAAAAABaBAMAAACgRTAAAAAAYgQDAAAA"
    "oEUwAAAAAFoEAwAAAKBFMAAAAABiBAMAAACgRTAAAAAAWgQDAAAAoEUwAAAAAGIEAwAAAKBFMAAAAABaBAMAAACgRTAAAAAAYgQD"
    "AAAAoEUwAAAAAFoEAwAAAKBFMAAAAABiBAMAAACgRTAAAAAAWgQDAAAAoEUwAAAAAGIEAwAAAKBFMAAAAABaBAMAAACgRTAAAAAA"
    "YgQDAAAAoEUwAAAAAFoEAwAAAKBFMAAAAABiBAMAAACgRTAAAAAAWr6cnpoYHQxGtl4+fuvE0vPFqdEBAAC8F5Nnr697MbNz+evB"
    "3JY37nyx7D/jCgA="
)
DECODED_SIZE = 700 * 1024 * 1024  # about: the spaces alone


def make_bomb_app(*, card: bool = False, coding: str = "gzip, gzip") -> Starlette:
    """An "agent" whose every answer is the bomb, as ``coding`` says; ``card``: its card is a
    plain one (JSON-RPC at its root), so a client gets as far as sending a message."""

    async def bomb(request: Request) -> Response:
        if card and request.url.path.endswith("agent-card.json"):
            base = f"{request.url.scheme}://{request.url.netloc}/"
            return JSONResponse(
                {
                    "name": "bomb",
                    "description": "answers with a compression bomb",
                    "url": base,
                    "version": "1",
                    "protocolVersion": "0.3.0",
                    "preferredTransport": "JSONRPC",
                    "capabilities": {"streaming": False},
                    "defaultInputModes": ["text"],
                    "defaultOutputModes": ["text"],
                    "skills": [],
                }
            )
        headers = {"content-encoding": coding}
        return Response(GZIP_GZIP_BOMB, media_type="application/json", headers=headers)

    return Starlette(routes=[Route("/{path:path}", bomb, methods=["GET", "POST"])])
