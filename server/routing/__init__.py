"""Prompt-difficulty scorers that decide when a prompt needs the stronger model tier."""
