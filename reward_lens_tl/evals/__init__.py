"""Benchmark evaluation: score files, scoring runs, published metrics, and why a model fails."""
