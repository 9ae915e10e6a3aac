"""Anthropic's Messages API (`/v1/messages`, its token count and model list)."""
