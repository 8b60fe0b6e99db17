"""asyncio: a coroutine chain fails inside asyncio.run; the message carries a Slack bot token."""

import asyncio
import os


class UpstreamError(Exception):
    pass


async def post_to_slack(channel: str) -> None:
    await asyncio.sleep(0)
    raise UpstreamError(f"slack returned 403 invalid_auth for {channel} with {os.environ['SLACK_TOKEN']} (req_51c0de)")


async def notify_oncall(incident_id: str) -> None:
    await asyncio.gather(post_to_slack("#oncall"))


async def main() -> None:
    await notify_oncall("INC-2291")


asyncio.run(main())
