"""An interface B request (the routing interface's common format, or Hugging Face
TGI's `inputs` with `parameters`) -> the gateway's one GenerationRequest. Every
failure is InvalidArgument naming the field.
"""

from __future__ import annotations

from gateway.v1 import deployment_service_pb2 as deployment_pb
from gateway.v1 import router_service_pb2 as router_pb

from server.application.pipeline.fields import (
    present,
    read_sampling,
    required,
    stop_sequences,
    tags,
)
from server.base.config import PROFILES
from server.base.errors import InvalidArgument
from server.base.generation import GenerationRequest

InferRequest = router_pb.InferRequest | router_pb.StreamInferRequest


InvokeRequest = deployment_pb.InvokeDeploymentRequest | deployment_pb.StreamInvokeDeploymentRequest


ROUTER_TEMPERATURE = 1.0


def infer(request: InferRequest) -> tuple[GenerationRequest, str | None, tuple[str, ...]]:
    """Validates an (Stream)InferRequest; returns it, the profile asked for, if any,
    and its tags."""
    prompt = required(request.prompt, "prompt")
    profile = request.profile if present(request, "profile") else None
    if profile is not None and profile not in PROFILES:
        raise InvalidArgument.for_field("profile", f"must be one of {', '.join(PROFILES)}")
    generation = GenerationRequest(prompt=prompt, **read_sampling(request, ROUTER_TEMPERATURE))
    return generation, profile, tags(request.tags, "tags")


def invocation(request: InvokeRequest) -> tuple[GenerationRequest, bool]:
    """Validates an (Stream)InvokeDeploymentRequest in either format; returns it and
    whether it used the alternative (`inputs`) format."""
    required(request.deployment_id, "deployment_id")
    has_prompt, has_inputs = present(request, "prompt"), present(request, "inputs")
    if has_prompt and has_inputs:
        raise InvalidArgument.for_field("inputs", "send either prompt or inputs, not both")
    if not has_prompt and not has_inputs:
        raise InvalidArgument.for_field(
            "prompt", "is required (or inputs, in the alternative format)"
        )
    if has_prompt:
        if present(request, "parameters"):
            raise InvalidArgument.for_field("parameters", "goes with inputs, not with prompt")
        prompt = required(request.prompt, "prompt")
        return GenerationRequest(prompt=prompt, **read_sampling(request, ROUTER_TEMPERATURE)), False
    for field in ("max_tokens", "temperature", "top_p"):
        if present(request, field):
            raise InvalidArgument.for_field(field, "with inputs, set it inside parameters")
    inputs = required(request.inputs, "inputs")
    params = request.parameters
    sampling = read_sampling(params, ROUTER_TEMPERATURE, "parameters.", "max_new_tokens")
    stop = stop_sequences(params.stop, "parameters.stop")
    return GenerationRequest(prompt=inputs, stop=stop, **sampling), True


def as_invocation(
    request: deployment_pb.GenerateTextRequest | deployment_pb.StreamGenerateTextRequest,
) -> deployment_pb.InvokeDeploymentRequest:
    """A (Stream)GenerateTextRequest as the `inputs` form of InvokeDeployment, so both
    paths validate alike (fields named the same: inputs, parameters.max_new_tokens)."""
    return deployment_pb.InvokeDeploymentRequest(
        deployment_id=request.deployment_id, inputs=request.inputs, parameters=request.parameters
    )
