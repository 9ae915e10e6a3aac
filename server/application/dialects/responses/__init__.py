"""OpenAI's Responses API (`/v1/responses`, with stored responses)."""
