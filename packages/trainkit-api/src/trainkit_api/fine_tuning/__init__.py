"""OpenAI's fine-tuning API served by trainkit: `files` and `fine_tuning.jobs` as the `openai` SDK calls them.

A team with OpenAI-format JSONL and code written against `client.files` and
`client.fine_tuning.jobs` points `base_url` at `trainkit serve` and keeps both. Each part
maps onto what trainkit already has, and adds no training behaviour of its own:

- `files`: an uploaded file is validated and synced as a trainkit dataset (`files`);
- `jobs`: a job is a trainkit run, its id the run id; the OpenAI request is recorded
  beside the run and its fields mapped onto `TrainConfig` (`jobs`);
- `names`: the `ft:<base>:<suffix>:<run id>` names that chat completions accept;
- `objects`: a run's events, checkpoints and metrics as OpenAI's objects.
"""
