"""Graders for GRPO: built-in ones (`builtin`), plugins of the `trainkit.rewards` entry-point group (`registry`),
and the guarded calls that turn their answers into rewards (`scoring`)."""
