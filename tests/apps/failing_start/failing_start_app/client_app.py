"""A ClientApp that is never reached: the ServerApp fails first."""

from __future__ import annotations

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

app = ClientApp()


@app.train()
def train(msg: Message, context: Context) -> Message:
    return Message(content=msg.content, reply_to=msg)
