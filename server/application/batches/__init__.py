"""Batch jobs and the files they read (docs/batches.md).

files.py   the Files API: uploads owned by the key that made them, bounded, expiring
lines.py   a batch's input read and checked whole before anything runs
jobs.py    the Batches API: create, retrieve, list, cancel, over one job model
worker.py  runs leased batches' lines through the live pipeline, each billed once
"""
