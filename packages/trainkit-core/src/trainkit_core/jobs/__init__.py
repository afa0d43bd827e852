"""The job functions other than training's (ping, infer, eval). They are found by name
through `trainkit_core.plugins.manager.jobs`, which imports none of them until a job runs."""
