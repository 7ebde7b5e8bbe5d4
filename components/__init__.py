"""Kubeflow components: thin `@dsl.component` shells over plain project functions.

One step on one target has three names, each for its reader, and one rule links them:

* the module, `pipelines/targets/<target>/steps/<step>.py` (shared steps: `components/<step>.py`):
  where the step's binding for that target is found;
* the component function, `<step>_<how>` (`tune_locally`, `tune_on_vertex`, `tune_on_katib`):
  kfp names the task after it (`tune-locally`), and run folders, caches, `templates.py`'s
  target detection and the run summary key on that task name, so it stays;
* the display name, `<Step> (<executor>)` (`Tune (local study)`, `Tune (Vertex HPT job)`):
  what the console and the progress lines show, set in `pipelines/targets/<target>/wiring.py`.

A component's parameters are its interface, so they stay one flat list however long: kfp
builds the component's inputs (the compiled spec's input names) from the Python signature and
hands each input by name, and a request object would be one opaque input in the spec. The
work lives in the plain functions a component calls; a long component is its inputs spelled
out and handed on, and where one is long for another reason its docstring says why.
"""
