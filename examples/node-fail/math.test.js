const test = require("node:test");
const assert = require("node:assert");
const { add } = require("./math");

test("a test that fails on purpose", () => {
  assert.strictEqual(add(2, 2), 5);
});
