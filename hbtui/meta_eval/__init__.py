"""Meta-evaluation: a grader judged against physicians' labels, as the reference's
``healthbench_meta_eval.py`` judges it (issue 14, section 1).

data: the official file (downloaded, cached, sha256-checked) or a local one, read a line at a
time; grading: the grader's request for a row; metrics and summary: the reference's agreement
metrics and the physicians' distribution; runner: a meta-eval run, resumable.
"""
