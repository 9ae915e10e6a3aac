"""FeedbackService: a caller's verdict on one of its earlier requests, for routing to
learn from."""

from __future__ import annotations

from gateway.v1 import feedback_service_pb2 as feedback

from server.accounting.accounts import Accounts
from server.application import validation
from server.application.pipeline.state import Live
from server.base.call import Call
from server.base.errors import NotFound
from server.storage import Store


class FeedbackService:
    def __init__(self, live: Live, accounts: Accounts, store: Store | None) -> None:
        self.live = live
        self.accounts = accounts
        self.store = store

    async def submit_feedback(
        self, request: feedback.SubmitFeedbackRequest, call: Call
    ) -> feedback.SubmitFeedbackResponse:
        state = self.live.current
        principal = await self.accounts.admit(call, "router", state.keys)
        request_id, score, label = validation.feedback(request)
        key_id = principal.key_id
        store = self.store
        if store is None or not await self.accounts.ledger.has(key_id, request_id):
            raise NotFound(
                f"no request {request_id!r} of this key in the ledger", {"request_id": request_id}
            )
        await store.feedback.save(request_id, key_id, score, label, request.comment)
        state.router.feedback(f"{key_id}/{request_id}", score)
        return feedback.SubmitFeedbackResponse(request_id=request_id, score=score)
