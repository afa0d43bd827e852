// The fine-tuning flow with OpenAI's official Node.js SDK, against `trainkit serve`.
// Run by tests/api/test_fine_tuning_node.py, which starts the server and reads the JSON
// this prints. Environment: OPENAI_BASE_URL, OPENAI_API_KEY, TRAIN_FILE, NODE_PATH-free
// (the SDK is installed beside this file by the test).
import { readFileSync } from "node:fs";
import OpenAI, { toFile } from "openai";

const client = new OpenAI({ baseURL: process.env.OPENAI_BASE_URL, apiKey: process.env.OPENAI_API_KEY, maxRetries: 0 });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function refusal(call) {
  try {
    await call();
    return null;
  } catch (error) {
    return { class: error.constructor.name, status: error.status, param: error.param ?? null, code: error.code ?? null };
  }
}

const data = readFileSync(process.env.TRAIN_FILE);
const file = await client.files.create({ file: await toFile(data, "node.jsonl"), purpose: "fine-tune" });
let job = await client.fineTuning.jobs.create({
  model: "tiny",
  training_file: file.id,
  suffix: "node",
  method: { type: "supervised", supervised: { hyperparameters: { n_epochs: 1, batch_size: 8 } } },
});
const statuses = [job.status];
const deadline = Date.now() + 600_000;
while (!["succeeded", "failed", "cancelled"].includes(job.status) && Date.now() < deadline) {
  await sleep(300);
  job = await client.fineTuning.jobs.retrieve(job.id);
  if (statuses.at(-1) !== job.status) statuses.push(job.status);
}
const events = [];
for await (const event of client.fineTuning.jobs.listEvents(job.id, { limit: 5 })) events.push(event);
const checkpoints = [];
for await (const checkpoint of client.fineTuning.jobs.checkpoints.list(job.id)) checkpoints.push(checkpoint);
const listed = [];
for await (const each of client.fineTuning.jobs.list({ limit: 2 })) listed.push(each.id);
const chat = await client.chat.completions.create({
  model: job.fine_tuned_model,
  messages: [{ role: "user", content: "Opposites: hot early" }],
  max_tokens: 8,
});
const grade = await client.fineTuning.alpha.graders.run({
  grader: { type: "string_check", name: "s", input: "{{sample.output_text}}", reference: "{{item.a}}", operation: "eq" },
  model_sample: "x",
  item: { a: "x" },
});

console.log(
  JSON.stringify({
    file: { id: file.id, bytes: file.bytes, content: (await (await client.files.content(file.id)).text()).length },
    job: { id: job.id, status: job.status, fine_tuned_model: job.fine_tuned_model, trained_tokens: job.trained_tokens },
    statuses,
    events: events.map((e) => ({ id: e.id, type: e.type, message: e.message })),
    checkpoints: checkpoints.map((c) => ({ step: c.step_number, model: c.fine_tuned_model_checkpoint })),
    listed,
    chat: { model: chat.model, content: chat.choices[0].message.content },
    reward: grade.reward,
    refusals: {
      unknown_model: await refusal(() => client.fineTuning.jobs.create({ model: "gpt-4o-mini", training_file: file.id })),
      missing_file: await refusal(() => client.fineTuning.jobs.create({ model: "tiny", training_file: "file-000000000000000000000000" })),
      bad_file: await refusal(async () =>
        client.files.create({ file: await toFile(Buffer.from("{oops\n"), "bad.jsonl"), purpose: "fine-tune" }),
      ),
      unknown_job: await refusal(() => client.fineTuning.jobs.retrieve("run-20260101-000000-abcdef")),
      ended_job: await refusal(() => client.fineTuning.jobs.cancel(job.id)),
    },
  }),
);
