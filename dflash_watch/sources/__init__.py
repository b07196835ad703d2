"""Inputs of the shell: log files, GPU samples, history."""
