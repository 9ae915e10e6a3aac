"""Placeholder until the facade lands."""
from fastapi import FastAPI


def create_app(settings, table=None, grpc_target=None):  # type: ignore[no-untyped-def]
    app = FastAPI()
    return app
