"""Google's Gemini API (`models/{model}:generateContent` and its kin, on /v1beta and /v1)."""
