"""OpenAI's chat and text completions (`/v1/chat/completions`, `/v1/completions`)."""
