// An HTTP-client-style error whose own properties (config.headers) carry a bearer key.
'use strict';

function callModel(promptId) {
  const err = new Error(`upstream 502 from model gateway for prompt ${promptId}`);
  err.status = 502;
  err.config = { url: 'https://gateway.internal/v1/chat', headers: { Authorization: `Bearer ${process.env.OPENAI_KEY}` } };
  throw err;
}

function answerTicket(ticketId) {
  callModel('prm_77a01f');
}

answerTicket('TCK-1204');
