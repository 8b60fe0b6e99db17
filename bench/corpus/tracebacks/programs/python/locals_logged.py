"""A logged exception with local variables (traceback capture_locals), as structured loggers print it;
a local holds an OpenAI key."""

import logging
import os
import sys
import traceback


class FrozenTimeFormatter(logging.Formatter):
    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        return "2025-03-14 09:26:53,589"

    def formatException(self, ei) -> str:  # noqa: N802, ANN001
        return "".join(traceback.TracebackException(*ei, capture_locals=True).format()).rstrip("\n")


def call_model(prompt_id: str) -> str:
    api_key = os.environ["OPENAI_KEY"]
    retries = 3
    raise ConnectionError(f"model endpoint unreachable for prompt {prompt_id} after {retries} retries")


def answer_ticket(ticket_id: str) -> None:
    call_model("prm_77a01f")


def main() -> int:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(FrozenTimeFormatter("%(asctime)s ERROR [%(name)s] request_id=req_9d41b7 %(message)s"))
    log = logging.getLogger("support-agent")
    log.addHandler(handler)
    try:
        answer_ticket("TCK-1204")
    except ConnectionError:
        log.exception("tool call answer_ticket failed code=E1042")
        return 1
    return 0


sys.exit(main())
