// Unhandled rejection from an async call chain (async stack frames).
'use strict';

class UpstreamError extends Error {
  constructor(message) {
    super(message);
    this.name = 'UpstreamError';
  }
}

async function postToSlack(channel) {
  await new Promise((resolve) => setImmediate(resolve));
  throw new UpstreamError(`slack returned 403 invalid_auth for ${channel} with ${process.env.SLACK_TOKEN} (req_51c0de)`);
}

async function notifyOncall(incidentId) {
  await postToSlack('#oncall');
}

async function main() {
  await notifyOncall('INC-2291');
}

main();
