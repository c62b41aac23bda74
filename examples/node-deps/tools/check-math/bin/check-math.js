#!/usr/bin/env node
// A dependency with a program of its own, as mocha or jest are: `npm test` finds it only once
// `npm ci` has installed the project's dependencies.
const { add } = require(process.cwd() + "/math.js");
if (add(2, 2) !== 4) process.exit(1);
console.log("check-math: ok");
