"""FeedbackService: a caller's verdict on one of its earlier requests, for routing to
learn from."""

from __future__ import annotations

from gateway.v1 import feedback_service_pb2 as feedback

from server.accounting.accounts import Accounts
from server.application import validation
from server.application.state import Live
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
        principal = await self.accounts.admit(call, "router", self.live.current.keys)
        request_id, score, label = validation.feedback(request)
        owner = self.accounts.ledger.pending_owner(request_id)
        if owner is None and self.store is not None:
            owner = await self.store.usage.owner(request_id)
        if owner != principal.key_id or self.store is None:
            raise NotFound(
                f"no request {request_id!r} of this key in the ledger", {"request_id": request_id}
            )
        await self.store.feedback.save(request_id, owner, score, label, request.comment)
        return feedback.SubmitFeedbackResponse(request_id=request_id, score=score)
