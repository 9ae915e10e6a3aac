// The Vercel AI SDK with its OpenAI (Responses API and chat), Anthropic and
// OpenAI-compatible providers: text whole and streamed through a tool loop, and objects
// whole and streamed. The Anthropic provider sends eager_input_streaming on every tool.
import assert from "node:assert/strict";
import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateObject, generateText, stepCountIs, streamObject, streamText, tool } from "ai";
import { z } from "zod";
import { API_KEY, BASE_URL, check } from "./check.mjs";

globalThis.AI_SDK_LOG_WARNINGS = false;
const openai = createOpenAI({ baseURL: `${BASE_URL}/v1`, apiKey: API_KEY });
const providers = {
  "openai responses": openai("sim-mini"),
  "openai chat": openai.chat("sim-mini"),
  anthropic: createAnthropic({ baseURL: `${BASE_URL}/v1`, apiKey: API_KEY })("sim-mini"),
  "openai-compatible": createOpenAICompatible({
    name: "gateway",
    baseURL: `${BASE_URL}/v1`,
    apiKey: API_KEY,
    supportsStructuredOutputs: true,
  })("sim-mini"),
};
const Person = z.object({ name: z.string(), age: z.number() });

for (const [name, model] of Object.entries(providers)) {
  await check(`${name}: generateText`, async () => {
    const { text } = await generateText({ model, prompt: "Hello", maxRetries: 0 });
    assert.match(text, /^\(simulated\)/);
  });

  await check(`${name}: streamText with a tool`, async () => {
    const calls = [];
    const weather = tool({
      description: "Gets the weather of a city.",
      inputSchema: z.object({ city: z.string() }),
      execute: async ({ city }) => {
        calls.push(city);
        return `18°C in ${city}`;
      },
    });
    const result = streamText({
      model,
      prompt: "What is the weather in Paris?",
      tools: { weather },
      stopWhen: stepCountIs(3),
      maxRetries: 0,
    });
    let text = "";
    for await (const delta of result.textStream) text += delta;
    assert.equal(calls.length, 1);
    assert.match(text, /^\(simulated\)/);
    assert.equal((await result.steps).length, 2);
  });

  await check(`${name}: generateObject`, async () => {
    const { object } = await generateObject({ model, schema: Person, prompt: "Ada is 36.", maxRetries: 0 });
    assert.equal(typeof object.age, "number");
  });

  await check(`${name}: streamObject`, async () => {
    const result = streamObject({ model, schema: Person, prompt: "Ada is 36.", maxRetries: 0 });
    let partials = 0;
    for await (const _ of result.partialObjectStream) partials += 1;
    assert.ok(partials > 0);
    assert.equal(typeof (await result.object).name, "string");
  });
}
