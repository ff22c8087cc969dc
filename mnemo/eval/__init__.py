"""Evaluation: external benchmark loaders (`datasets`), metrics (`metrics`) and their downloader (`download`).

Submodules are imported explicitly (`from mnemo.eval import datasets, metrics`) so that importing
`mnemo.eval` stays cheap and pulls in no optional dependency (ir-measures is needed only by
`metrics.ranking_metrics`).
"""
