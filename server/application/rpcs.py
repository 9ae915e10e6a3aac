"""The RPC table's contents: each method of the contract and the handler that serves it.

This is the one place a request finds its code: the REST facade and the gRPC server
look a method up here (through `pipeline.rpc_table`), nowhere else.
"""

from __future__ import annotations

from collections.abc import Sequence

from server.application.handlers import Gateway
from server.base.pipeline import Handler, Middleware, RpcMethod, rpc_table


def handlers(gateway: Gateway) -> dict[str, Handler]:
    """Method full name -> handler."""
    admin = gateway.admin
    control = gateway.control
    return {
        "gateway.v1.ChatService.CreateChatCompletion": gateway.create_chat_completion,
        "gateway.v1.ChatService.StreamChatCompletion": gateway.stream_chat_completion,
        "gateway.v1.CompletionService.CreateCompletion": gateway.create_completion,
        "gateway.v1.CompletionService.StreamCompletion": gateway.stream_completion,
        "gateway.v1.ModelService.ListModels": gateway.list_models,
        "gateway.v1.ModelService.GetModel": gateway.get_model,
        "gateway.v1.EmbeddingService.CreateEmbeddings": gateway.create_embeddings,
        "gateway.v1.ProviderService.ListProviders": gateway.list_providers,
        "gateway.v1.RouterService.Infer": gateway.infer,
        "gateway.v1.RouterService.StreamInfer": gateway.stream_infer,
        "gateway.v1.DeploymentService.ListDeployments": gateway.list_deployments,
        "gateway.v1.DeploymentService.InvokeDeployment": gateway.invoke_deployment,
        "gateway.v1.DeploymentService.StreamInvokeDeployment": gateway.stream_invoke_deployment,
        "gateway.v1.DeploymentService.GenerateText": gateway.generate_text,
        "gateway.v1.DeploymentService.StreamGenerateText": gateway.stream_generate_text,
        "gateway.v1.AdminService.CreateKey": admin.create_key,
        "gateway.v1.AdminService.ListKeys": admin.list_keys,
        "gateway.v1.AdminService.GetKey": admin.get_key,
        "gateway.v1.AdminService.RevokeKey": admin.revoke_key,
        "gateway.v1.AdminService.ReloadConfig": control.reload_config,
        "gateway.v1.AdminService.EnableProvider": control.enable_provider,
        "gateway.v1.AdminService.DisableProvider": control.disable_provider,
        "gateway.v1.AdminService.GetDashboard": gateway.dashboard.get_dashboard,
        "gateway.v1.UsageService.GetUsage": admin.get_usage,
        "gateway.v1.FeedbackService.SubmitFeedback": gateway.submit_feedback,
    }


def gateway_table(
    gateway: Gateway, middlewares: Sequence[Middleware] | None = None
) -> dict[str, RpcMethod]:
    """The gateway's RPC table, wrapped in its middlewares (by default: accounting)."""
    return rpc_table(handlers(gateway), gateway.middlewares if middlewares is None else middlewares)
