// A TypeError thrown inside a dependency in node_modules (semver); the message echoes its input.
'use strict';

const semver = require('semver');

function parseReleaseTag(tag) {
  return new semver.SemVer(tag);
}

function checkDeploy(deployId) {
  parseReleaseTag(`v1.4.2 deploy=${deployId} key=${process.env.AWS_KEY}`);
}

checkDeploy('dep-3391');
