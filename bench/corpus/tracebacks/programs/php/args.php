<?php
// Development settings print call arguments in the stack trace: a Slack token appears in a frame.

function postToSlack(string $channel, string $token): void
{
    throw new UnexpectedValueException("slack returned 403 invalid_auth for $channel (req_51c0de)");
}

function notifyOncall(string $incidentId): void
{
    postToSlack('#oncall', getenv('SLACK_TOKEN'));
}

notifyOncall('INC-2291');
