"""``membot serve``: REST, an OpenAI-compatible endpoint and MCP, each a thin adapter over the
public API (``membot``), behind scoped keys."""

from membot.server.app import app_from_environment, create_app

__all__ = ["app_from_environment", "create_app"]
