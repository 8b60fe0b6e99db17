"""An error raised inside a dependency in the venv's site-packages (python-dateutil's parser)."""

import os

from dateutil import parser


def parse_deadline(raw: str) -> object:
    return parser.parse(raw)


def schedule_followup(ticket_id: str) -> None:
    parse_deadline(f"due {ticket_id} auth={os.environ['SLACK_TOKEN']}")


schedule_followup("TCK-88412")
