"""The RPC table's contents: each method of the contract and the handler that serves it.

This is the one place a request finds its code: the REST facade and the gRPC server
look a method up here (through `pipeline.rpc_table`), nowhere else. Each service's
handlers live in its dialect's `service.py` (`dialects/chat/service.py` for
ChatService...) or, for the services of no dialect, in the module named after it
(`model.py` for ModelService...).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from server.application.admin import AdminService
from server.application.audio import AudioService
from server.application.batches.service import BatchService
from server.application.dialects.chat.service import ChatService, CompletionService
from server.application.dialects.gemini.service import GeminiService
from server.application.dialects.messages.service import MessagesService
from server.application.dialects.responses.conversations import ConversationsService
from server.application.dialects.responses.service import ResponsesService
from server.application.dialects.routing.service import DeploymentService, RouterService
from server.application.embedding import EmbeddingService
from server.application.feedback import FeedbackService
from server.application.governance.service import Governance
from server.application.images import ImageService
from server.application.mcp.service import McpService
from server.application.model import ModelService
from server.application.moderation import ModerationService
from server.application.provider import ProviderService
from server.application.rerank import RerankService
from server.application.usage import UsageService
from server.base.pipeline import Handler, Middleware, RpcMethod, rpc_table


@dataclass(frozen=True, slots=True)
class Services:
    """The handlers of every contract service."""

    chat: ChatService
    completion: CompletionService
    model: ModelService
    embedding: EmbeddingService
    rerank: RerankService
    moderation: ModerationService
    audio: AudioService
    images: ImageService
    provider: ProviderService
    router: RouterService
    deployment: DeploymentService
    admin: AdminService
    governance: Governance
    usage: UsageService
    feedback: FeedbackService
    messages: MessagesService
    responses: ResponsesService
    gemini: GeminiService
    mcp: McpService
    conversations: ConversationsService
    batch: BatchService


def handlers(s: Services) -> dict[str, Handler]:
    """Method full name -> handler, the busiest first: REST matches paths in this order."""
    return {
        "gateway.v1.ChatService.CreateChatCompletion": s.chat.create_chat_completion,
        "gateway.v1.ChatService.StreamChatCompletion": s.chat.stream_chat_completion,
        "gateway.v1.CompletionService.CreateCompletion": s.completion.create_completion,
        "gateway.v1.CompletionService.StreamCompletion": s.completion.stream_completion,
        "gateway.v1.ModelService.ListModels": s.model.list_models,
        "gateway.v1.ModelService.GetModel": s.model.get_model,
        "gateway.v1.EmbeddingService.CreateEmbeddings": s.embedding.create_embeddings,
        "gateway.v1.RerankService.RerankDocuments": s.rerank.rerank_documents,
        "gateway.v1.ModerationService.CreateModeration": s.moderation.create_moderation,
        "gateway.v1.AudioService.CreateTranscription": s.audio.create_transcription,
        "gateway.v1.AudioService.StreamTranscription": s.audio.stream_transcription,
        "gateway.v1.AudioService.CreateTranslation": s.audio.create_translation,
        "gateway.v1.AudioService.CreateSpeech": s.audio.create_speech,
        "gateway.v1.ImageService.CreateImage": s.images.create_image,
        "gateway.v1.ImageService.EditImage": s.images.edit_image,
        "gateway.v1.ProviderService.ListProviders": s.provider.list_providers,
        "gateway.v1.RouterService.Infer": s.router.infer,
        "gateway.v1.RouterService.StreamInfer": s.router.stream_infer,
        "gateway.v1.DeploymentService.ListDeployments": s.deployment.list_deployments,
        "gateway.v1.DeploymentService.InvokeDeployment": s.deployment.invoke_deployment,
        "gateway.v1.DeploymentService.StreamInvokeDeployment": (
            s.deployment.stream_invoke_deployment
        ),
        "gateway.v1.DeploymentService.GenerateText": s.deployment.generate_text,
        "gateway.v1.DeploymentService.StreamGenerateText": s.deployment.stream_generate_text,
        "gateway.v1.AdminService.CreateKey": s.admin.create_key,
        "gateway.v1.AdminService.ListKeys": s.admin.list_keys,
        "gateway.v1.AdminService.GetKey": s.admin.get_key,
        "gateway.v1.AdminService.RevokeKey": s.admin.revoke_key,
        "gateway.v1.AdminService.UpdateKey": s.admin.update_key,
        "gateway.v1.AdminService.RotateKey": s.admin.rotate_key,
        "gateway.v1.AdminService.ReloadConfig": s.admin.reload_config,
        "gateway.v1.AdminService.EnableProvider": s.admin.enable_provider,
        "gateway.v1.AdminService.DisableProvider": s.admin.disable_provider,
        "gateway.v1.AdminService.GetDashboard": s.admin.get_dashboard,
        "gateway.v1.AdminService.RetrainRouter": s.admin.retrain_router,
        "gateway.v1.AdminService.GetShadowReport": s.admin.get_shadow_report,
        "gateway.v1.AdminService.GetTraffic": s.admin.get_traffic,
        "gateway.v1.AdminService.CreateOrganization": s.governance.create_organization,
        "gateway.v1.AdminService.ListOrganizations": s.governance.list_organizations,
        "gateway.v1.AdminService.GetOrganization": s.governance.get_organization,
        "gateway.v1.AdminService.UpdateOrganization": s.governance.update_organization,
        "gateway.v1.AdminService.CreateTeam": s.governance.create_team,
        "gateway.v1.AdminService.ListTeams": s.governance.list_teams,
        "gateway.v1.AdminService.GetTeam": s.governance.get_team,
        "gateway.v1.AdminService.UpdateTeam": s.governance.update_team,
        "gateway.v1.AdminService.DeleteTeam": s.governance.delete_team,
        "gateway.v1.AdminService.CreateUser": s.governance.create_user,
        "gateway.v1.AdminService.ListUsers": s.governance.list_users,
        "gateway.v1.AdminService.SignOutUser": s.governance.sign_out_user,
        "gateway.v1.AdminService.PutMembership": s.governance.put_membership,
        "gateway.v1.AdminService.ListMemberships": s.governance.list_memberships,
        "gateway.v1.AdminService.DeleteMembership": s.governance.delete_membership,
        "gateway.v1.AdminService.ListAuditEvents": s.governance.list_audit_events,
        "gateway.v1.AdminService.ExportAuditEvents": s.governance.export_audit_events,
        "gateway.v1.UsageService.GetUsage": s.usage.get_usage,
        "gateway.v1.FeedbackService.SubmitFeedback": s.feedback.submit_feedback,
        "gateway.v1.BatchService.CreateBatch": s.batch.create_batch,
        "gateway.v1.BatchService.GetBatch": s.batch.get_batch,
        "gateway.v1.BatchService.ListBatches": s.batch.list_batches,
        "gateway.v1.BatchService.CancelBatch": s.batch.cancel_batch,
        "gateway.v1.MessagesService.CreateMessage": s.messages.create_message,
        "gateway.v1.MessagesService.StreamMessage": s.messages.stream_message,
        "gateway.v1.MessagesService.CountMessageTokens": s.messages.count_message_tokens,
        "gateway.v1.MessagesService.ListModelInfos": s.messages.list_model_infos,
        "gateway.v1.MessagesService.GetModelInfo": s.messages.get_model_info,
        "gateway.v1.ResponsesService.CreateResponse": s.responses.create_response,
        "gateway.v1.ResponsesService.StreamResponse": s.responses.stream_response,
        "gateway.v1.ResponsesService.GetResponse": s.responses.get_response,
        "gateway.v1.ResponsesService.DeleteResponse": s.responses.delete_response,
        "gateway.v1.ResponsesService.ListInputItems": s.responses.list_input_items,
        "gateway.v1.GeminiService.GenerateContent": s.gemini.generate_content,
        "gateway.v1.GeminiService.StreamGenerateContent": s.gemini.stream_generate_content,
        "gateway.v1.GeminiService.CountTokens": s.gemini.count_tokens,
        "gateway.v1.GeminiService.EmbedContent": s.gemini.embed_content,
        "gateway.v1.GeminiService.BatchEmbedContents": s.gemini.batch_embed_contents,
        "gateway.v1.GeminiService.ListGeminiModels": s.gemini.list_gemini_models,
        "gateway.v1.GeminiService.GetGeminiModel": s.gemini.get_gemini_model,
        "gateway.v1.McpService.ListTools": s.mcp.list_tools,
        "gateway.v1.McpService.CallTool": s.mcp.call_tool,
        "gateway.v1.McpService.ListResources": s.mcp.list_resources,
        "gateway.v1.McpService.ListResourceTemplates": s.mcp.list_resource_templates,
        "gateway.v1.McpService.ListPrompts": s.mcp.list_prompts,
        "gateway.v1.McpService.ReadResource": s.mcp.read_resource,
        "gateway.v1.McpService.GetPrompt": s.mcp.get_prompt,
        "gateway.v1.ConversationsService.CreateConversation": s.conversations.create_conversation,
        "gateway.v1.ConversationsService.GetConversation": s.conversations.get_conversation,
        "gateway.v1.ConversationsService.UpdateConversation": s.conversations.update_conversation,
        "gateway.v1.ConversationsService.DeleteConversation": s.conversations.delete_conversation,
        "gateway.v1.ConversationsService.ListConversationItems": (
            s.conversations.list_conversation_items
        ),
        "gateway.v1.ConversationsService.CreateConversationItems": (
            s.conversations.create_conversation_items
        ),
        "gateway.v1.ConversationsService.GetConversationItem": (
            s.conversations.get_conversation_item
        ),
        "gateway.v1.ConversationsService.DeleteConversationItem": (
            s.conversations.delete_conversation_item
        ),
    }


def table(services: Services, middlewares: Sequence[Middleware]) -> dict[str, RpcMethod]:
    """The gateway's RPC table, each handler wrapped in `middlewares` (outermost first)."""
    return rpc_table(handlers(services), middlewares)
