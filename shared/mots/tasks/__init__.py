"""Tasks: what the market trains, one declarative file each (issue 36).

A task file (``examples/tasks/*.yaml``, :mod:`mots.tasks.task_file`) names the Flower app, the
data a participant provides, the model architecture (:mod:`mots.tasks.architectures`), the metric,
the economics (a scenario, :mod:`mots.scenario_file`), the rounds and the platform's evaluation
data. :mod:`mots.tasks.local_data` reads and checks a participant's own data folder,
:mod:`mots.tasks.split` makes such folders from a public set for demos, and
:mod:`mots.tasks.training` trains a task on participants' folders to a model file.
"""
