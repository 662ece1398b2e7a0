"""mail_update_labels (spec section 4.3): labels and read state of a message or a whole thread.

The write is :func:`shared.mail.store.update_labels`, the one writer of labels and read state;
search (``label:``, ``is:unread``, the label facet) and mail_list_threads read the same columns,
so a change shows in the next call. A thread's ``labels`` in the result are the union of its
messages' labels and its ``read`` is true when every message is read; ``thread_id`` may be the id
of a thread since merged into another (the result then names the merged thread).
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from shared.errors import ErrorCode, PylotaError, invalid
from shared.mail.records import LabelState
from shared.mail.store import update_labels
from shared.tools.arguments import IdentityRef, Label, MessageId, ThreadId
from shared.tools.context import ToolContext
from shared.tools.scope import identity_for

__all__ = ["DESCRIPTION", "INPUT_EXTRA", "UpdateLabelsArgs", "LabelState", "run"]

DESCRIPTION = (
    "Add or remove labels on a message or a whole thread, and mark it read or unread. Use labels "
    "to record what you have handled (for example \"handled\" or \"needs_human\")."
)

#: The rule no type states (spec section 4.3); :func:`run` checks it.
INPUT_EXTRA = {"oneOf": [{"required": ["message_id"]}, {"required": ["thread_id"]}]}

Labels = Annotated[list[Label], msgspec.Meta(max_length=64)]


class UpdateLabelsArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Arguments of mail_update_labels (spec section 4.3)."""

    identity: IdentityRef | None = None
    message_id: MessageId | None = None
    thread_id: ThreadId | None = None
    labels_add: Labels | None = None
    labels_remove: Labels | None = None
    read: bool | None = None


async def run(ctx: ToolContext, args: UpdateLabelsArgs) -> LabelState:
    """Apply the change and return ``{ id, labels, read }`` of the message or thread.

    Raises:
        PylotaError: ``invalid_request`` with path ``message_id`` (neither id given),
            ``thread_id`` (both given), ``labels_add`` (nothing to change, as REST's
            ``minProperties: 1``; or a message would hold more than 64 labels) or
            ``labels_remove`` (a label both added and removed); ``message_not_found`` /
            ``thread_not_found`` when the identity has no such message or thread; identity
            errors from :func:`~shared.tools.scope.identity_for`.
    """
    if args.message_id is None and args.thread_id is None:
        raise invalid("message_id", "Name the message or the thread to change.",
                      "Pass message_id (one message) or thread_id (every message of a thread).")
    if args.message_id is not None and args.thread_id is not None:
        raise invalid("thread_id", "Pass message_id or thread_id, not both.",
                      "Drop thread_id to change one message, or message_id to change the thread.")
    add, remove = args.labels_add or [], args.labels_remove or []
    if not add and not remove and args.read is None:
        raise invalid("labels_add", "Nothing to change: labels_add, labels_remove and read are "
                      "all missing or empty.",
                      "Pass labels_add, labels_remove or read, e.g. labels_add: [\"handled\"].")
    if both := sorted(set(add) & set(remove)):
        raise invalid("labels_remove", f"{', '.join(both)} is both added and removed.",
                      "Put each label in labels_add or in labels_remove, not in both.")
    async with ctx.db.acquire() as conn:
        identity = await identity_for(conn, ctx.principal, args.identity)
        state = await update_labels(conn, identity.id, message_id=args.message_id,
                                    thread_id=args.thread_id, add=add, remove=remove,
                                    read=args.read)
    if state is None and args.message_id is not None:
        raise PylotaError(ErrorCode.MESSAGE_NOT_FOUND,
                          f"No message {args.message_id} in this identity.",
                          fix="Use a message_id returned by mail_search or mail_get_thread.")
    if state is None:
        raise PylotaError(ErrorCode.THREAD_NOT_FOUND, f"No thread {args.thread_id} in this identity.",
                          fix="Use a thread_id returned by mail_list_threads or mail_search.")
    return state
