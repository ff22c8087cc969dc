"""The research lab beside the memory core: what the notebooks and `mnemo sweep` / `mnemo lab` use.

* `sweeps`: papermill runs of the parameterised notebooks over a grid, collected into one table;
* `calibrate`: thresholds and recipes chosen on labelled data (write, abstention, trust);
* `fitting`: the shared curve, threshold and interval helpers (scikit-learn's metrics);
* `report`: the benchmark report rendered from collected runs;
* `record`: the notebooks' result files, with the provenance of what produced them;
* `jupyter`: JupyterLab on the notebooks on this environment's kernel (`mnemo lab`);
* `demo`: the end-to-end demo `mnemo demo` plays.

The core (`mnemo.memory` and what it imports) never imports the lab.
"""
