"""The research wing: benchmark data, benchmarks, metrics, the scenario harness, the simulator.

    datasets/     the external benchmarks' loaders, checksums and downloader (`mnemo data download`)
    bench/        one module a benchmark, registered with one runner (`mnemo eval`); folds (recipes
                  chosen out of fold, and the reranker fitted per fold: `mnemo.recall.rerank`)
    metrics       ranking and memory metrics; harness, scenarios, baselines: the scenario suite
    simulate      the long-clock simulator; trust_eval: the trust set; calibration: labelled examples
    cli           the wing's commands, added to the `mnemo` app by mnemo.cli

The core (mnemo/ outside eval/ and server/) never imports this package. Submodules are imported
explicitly (`from mnemo.eval import datasets, metrics`) so that importing `mnemo.eval` stays cheap
and pulls in no optional dependency (ir-measures is needed only by `metrics.ranking_metrics`).
"""
