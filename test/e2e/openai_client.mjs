// The official `openai` npm client against kiln-serve.
// usage: node openai_client.mjs NODE_MODULES_DIR BASE_URL API_KEY
// Completions and chat, whole and streamed (with the usage chunk), seeds
// and the client's error classes. Prints one line per check.
import { createRequire } from "module";
const [modules, baseURL, apiKey] = process.argv.slice(2);
const require = createRequire(modules + "/");
const OpenAI = require("openai");
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
let failures = 0;
const check = (name, ok, detail) => {
  console.log(`${ok ? "ok  " : "FAIL"} ${name}${ok ? "" : ": " + JSON.stringify(detail)}`);
  if (!ok) failures++;
};

const models = await client.models.list();
const model = models.data[0].id;
check("models.list", models.data.length === 1, models.data);

const whole = await client.completions.create({
  model, prompt: "def main():", max_tokens: 24, temperature: 0 });
const parts = [];
for await (const c of await client.completions.create({
  model, prompt: "def main():", max_tokens: 24, temperature: 0, stream: true }))
  parts.push(c.choices[0]?.text ?? "");
check("completions: streamed equals whole",
      parts.join("") === whole.choices[0].text && whole.usage.completion_tokens === 24,
      [parts.join(""), whole.choices[0].text]);

const messages = [{ role: "user", content: "Write a function." }];
const chat = await client.chat.completions.create({
  model, messages, max_tokens: 16, temperature: 0 });
let streamed = "", usage = null;
for await (const c of await client.chat.completions.create({
  model, messages, max_tokens: 16, temperature: 0, stream: true,
  stream_options: { include_usage: true } })) {
  if (c.choices.length) streamed += c.choices[0].delta.content ?? "";
  if (c.usage) usage = c.usage;
}
check("chat: streamed equals whole, usage chunk",
      streamed === chat.choices[0].message.content && usage?.completion_tokens === 16 &&
      usage.prompt_tokens_details.cached_tokens >= 0, [streamed, chat.choices[0], usage]);

// Tools are accepted and rendered into the prompt (the fixture model, trained
// on Python sources, does not call them: parsing is tested in unit-openai).
const tools = [{ type: "function", function: { name: "get_weather",
  parameters: { type: "object", properties: { city: { type: "string" } } } } }];
const withTools = await client.chat.completions.create({
  model, messages, tools, max_tokens: 4, temperature: 0 });
check("chat with tools: tools in the prompt",
      withTools.usage.prompt_tokens > chat.usage.prompt_tokens &&
      ["stop", "length", "tool_calls"].includes(withTools.choices[0].finish_reason),
      withTools);
const history = await client.chat.completions.create({
  model, tools, max_tokens: 4, temperature: 0, messages: [
    ...messages,
    { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function",
      function: { name: "get_weather", arguments: JSON.stringify({ city: "Paris" }) } }] },
    { role: "tool", tool_call_id: "call_1", content: "sunny" }] });
check("chat history with a tool call and its result",
      history.usage.prompt_tokens > withTools.usage.prompt_tokens, history.usage);
const lp = await client.chat.completions.create({
  model, messages, max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 2 });
const content = lp.choices[0].logprobs?.content ?? [];
check("chat logprobs: one per token, top 2, the greedy token first",
      content.length === 6 && content.every((t) => t.top_logprobs.length === 2 &&
        t.top_logprobs[0].token === t.token && t.logprob <= 0),
      lp.choices[0].logprobs);

const sample = { model, prompt: "class", max_tokens: 20, temperature: 0.8, seed: 3 };
const a = await client.completions.create(sample);
const b = await client.completions.create(sample);
check("seeded sampling reproducible", a.choices[0].text === b.choices[0].text);

try {
  await client.completions.create({ model: "no-such-model", prompt: "x" });
  check("unknown model -> NotFoundError", false, "no error");
} catch (e) {
  check("unknown model -> NotFoundError", e instanceof OpenAI.NotFoundError && e.status === 404, e.message);
}
try {
  await client.completions.create({ model, prompt: "x", max_tokens: 5000 });
  check("beyond the context -> BadRequestError", false, "no error");
} catch (e) {
  check("beyond the context -> BadRequestError", e instanceof OpenAI.BadRequestError, e.message);
}
const wrongKey = new OpenAI({ baseURL, apiKey: "wrong", maxRetries: 0 });
try {
  await wrongKey.models.list();
  check("wrong key -> AuthenticationError", apiKey === "none", "accepted");
} catch (e) {
  check("wrong key -> AuthenticationError",
        apiKey !== "none" && e instanceof OpenAI.AuthenticationError, e.message);
}
process.exit(failures ? 1 : 0);
