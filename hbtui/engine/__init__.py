"""The run: plan, generate, grade, persist, resume; reached from the app and the CLI only
through ``hbtui.services``.

- ``run_plan``: the sample of records, the run and its regrades created in the database;
- ``run_settings``: a stored run's settings for a resume, what a resume may not change, hints;
- ``driver``: drives a run to its end: the work read from the database a page at a time,
  replies generated, their criteria graded;
- ``endpoint_pool``: the clients of the endpoints, their limits, live figures and the gate
  (pause, back-pressure) that every new call waits on;
- ``result_writer``: every answer, as a typed record, committed in groups under the run's lease;
- ``run_finish``: the end: the status, the report, the run's folder.
- ``stopping``: Ctrl-C, kill and hangup for a headless command that drives a run.
"""
