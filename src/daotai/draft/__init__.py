"""Drafting with a local language model: idea → valid script, and richer shot prompts."""
