"""Platform adapters. Each turns platform updates into `InboundMessage`s and sends replies.

Channels know nothing about the agent: they hand messages to a handler the gateway gives them.
"""

from channels.base import Channel, ChatType, InboundMessage, MessageHandler, OutboundMessage

__all__ = ["Channel", "ChatType", "InboundMessage", "MessageHandler", "OutboundMessage"]
