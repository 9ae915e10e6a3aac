"""Interface B: routed inference (`/v1/infer`) and deployments, in the common format or
Hugging Face TGI's (`inputs`, and TGI's own generate routes)."""
